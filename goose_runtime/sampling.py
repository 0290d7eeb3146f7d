"""Sampling with a temperature that every method reproduces token for token: Gumbel-max noise fixed
by (seed, prompt, position).

Greedy verification is lossless because the target's choice at a node depends only on the node's
prefix. Sampling keeps that property if its randomness does too: the token at absolute position
``p`` (its index in prompt + output) is

    x_p = argmax_v ( logits_v / T + g_{p,v} ),   g_p ~ Gumbel(0, 1)^V, seeded by (seed, prompt, p)

computed as argmax(logits + T g_p), the same rule without dividing by a tiny T (at 1e-40 the
quotient overflowed to inf). By the Gumbel-max trick x_p ~ softmax(logits / T) given the prefix,
and g_p is independent of the noise that chose the prefix, so the output is a proper sample of
temperature T. The prompt's token ids are in the seed so that the prompts of one run are sampled
independently (with (seed, p) alone two prompts shared their noise, and agreed on most tokens
where the model was unsure). Every tree node at depth d of a cycle whose anchor sits at position
``past`` predicts position ``past + d + 1`` and takes that position's noise; so a draft is
accepted exactly when it is the token ``ar`` would have sampled, and every method emits ``ar``'s
tokens for the same seed (tests/test_sampling.py, on the tiny model and, marked slow, on the real
one). A drafted token is accepted only when it *is* the sample, so acceptance falls with T as the
target's distribution spreads (``docs/bench-runtime.md``, "Sampling").

Top-k, top-p (nucleus) and min-p cuts, as HF ``generate`` applies them after the temperature, keep
the row's k highest logits, then the fewest highest-probability tokens (probabilities at T, over
what top-k kept) whose mass reaches p, then those at least min_p times as probable as the top one
(:mod:`goose_runtime.nucleus`, which finds them from the top of the row); the sample is the argmax
of logits + T g over the kept tokens. A cut is a function of the row alone, so the walk and the
losslessness are as above.

Compromises: the noise is drawn on the CPU (a seeded torch generator per position, ~0.5 ms for
49152 entries, once per position: kept until the cycle that passes it) so the tokens do not depend
on the device's generator; the targets are read only at the nodes that need them (those with
children, then the accepted path's end), a pass over their logits that greedy decoding's numba
readout does not make; a cut adds 0.1-0.3 ms a row (docs/bench-runtime.md).

Example:
    >>> noise = PositionNoise(vocab_size=4, temperature=1.0, seed=7, prompt=[5, 6])
    >>> logits = torch.tensor([[0.0, 3.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]])
    >>> noise.targets(logits, rows=[0, 1], positions=[5, 5])[0] == noise.targets(logits, rows=[1], positions=[5])[0]
    True
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
import torch

from .config import MAX_SEED, MAX_TEMPERATURE
from .nucleus import cut_candidates, surely_kept
from .readout import NaNLogitsError


def prompt_key(prompt: list[int]) -> int:
    """A 64-bit hash of a prompt's token ids, part of every position's seed.

    Example:
        >>> prompt_key([1, 2, 3]) == prompt_key([1, 2, 3]) != prompt_key([1, 2, 4])
        True
    """
    digest = hashlib.blake2b(np.asarray(prompt, dtype=np.int64).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def position_noise(seed: int, position: int, vocab_size: int, prompt: int = 0) -> torch.Tensor:
    """Gumbel(0, 1) noise for one absolute position, ``-log(-log U)`` from fp64 uniforms (their 2**-53
    steps keep the tail out to ~37, where fp32 ones would cut it near 17; U = 0, which would make a
    token unreachable, is moved to the smallest double), from a CPU generator seeded by a hash of
    (seed, prompt key, position). 0.48 ms for 49152 entries on this CPU (torch's ``exponential_``
    took 1.2)."""
    mixed = int(np.random.SeedSequence([int(seed), int(prompt), int(position)]).generate_state(1, np.uint64)[0])
    gen = torch.Generator().manual_seed(mixed & MAX_SEED)
    u = torch.rand(vocab_size, dtype=torch.float64, generator=gen).clamp_(min=torch.finfo(torch.float64).tiny)
    return u.log_().neg_().log_().neg_().to(torch.float32)


class PositionNoise:
    """The noise of every position a decoder has drafted at, kept until a cycle starts past it."""

    def __init__(self, vocab_size: int, temperature: float, seed: int, device: str | torch.device = "cpu", *,
                 prompt: list[int] = (), top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0) -> None:
        if not (math.isfinite(temperature) and 0 < temperature <= MAX_TEMPERATURE) or not 0 <= seed <= MAX_SEED:
            raise ValueError(f"sampling needs a temperature in (0, {MAX_TEMPERATURE:g}] and a seed in [0, 2**63), "
                             f"got {temperature} and {seed}")
        if top_k < 0 or not 0 < top_p <= 1 or not 0 <= min_p <= 1:
            raise ValueError(f"top_k must be >= 0, top_p in (0, 1] and min_p in [0, 1], "
                             f"got {top_k}, {top_p} and {min_p}")
        self.vocab_size, self.temperature, self.seed = vocab_size, float(temperature), int(seed)
        self.top_k = int(top_k) if top_k < vocab_size else 0  # a top-k of the whole vocabulary cuts nothing
        self.top_p, self.min_p = float(top_p), float(min_p)
        self.prompt = prompt_key(list(prompt))  # () too: an empty prompt has its own key
        self.device = torch.device(device)
        self._noise: dict[int, torch.Tensor] = {}

    def forget_before(self, position: int) -> None:
        """Drop the noise of positions before ``position`` (no later cycle predicts them)."""
        for p in [p for p in self._noise if p < position]:
            del self._noise[p]

    def noise(self, position: int) -> torch.Tensor:
        if (g := self._noise.get(position)) is None:
            g = position_noise(self.seed, position, self.vocab_size, self.prompt).to(self.device)
            self._noise[position] = g
        return g

    def targets(self, logits: torch.Tensor, *, rows: list[int], positions: list[int]) -> list[int]:
        """The sampled token of each of ``rows`` of ``logits`` (q x V), row ``rows[i]`` predicting
        absolute position ``positions[i]``, after the top-k / top-p / min-p cut (:mod:`.nucleus`). Uncut, the
        rows of one position share its noise (one broadcast add per position, no q x V noise matrix);
        cut, each row is cut on its own and sampled among its kept tokens. A row with a NaN logit
        raises NaNLogitsError."""
        if self.top_k or self.top_p < 1 or self.min_p > 0:
            tokens = self._cut_argmax(logits[rows].float(), positions)
            if isinstance(tokens, int):  # the index of a row with a NaN
                raise NaNLogitsError(rows[tokens])
            return tokens
        out = [0] * len(rows)
        by_position: dict[int, list[int]] = {}
        for i, p in enumerate(positions):
            by_position.setdefault(p, []).append(i)
        for p, idx in by_position.items():
            picked = logits[[rows[i] for i in idx]].float()
            values, tokens = (picked + self.temperature * self.noise(p)[: picked.shape[-1]]).max(dim=-1)
            if bool((nan := torch.isnan(values)).any()):  # max propagates NaN: the row has one
                raise NaNLogitsError(rows[idx[int(nan.nonzero()[0, 0])]])
            for i, t in zip(idx, tokens.tolist()):
                out[i] = t
        return out

    def _cut_argmax(self, picked: torch.Tensor, positions: list[int]) -> list[int] | int:
        """argmax(truncate(row) + T g) for each row (or the index of a row with a NaN, which max
        propagates and the cut would compare away), each row cut on its own (:mod:`.nucleus`: the
        result must not depend on the other rows). Without top-k: the uncut sample where the cut
        surely keeps it, so it is the kept tokens' argmax too (always when it is the row's top
        token, else where :func:`~goose_runtime.nucleus.surely_kept` says so); the other rows,
        and every row under top-k, take the argmax over the kept tokens' own noise (an exact tie: the
        lowest token id, as the uncut argmax and greedy's; ``ids`` come in top-k's order)."""
        noise = [self.noise(p)[: picked.shape[-1]] for p in positions]
        top, top_tokens = picked.max(dim=-1)  # exact, as the add below: no sum the batch could round
        if bool((nan := torch.isnan(top)).any()):
            return int(nan.nonzero()[0, 0])
        if self.top_k:
            tokens, rows = top_tokens.tolist(), range(len(positions))
        else:
            tokens = (picked + self.temperature * torch.stack(noise)).max(dim=-1).indices.tolist()
            rows = [r for r, (t, first) in enumerate(zip(tokens, top_tokens.tolist())) if t != first
                    and not surely_kept(picked[r], t, self.temperature, self.top_p, self.min_p, top=top[r])]
        for r in rows:
            kept, ids = cut_candidates(picked[r], self.temperature, self.top_k, self.top_p, self.min_p)
            score = kept + self.temperature * noise[r][ids]
            tokens[r] = int(ids[score == score.max()].min())  # an exact tie: the lowest id, as argmax over the row
        return tokens
