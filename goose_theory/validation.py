"""Prediction against measurement for topologies run in the runtime (``goose validate``).

Two predictions of tau for a run, both from a *fitted* acceptance model:

* **a priori**: the exact E[tau] of the topology as exported (its ``predicted_tau``); this is
  what a user is promised before running.
* **realised**: the mean, over the run's verification cycles, of the exact E[tau] of the tree
  the runtime actually built in that cycle. The runtime drops slots it cannot fill (no context
  match, fewer adjacency candidates, a duplicate of a sibling), so this one separates "the
  acceptance model is wrong" from "the tree was not what the topology asked for".

The measured tau of a run is a ratio of sums over cycles (tokens / verification calls). Cycles
within a prompt are correlated, so the prompt is the unit: :func:`ratio_ci` is a t interval
(n - 1 degrees of freedom) on the log of the ratio, with the delta method's standard error over
prompts. A percentile bootstrap over prompts, used before, covered the truth in only 70-87% of
draws at 5-10 prompts (goose@8 on subsets of the 16 traced prompts, in a review); the t interval
comes closer to its 95%.

How close can a prediction get on n held-out prompts at all? Prompts differ (tau per prompt
spans 1.4-3.3 on HumanEval for one method), so even an *exact* model, fitted on n_fit prompts and
checked on n_hold others from the same population, misses by the difference of two sample
ratios. :func:`split_noise` gives that miss's 95% half-width from the prompts' spread: it is the
yardstick for ``error_pct`` in ``goose validate``. :func:`paired_ratio_ci` compares two methods on
the same prompts, which removes the prompts' shared difficulty.

Example:
    >>> est, lo, hi = ratio_ci([10, 12, 30], [5, 6, 10])
    >>> round(est, 4), lo < est < hi
    (2.4762, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import os

import numpy as np
import pandas as pd

from .acceptance import Acceptance
from .topology import Topology
from .traceio import open_trace
from .yields import fallback_model_name, yield_with_fallback


def _t(level: float, df: int | None) -> float:
    """Two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom (None: normal)."""
    from scipy.stats import norm, t
    return float(norm.ppf(0.5 + level / 2.0) if df is None else t.ppf(0.5 + level / 2.0, df))


def _influence(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Per-prompt influence on log(sum(num) / sum(den)): (num_i - R den_i) / mean(num) (delta
    method; its mean is 0 and its sd / sqrt(n) is the ratio's relative standard error)."""
    return (num - num.sum() / den.sum() * den) / num.mean()


def _arrays(*columns: Sequence[float]) -> list[np.ndarray] | None:
    """Equal-length float arrays with positive sums, or None."""
    arrays = [np.asarray(c, dtype=np.float64) for c in columns]
    n = arrays[0].shape
    if any(a.shape != n or a.ndim != 1 or a.size == 0 or not a.sum() > 0 for a in arrays):
        return None
    return arrays


def prompt_totals(path: str | os.PathLike) -> pd.DataFrame:
    """Tokens (the sum of tau) and verification calls per ``(method, benchmark, prompt_id)`` of a
    trace file, from its root rows (one per cycle); the file is validated (``open_trace``: a bad
    one is a one-line ``TraceFileError``) and each method's prompts keep the file's order. A
    prompt id is unique within its set only, hence the benchmark in the key.

    Example:
        >>> totals = prompt_totals("traces/humaneval-b8.parquet")
        >>> list(totals.columns), totals.loc["goose@8"].shape[0]
        (['tokens', 'cycles'], 16)
    """
    pf = open_trace(path)
    try:
        rows = pf.read(columns=["method", "benchmark", "prompt_id", "node", "tau"]).to_pandas()
    finally:
        pf.close()
    roots = rows[rows["node"] == 0]
    return roots.groupby(["method", "benchmark", "prompt_id"], sort=False)["tau"].agg(tokens="sum", cycles="size")


def ratio_ci(numerators: Sequence[float], denominators: Sequence[float], *,
             level: float = 0.95) -> tuple[float, float, float]:
    """sum(num) / sum(den) (rows are prompts) with a t interval on its log, delta-method standard
    error over rows; the interval is NaN with one row, everything NaN without rows."""
    arrays = _arrays(numerators, denominators)
    if arrays is None:
        return float("nan"), float("nan"), float("nan")
    num, den = arrays
    estimate = float(num.sum() / den.sum())
    if num.size < 2:
        return estimate, float("nan"), float("nan")
    half = _t(level, num.size - 1) * np.std(_influence(num, den), ddof=1) / np.sqrt(num.size)
    return estimate, float(estimate * np.exp(-half)), float(estimate * np.exp(half))


def cluster_ratio_ci(numerators: Sequence[float], denominators: Sequence[float], *, n_boot: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """sum(num) / sum(den) with a percentile bootstrap interval over clusters (rows). Fine for the
    regime fit's dozens of prompts (``regimefill``); at a handful of rows it is too narrow, and
    :func:`ratio_ci` is the one to use."""
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
    arrays = _arrays(numerators, denominators)
    if arrays is None or arrays[0].size < 2:
        return float("nan")
    return float(np.std(_influence(*arrays), ddof=1))


def split_noise(spread: float, n_fit: int, n_hold: int, *, level: float = 0.95, df: int | None = None) -> float:
    """Half-width (a fraction) of the relative error an exact model shows by prompt sampling alone.

    A model fitted on ``n_fit`` prompts predicts the pooled tau of their population; the
    measurement on ``n_hold`` other prompts is another sample of it. Their relative difference has
    standard deviation ``spread * sqrt(1/n_fit + 1/n_hold)`` (``spread`` from :func:`prompt_spread`),
    times the normal quantile of ``level`` -- or Student's t with ``df`` degrees of freedom when the
    spread itself was estimated from ``df + 1`` prompts (``goose validate`` estimates it from its few
    held-out prompts: a normal quantile then covers only 83-89% of an exact model's errors on the
    shipped traces, in a review). NaN when a count is below 1 or ``df`` below 1.

    Example:
        >>> round(split_noise(0.3, 16, 5), 4)   # the spread of real per-prompt taus, 16 fitted, 5 held out
        0.3013
        >>> round(split_noise(0.3, 16, 5, df=4), 4)   # that spread estimated from the 5 held-out prompts
        0.4268
    """
    if not (n_fit >= 1 and n_hold >= 1) or spread != spread or (df is not None and df < 1):
        return float("nan")
    return float(_t(level, df) * spread * np.sqrt(1.0 / n_fit + 1.0 / n_hold))


def paired_ratio_ci(num_a: Sequence[float], den_a: Sequence[float], num_b: Sequence[float],
                    den_b: Sequence[float], *, level: float = 0.95) -> tuple[float, float, float]:
    """Relative difference of two ratios of sums measured on the *same* prompts, a/b - 1, with a t
    interval (n - 1 degrees of freedom) on log(a/b); row i of a and b is one prompt, and the
    standard error is the delta method's over the per-prompt differences of influence.

    Pairing removes the prompts' shared difficulty, so "is the topology below goose at the same
    budget?" is answered far more sharply than by comparing two separate intervals. (A percentile
    bootstrap over prompts, used before, covered only 70-82% at 5 prompts in a review.)

    Example:
        >>> d, lo, hi = paired_ratio_ci([6, 9], [3, 3], [4, 6], [2, 2])
        >>> round(d, 4), round(lo, 4), round(hi, 4)   # a is exactly b on both prompts
        (0.0, 0.0, 0.0)
    """
    arrays = _arrays(num_a, den_a, num_b, den_b)
    if arrays is None:
        return float("nan"), float("nan"), float("nan")
    a_num, a_den, b_num, b_den = arrays
    log_ratio = np.log((a_num.sum() / a_den.sum()) / (b_num.sum() / b_den.sum()))
    if a_num.size < 2:
        return float(np.expm1(log_ratio)), float("nan"), float("nan")
    u = _influence(a_num, a_den) - _influence(b_num, b_den)
    half = _t(level, a_num.size - 1) * np.std(u, ddof=1) / np.sqrt(a_num.size)
    return float(np.expm1(log_ratio)), float(np.expm1(log_ratio - half)), float(np.expm1(log_ratio + half))
