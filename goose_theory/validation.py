"""Prediction against measurement for topologies run in the runtime (``goose validate``).

Two predictions of tau for a run, both from a *fitted* acceptance model:

* **a priori**: the exact E[tau] of the topology as exported (its ``predicted_tau``); this is
  what a user is promised before running.
* **realised**: the mean, over the run's verification cycles, of the exact E[tau] of the tree
  the runtime actually built in that cycle. The runtime drops slots it cannot fill (no context
  match, fewer adjacency candidates, a duplicate of a sibling), so this one separates "the
  acceptance model is wrong" from "the tree was not what the topology asked for".

The measured tau of a run is a ratio of sums over cycles (tokens / verification calls); its 95%
interval comes from a bootstrap over prompts, since cycles within a prompt are correlated.

How close can a prediction get on n held-out prompts at all? Prompts differ (tau per prompt
spans 1.4-3.3 on HumanEval for one method), so even an *exact* model, fitted on n_fit prompts and
checked on n_hold others from the same population, misses by the difference of two sample
ratios. :func:`split_noise` gives that miss's 95% half-width from the prompts' spread (the delta
method for a ratio of sums): it is the yardstick for ``error_pct`` in ``goose validate``.

Example:
    >>> est, lo, hi = cluster_ratio_ci([10, 12, 30], [5, 6, 10], n_boot=200, seed=0)
    >>> round(est, 4), lo <= est <= hi
    (2.4762, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .acceptance import Acceptance
from .topology import Topology
from .yields import fallback_model_name, yield_with_fallback

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def cluster_ratio_ci(numerators: Sequence[float], denominators: Sequence[float], *, n_boot: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """sum(num) / sum(den) with a percentile bootstrap interval over clusters (rows)."""
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.shape != den.shape or num.size == 0 or den.sum() <= 0:
        return float("nan"), float("nan"), float("nan")
    estimate = float(num.sum() / den.sum())
    if num.size == 1:
        return estimate, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, num.size, size=(n_boot, num.size))
    draws = num[picks].sum(axis=1) / np.maximum(den[picks].sum(axis=1), 1e-300)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return estimate, float(lo), float(hi)


@dataclass(frozen=True)
class RealisedPrediction:
    """Mean exact E[tau] over the trees actually verified, and the model it used."""

    tau: float
    cycles: int
    model: str
    shapes: int


def realised_prediction(trees: Iterable[tuple[tuple[int, ...], tuple[str, ...], tuple[int, ...]]],
                        acceptance: Acceptance) -> RealisedPrediction:
    """Average exact E[tau] over ``(parent, source, rank)`` trees (one per cycle).

    Identical shapes are evaluated once. Where the exclusive model is infeasible on a realised
    tree (children's q summing above 1), that tree alone is evaluated under the independent model,
    and ``model`` says on how many cycles (as fit-acceptance's goodness of fit does).
    """
    counts: dict[tuple, int] = {}
    for tree in trees:
        counts[tree] = counts.get(tree, 0) + 1
    if not counts:
        return RealisedPrediction(float("nan"), 0, acceptance.model, 0)
    total, weighted, fallback_cycles = 0, 0.0, 0
    for key, n in counts.items():
        result, fell_back = yield_with_fallback(Topology.from_nodes(zip(*key), max_depth=64, max_spine=64), acceptance)
        total += n
        weighted += result.expected_tau * n
        fallback_cycles += n if fell_back else 0
    return RealisedPrediction(float(weighted / total), total, fallback_model_name(acceptance.model, fallback_cycles),
                              len(counts))


def prompt_spread(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """Relative spread per prompt of the ratio sum(num) / sum(den): sd(num_i - R den_i) / mean(num).

    Divided by sqrt(n), it is the relative standard error of the pooled ratio over n prompts drawn
    like these (delta method). NaN with fewer than two prompts.

    Example:
        >>> round(prompt_spread([10, 20, 30], [5, 10, 15]), 6)   # every prompt at tau 2: no spread
        0.0
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.shape != den.shape or num.size < 2 or den.sum() <= 0 or num.sum() <= 0:
        return float("nan")
    ratio = num.sum() / den.sum()
    return float(np.std(num - ratio * den, ddof=1) / num.mean())


def split_noise(spread: float, n_fit: int, n_hold: int, *, z: float = Z95) -> float:
    """Half-width (a fraction) of the relative error an exact model shows by prompt sampling alone.

    A model fitted on ``n_fit`` prompts predicts the pooled tau of their population; the
    measurement on ``n_hold`` other prompts is another sample of it. Their relative difference has
    standard deviation ``spread * sqrt(1/n_fit + 1/n_hold)`` (``spread`` from
    :func:`prompt_spread`); times ``z`` (95% by default). NaN when a count is below 1.

    Example:
        >>> round(split_noise(0.3, 16, 5), 4)   # the spread of real per-prompt taus, 16 fitted, 5 held out
        0.3013
    """
    if not (n_fit >= 1 and n_hold >= 1) or spread != spread:
        return float("nan")
    return float(z * spread * np.sqrt(1.0 / n_fit + 1.0 / n_hold))


def paired_ratio_ci(num_a: Sequence[float], den_a: Sequence[float], num_b: Sequence[float],
                    den_b: Sequence[float], *, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Relative difference of two ratios of sums measured on the *same* prompts, a/b - 1, with a
    percentile bootstrap interval that resamples prompts jointly (row i of a and b is one prompt).

    Pairing removes the prompts' shared difficulty, so "is the topology below goose at the same
    budget?" is answered far more sharply than by comparing two separate intervals.

    Example:
        >>> d, lo, hi = paired_ratio_ci([6, 9], [3, 3], [4, 6], [2, 2], n_boot=100)
        >>> round(d, 4), round(lo, 4), round(hi, 4)   # a is exactly b on both prompts
        (0.0, 0.0, 0.0)
    """
    a_num, a_den, b_num, b_den = (np.asarray(x, dtype=np.float64) for x in (num_a, den_a, num_b, den_b))
    n = a_num.size
    if any(x.shape != (n,) for x in (a_den, b_num, b_den)) or n == 0 or min(a_den.sum(), b_num.sum()) <= 0:
        return float("nan"), float("nan"), float("nan")
    estimate = float((a_num.sum() / a_den.sum()) / (b_num.sum() / b_den.sum()) - 1.0)
    if n == 1:
        return estimate, float("nan"), float("nan")
    picks = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    ratio_a = a_num[picks].sum(1) / np.maximum(a_den[picks].sum(1), 1e-300)
    ratio_b = b_num[picks].sum(1) / np.maximum(b_den[picks].sum(1), 1e-300)
    lo, hi = np.percentile(ratio_a / np.maximum(ratio_b, 1e-300) - 1.0, [2.5, 97.5])
    return estimate, float(lo), float(hi)
