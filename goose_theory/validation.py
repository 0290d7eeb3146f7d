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

Example:
    >>> est, lo, hi = cluster_ratio_ci([10, 12, 30], [5, 6, 10], n_boot=200, seed=0)
    >>> round(est, 4), lo <= est <= hi
    (2.4286, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .acceptance import Acceptance
from .topology import Topology
from .yields import fallback_model_name, yield_with_fallback


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
