"""Top-k, top-p (nucleus) and min-p cuts of a sampled target's distribution, as HF ``generate``'s
warpers apply them after the temperature: the k highest logits, then the fewest highest-probability
tokens (probabilities at temperature T, over what top-k kept) whose mass reaches p, then the tokens
at least min_p times as probable as the top one (l >= l_top + T ln min_p: a threshold, no sum).

:func:`cut_candidates` finds the tokens that survive a cut from the top of a row only: a sort of
49152 logits took 2.7 ms a row on the CPU, their top 64 0.1 ms, and on the default model the nucleus
at T 1, p 0.95 held 1-11 tokens in the median row (docs/bench-runtime.md). :func:`inside_nucleus`
says in one pass whether a given token survives top-p, :func:`surely_kept` whether it survives top-p
and min-p (the sampler asks it of the uncut sample).
:func:`truncate` is the cut as a whole row (-inf outside), the form tests compare with HF's.

Everything works on one row at a time: a row's cut must not depend on the other rows of a call
(ar reads one row a step, a tree several), and a batched sum over rows of different widths, or one
that torch splits differently for one row than for eight, can round differently.

Compromises: a token tied with the last one kept is kept too (HF's sort breaks such a tie by
index); the mass is summed in fp64 (HF's softmax in fp32), so a token whose running mass lies within
fp32 rounding of p may fall on the other side of HF's cut (in 3 of 47867 random rows of a review);
min-p's ratio is taken in fp64 too (HF: fp32 probabilities; below ~1e-45 HF's min_p times the top
probability underflows to 0 and keeps every token, this cut keeps those above the ratio, the others
being too improbable ever to be drawn).

Example:
    >>> truncate(torch.tensor([[2.0, 1.0, 0.0, 1.0]]), 1.0, top_k=1)
    tensor([[2., -inf, -inf, -inf]])
    >>> truncate(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 1.0, top_p=0.7)  # 0.5 + 0.3 reach 0.7
    tensor([[-0.6931, -1.2040,    -inf]])
    >>> truncate(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 1.0, min_p=0.5)  # 0.2 < 0.5 * 0.5
    tensor([[-0.6931, -1.2040,    -inf]])
"""
from __future__ import annotations

import math

import torch

FIRST_LOOK = 64  # the highest logits a nucleus is first looked for in (then 8 times more until it fits)
# inside_nucleus says "inside" only this far below p: its sum and cut_candidates' running mass add
# the same fp64 terms in other orders (at most ~V * 1.1e-16 apart), so a token it passes is kept by
# the cut too; a token nearer p goes to cut_candidates, which decides
INSIDE_MARGIN = 1e-9


def cut_candidates(row: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0,
                   min_p: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids) of one row (V logits): its highest m logits and their token ids, highest first,
    the values of the tokens the cut removes set to -inf; m covers every kept token (ties at the
    edge included). ``top_k`` 0 (or >= V), ``top_p`` 1 and ``min_p`` 0: no cut of that kind."""
    vocab = row.shape[-1]
    if 0 < top_k < vocab:
        values, ids = _top_with_ties(row, top_k)
        log_norm = _log_norm(values, values[0], temperature) if top_p < 1 else None  # the nucleus among them
        return _cut_sorted(values, values[0], log_norm, temperature, top_p, min_p), ids
    if top_p >= 1 and min_p <= 0:
        return row.sort(descending=True)
    # top-p (its normaliser the whole row's) and / or min-p: the kept tokens are looked for among the top k
    top = row.max()
    log_norm = _log_norm(row, top, temperature) if top_p < 1 else None
    k = min(FIRST_LOOK, vocab)
    while True:
        values, ids = row.topk(k)
        cut = _cut_sorted(values, top, log_norm, temperature, top_p, min_p)
        # done when the cut ends before the last token looked at (a kept last one: a tie, or the
        # mass or the threshold not reached yet)
        if k == vocab or not bool(torch.isfinite(cut[-1])):
            return cut, ids
        k = min(8 * k, vocab)


def _cut_sorted(values: torch.Tensor, top: torch.Tensor, log_norm: torch.Tensor | None, temperature: float,
                top_p: float, min_p: float) -> torch.Tensor:
    """``values`` (one row's highest, sorted) with those outside the nucleus and below min-p set to -inf."""
    if top_p < 1:
        values = _nucleus(values, top, log_norm, temperature, top_p)
    if min_p > 0:
        values = values.masked_fill(~_min_p_kept(values, top, temperature, min_p), -math.inf)
    return values


def _min_p_kept(values: torch.Tensor, top: torch.Tensor, temperature: float, min_p: float) -> torch.Tensor:
    """Which of ``values`` are at least ``min_p`` times as probable as the row's ``top`` at T: the
    same fp64 operations element by element wherever it is asked (cut or single token), so the
    answers agree."""
    return (values.double() - float(top)) / temperature >= math.log(min_p)


def _top_with_ties(row: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The top ``k`` of a row, widened to every token tied with its k-th (a -inf k-th: not widened,
    such tokens are never sampled)."""
    values, ids = row.topk(min(k + 1, row.shape[-1]))
    kth = values[k - 1]
    if k < len(values) and bool(values[k] == kth) and bool(kth > -math.inf):
        return row.topk(int((row >= kth).sum()))
    return values[:k], ids[:k]


def _log_norm(row: torch.Tensor, top: torch.Tensor, temperature: float) -> torch.Tensor:
    """log sum_v exp((l_v - top) / T) over ``row`` in fp64 (0 at the top and -inf, never NaN, for
    the rest at any T > 0: fp32 would round a T below 1.4e-45 to 0)."""
    return ((row.double() - float(top)) / temperature).logsumexp(dim=-1)


def _nucleus(values: torch.Tensor, top: torch.Tensor, log_norm: torch.Tensor, temperature: float,
             top_p: float) -> torch.Tensor:
    """``values`` (one row's, sorted, highest first) with those outside the nucleus set to -inf;
    ``top`` is the row's highest logit and ``log_norm`` its :func:`_log_norm`."""
    probs = ((values.double() - float(top)) / temperature - log_norm).exp()
    above = probs.cumsum(dim=-1) - probs  # the mass ranked above each token
    kept = max(int((above < top_p).sum()), 1)  # nothing is above the first
    return values.masked_fill(values < values[kept - 1], -math.inf)


def inside_nucleus(row: torch.Tensor, token: int, temperature: float, top_p: float) -> bool:
    """Whether the top-p cut surely keeps ``token`` of one row: the mass of the tokens above it is
    below ``top_p`` (ties kept, as :func:`cut_candidates`) by :data:`INSIDE_MARGIN`. A few passes
    over the row however wide its nucleus; False near p, where :func:`cut_candidates` must decide.

    Example:
        >>> [inside_nucleus(torch.log(torch.tensor([0.5, 0.3, 0.2])), t, 1.0, 0.7) for t in range(3)]
        [True, True, False]
    """
    mass = ((row.double() - float(row.max())) / temperature).exp()  # fp64, as _log_norm
    above = mass.masked_fill(row <= row[token], 0.0).sum()
    return bool(above < top_p * (1 - INSIDE_MARGIN) * mass.sum())


def surely_kept(row: torch.Tensor, token: int, temperature: float, top_p: float = 1.0, min_p: float = 0.0, *,
                top: torch.Tensor | None = None) -> bool:
    """Whether the top-p and min-p cuts (no top-k) surely keep ``token`` of one row: min-p's test
    exactly as the cut makes it, top-p's by :func:`inside_nucleus`. ``top``: the row's highest logit
    where the caller has it already (a max is exact, so a batch's equals the row's), saving a pass.

    Example:
        >>> [surely_kept(torch.log(torch.tensor([0.5, 0.3, 0.2])), t, 1.0, min_p=0.5) for t in range(3)]
        [True, True, False]
    """
    if min_p > 0:
        top = row.max() if top is None else top
        if not bool(_min_p_kept(row[token : token + 1], top, temperature, min_p)):
            return False
    return top_p >= 1 or inside_nucleus(row, token, temperature, top_p)


def truncate(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0,
             min_p: float = 0.0) -> torch.Tensor:
    """``logits`` (n x V) with every token the cut removes (:func:`cut_candidates`, row by row) set
    to -inf."""
    if not (0 < top_k < logits.shape[-1] or top_p < 1 or min_p > 0):
        return logits
    out = torch.full_like(logits, -math.inf)
    for r in range(logits.shape[0]):
        values, ids = cut_candidates(logits[r], temperature, top_k, top_p, min_p)
        out[r, ids] = values
    return out
