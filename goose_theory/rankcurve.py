"""Transition acceptance by candidate rank, and its tail past the ranks the traces placed.

Why: the optimiser may hang candidates of every rank up to ``top_k - 1``, but the traces it is
fitted from place few of them. goose@8 puts root transitions of ranks 0-3 only (its width is
ceil(B / 2)), and chains below transitions almost only at rank 0. A rank without data used to
take the rate of the last rank with data, which gave the at-scale fits (goose@8 and iso:2@8
traces, ``bench/holdout_large.sh``) a flat tail: root ranks 4-9 at rank 3's rate and chain rank 1
at rank 0's (0.44 on HumanEval, where the 21 rank-1 chain nodes matched 0.24 and held-out runs
0.10). Every exported unmatched tree then spent 6 of its 15 slots on root ranks 4-9, which the
held-out runs accepted 0.7-2.7% of the time, while the rank-0 chain one level deeper went unused
(docs/two-regime.md, section 14).

Now the tail decays as a power law in the rank: p(r) = p(last) ((last + 1) / (r + 1))^a past the
last populated rank, with one exponent ``a`` per fit (:func:`tail_exponent`), fitted to the
unmatched root transitions, the one curve with several populated ranks in every trace. A curve
with a single populated rank (the chains) gets its whole shape from it.

Compromise: one exponent for every kind of slot. Held-out chains decay faster than root
transitions (chain rank 1 at 0.16-0.20 of rank 0 on the three at-scale validation traces, where
the fitted exponents 1.44-1.74 give 0.30-0.37), so chain rank 1 stays overrated, if far less than
at rank 0's rate.

Example:
    >>> k, n = np.array([250., 85., 48., 35.]), np.array([1000.] * 4)
    >>> a = tail_exponent(k, n)
    >>> round(a, 2), [round(x, 4) for x in extend_tail([0.25, 0.085, 0.048, 0.035], a, size=6)]
    (1.47, [0.25, 0.085, 0.048, 0.035, 0.0252, 0.0193])
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .fitcheck import curve_test

MIN_N = 30            # reached nodes for a rank's own rate (sparser ranks are pooled or extrapolated)
MAX_EXPONENT = 4.0    # a steeper fitted decay is noise on two or three ranks


def rates_by(nodes: pd.DataFrame, *, by: str, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(matched, reached) counts of ``nodes`` per value of column ``by``, the last bin pooling
    every value >= ``size - 1``."""
    k, n = np.zeros(size), np.zeros(size)
    if len(nodes):
        g = nodes.groupby(nodes[by].clip(upper=size - 1))["match"].agg(["sum", "count"])
        k[g.index.to_numpy()], n[g.index.to_numpy()] = g["sum"].to_numpy(), g["count"].to_numpy()
    return k, n


def bin_curve(k: np.ndarray, n: np.ndarray, *, start: int, fallback: float) -> list[float]:
    """Per-bin rates in [0, 1] from bin ``start`` on, the sparse tail (bins under 30 nodes) pooled
    into the last populated bin; ``[fallback]`` without data.

    Always the curve, even where a test would not reject a constant: the optimiser adds nodes
    where q is highest, and a constant over ranks (0.30 for every chain rank on mtbench's
    goose@8 trees, against 0.36 / 0.08 / 0.03 by rank) makes it stack low ranks it overrates."""
    if n[start:].sum() <= 0:
        return [fallback]
    return [min(max(x, 0.0), 1.0) for x in curve_test(k, n, start=start).curve]


def tail_exponent(matched: np.ndarray, reached: np.ndarray, *, min_n: int = MIN_N) -> float:
    """``a`` of p(r) ~ (r + 1)^-a: least squares of log p on log(r + 1) over the ranks with at least
    ``min_n`` reached nodes and one match, each weighted by its matches (the inverse variance of
    log p); 0 (a flat tail, the old rule) with fewer than two such ranks, at most ``MAX_EXPONENT``."""
    k, n = np.asarray(matched, float), np.asarray(reached, float)
    used = np.flatnonzero((n >= min_n) & (k > 0))
    if used.size < 2:
        return 0.0
    x, y, w = np.log(used + 1.0), np.log(k[used] / n[used]), k[used]
    xm, ym = np.average(x, weights=w), np.average(y, weights=w)
    slope = np.sum(w * (x - xm) * (y - ym)) / np.sum(w * (x - xm) ** 2)
    return float(min(max(-slope, 0.0), MAX_EXPONENT))


def extend_tail(curve: Sequence[float], exponent: float, *, size: int) -> list[float]:
    """``curve`` (rates of ranks 0 .. len - 1) continued to ``size`` ranks by the power law."""
    last = len(curve) - 1
    return [float(curve[r]) if r <= last else float(curve[last]) * ((last + 1) / (r + 1)) ** exponent
            for r in range(size)]


def rank_curve(sel: pd.DataFrame, ref: pd.DataFrame, *, exponent: float, size: int, min_n: int = MIN_N) -> list[float]:
    """p by rank from ``sel`` where a rank has >= ``min_n`` reached nodes; past that, the shape of
    the ``ref`` curve (every method), itself continued by :func:`extend_tail`, scaled to ``sel``'s
    level at its last populated rank. Small trees rarely place ranks >= 1 below a transition, and
    repeating rank 0's rate there would overrate them. Non-increasing: candidates come best-first,
    so a rate that rises with rank is noise, which the optimiser buys (stdlib chains: 0.03 at ranks
    8-9 after 0 at 5-7, placed in every unmatched tree and accepted 0.005 times per cycle on
    held-out prompts)."""
    ks, ns = rates_by(sel, by="rank", size=size)
    kr, nr = rates_by(ref, by="rank", size=size)
    if nr.sum() <= 0:
        if ns.sum() <= 0:
            return [0.0]
        own = bin_curve(ks, ns, start=0, fallback=0.0)
        return [float(x) for x in np.minimum.accumulate(extend_tail(own, exponent, size=size))]
    shape = np.array(extend_tail(curve_test(kr, nr, start=0, min_n=min_n).curve, exponent, size=size))
    good = np.flatnonzero(ns >= min_n)
    if good.size == 0:
        level = ks.sum() / ns.sum() if ns.sum() else 1.0
        expect = float(ns @ shape / ns.sum()) if ns.sum() else 1.0
        scale = level / expect if expect > 0 else 1.0
        out = [min(max(x * scale, 0.0), 1.0) for x in shape]
    else:
        last = int(good[-1])
        out = [ks[r] / ns[r] if ns[r] > 0 else shape[r] for r in range(last + 1)]
        scale = out[last] / shape[last] if shape[last] > 0 else 1.0
        out += [min(shape[r] * scale, 1.0) for r in range(last + 1, size)]
    return [float(x) for x in np.minimum.accumulate(out)]
