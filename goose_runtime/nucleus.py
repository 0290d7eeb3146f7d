"""Top-k and top-p (nucleus) cuts of a sampled target's distribution, as HF ``generate``'s warpers
apply them after the temperature: the k highest logits, then the fewest highest-probability tokens
(probabilities at temperature T, over what top-k kept) whose mass reaches p.

:func:`cut_candidates` finds the tokens that survive a cut from the top of each row only: a sort of
49152 logits took 2.7 ms a row on the CPU, their top 64 0.1 ms, and on the default model the nucleus
at T 1, p 0.95 held 1-11 tokens in the median row (at most 991; docs/bench-runtime.md). The sampler
then needs the noise of those tokens alone (:class:`goose_runtime.sampling.PositionNoise`).
:func:`truncate` is the same cut as a whole row (-inf outside), the form tests compare with HF's.

Compromises: a token tied with the last one kept is kept too (HF's sort breaks such a tie by
index); the row's normaliser is summed in fp32, as HF's softmax, but the running mass in fp64 and in
another order, so a token whose running mass lies within fp32 rounding of p may fall on the other
side of HF's cut (and of :func:`inside_nucleus`'s, which sums in fp32: either way the sample is a
function of the row and its noise alone, which is all losslessness needs).

Example:
    >>> truncate(torch.tensor([[2.0, 1.0, 0.0, 1.0]]), 1.0, top_k=1)
    tensor([[2., -inf, -inf, -inf]])
    >>> truncate(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 1.0, top_p=0.7)  # 0.5 + 0.3 reach 0.7
    tensor([[-0.6931, -1.2040,    -inf]])
"""
from __future__ import annotations

import math

import torch

FIRST_LOOK = 64  # the highest logits a nucleus is first looked for in (then 8 times more until it fits)


def cut_candidates(logits: torch.Tensor, temperature: float, top_k: int = 0,
                   top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids), each n x m: every row's highest m logits and their token ids, highest first,
    the values of the tokens the cut removes set to -inf; m covers every kept token (ties at the
    edge included). ``top_k`` 0 and ``top_p`` 1: no cut of that kind (a call with neither returns
    the whole row, sorted: the caller should not ask)."""
    vocab = logits.shape[-1]
    if 0 < top_k < vocab:
        values, ids = _top_with_ties(logits, top_k)
        if top_p < 1:  # the nucleus among them: top-k's -inf carry no mass
            values = _nucleus(values, values[:, :1], _log_norm(values, values[:, :1], temperature), temperature, top_p)
        return values, ids
    if top_p >= 1:
        return logits.sort(dim=-1, descending=True)
    # top-p alone: the normaliser is the whole row's, the nucleus is looked for among the top k
    top = logits.max(dim=-1, keepdim=True).values
    log_norm = _log_norm(logits, top, temperature)
    k = min(FIRST_LOOK, vocab)
    values, ids = logits.topk(k, dim=-1)
    values = _nucleus(values, top, log_norm, temperature, top_p)
    # a row whose last token looked at is kept may keep more (a tie, or the mass not reached yet):
    # such rows, few, look 8 times wider on their own, until their nucleus ends inside
    for r in torch.isfinite(values[:, -1]).nonzero()[:, 0].tolist() if k < vocab else []:
        wide, row_values = k, values[r : r + 1, :k]
        while wide < vocab and bool(torch.isfinite(row_values[0, -1])):
            wide = min(8 * wide, vocab)
            row_values, row_ids = logits[r : r + 1].topk(wide, dim=-1)
            row_values = _nucleus(row_values, top[r : r + 1], log_norm[r : r + 1], temperature, top_p)
        values, ids = _padded(values, wide), _padded(ids, wide)
        values[r, :wide], ids[r, :wide] = row_values[0], row_ids[0]
    return values, ids


def _padded(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` (n x m) widened to ``width`` columns: -inf values (float) or token 0 (ids; never picked)."""
    if t.shape[-1] >= width:
        return t
    fill = -math.inf if t.is_floating_point() else 0
    return torch.cat([t, t.new_full((t.shape[0], width - t.shape[-1]), fill)], dim=-1)
def _top_with_ties(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The top ``k`` of each row, widened to every token tied with a row's k-th (-inf past it)."""
    values, ids = logits.topk(min(k + 1, logits.shape[-1]), dim=-1)
    kth = values[:, k - 1 : k]
    if k < values.shape[-1] and bool((values[:, k:] == kth).any()):  # a tie crosses the edge: look wider
        values, ids = logits.topk(int((logits >= kth).sum(dim=-1).max()), dim=-1)
        return values.masked_fill(values < kth, -math.inf), ids
    return values[:, :k], ids[:, :k]


def _log_norm(row: torch.Tensor, top: torch.Tensor, temperature: float) -> torch.Tensor:
    """log sum_v exp((l_v - top) / T) over ``row``, in fp32 as HF's softmax (a pass over the row in
    fp64 took twice as long), returned as fp64 for :func:`_nucleus`'s running mass; (l - top) / T
    is 0 at the top and -inf, never NaN, for the rest at a T as small as 1e-40."""
    return ((row - top) / temperature).logsumexp(dim=-1, keepdim=True).double()


def _nucleus(values: torch.Tensor, top: torch.Tensor, log_norm: torch.Tensor, temperature: float,
             top_p: float) -> torch.Tensor:
    """``values`` (sorted, highest first) with those outside the nucleus set to -inf; ``top`` is each
    row's highest logit and ``log_norm`` its :func:`_log_norm`; the running mass in fp64 (k values)."""
    probs = ((values.double() - top.double()) / temperature - log_norm).exp()
    above = probs.cumsum(dim=-1) - probs  # the mass ranked above each token
    kept = (above < top_p).sum(dim=-1, keepdim=True).clamp_(min=1)  # nothing is above the first
    return values.masked_fill(values < values.gather(-1, kept - 1), -math.inf)


def inside_nucleus(logits: torch.Tensor, tokens: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Whether the top-p cut keeps each row's token (n bools): the mass of the tokens above it is
    below ``top_p`` (ties kept, as :func:`cut_candidates`). One pass over the row however wide its
    nucleus: the sampler asks it of the uncut sample first, which lies inside in most rows.

    Example:
        >>> inside_nucleus(torch.log(torch.tensor([[0.5, 0.3, 0.2]] * 3)), torch.tensor([0, 1, 2]), 1.0, 0.7).tolist()
        [True, True, False]
    """
    top = logits.max(dim=-1, keepdim=True).values
    mass = ((logits - top) / temperature).exp_()  # fp32, as _log_norm
    above = mass.masked_fill(logits <= logits.gather(-1, tokens[:, None]), 0.0).sum(dim=-1)
    return above < top_p * mass.sum(dim=-1)


def truncate(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """``logits`` (n x V) with every token the cut removes (:func:`cut_candidates`) set to -inf."""
    if not (0 < top_k < logits.shape[-1] or top_p < 1):
        return logits
    values, ids = cut_candidates(logits, temperature, top_k, top_p)
    return torch.full_like(logits, -math.inf).scatter_(-1, ids, values)
