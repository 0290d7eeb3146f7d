"""How sure is a predicted tau? Cluster-bootstrap intervals on the E[tau] of fixed trees.

fit-acceptance predicts each compared tree's tau (the recommendation's rows) from one fit. The
fit rests on a sample of prompts, so the prediction carries a sampling error of its own, beside
the error of measuring a few held-out prompts (validate's noise band). Every bootstrap draw here
resamples the group's prompts (as :mod:`goose_theory.fit` does for p_s and p_t), re-estimates the
*selected* acceptance model from the draw's counts (the same curves, bins and parent sources as
:func:`goose_theory.fitcheck.check_group` chose, and the draw's spine availability a(d)), and
prices the *same* trees, the ones built from the point estimate. Percentiles over the draws give:

* ``ci95`` of each tree's predicted tau;
* ``gain_ci95`` of its gain over a reference tree (the paper's), *paired*: both priced under the
  same draw, so the variation the two share cancels.

What the interval leaves out: it is sampling error alone. The trees were chosen on the same data
(the optimum under the point estimate; its gain tends to sit high in its own interval), and a
model that is wrong (one regime where the matcher offers a spine in only some cycles predicted
22-70% above goose's measured tau, docs/two-regime.md) is as wrong under every draw.

Compromises: the interval is conditional on the chosen model (re-running the curve tests on
every draw would also count the choice's own uncertainty, but took fit-acceptance of the shipped
traces by benchmark and method, 27 groups at 1,000 draws, from 3.1 s to 16.8 s here; this way
4.8 s); one regime, as the recommendation itself (``--regimes``' files are not covered);
percentile intervals, somewhat narrow with few prompts (tests/test_fitinterval.py: 20 prompts
with prompt-level random effects, 52 of 60 intervals covered the truth).

Example:
    >>> from goose_theory.synthetic import SyntheticSpec, synthetic_table
    >>> from goose_theory.fitcounts import count_tables
    >>> from goose_theory.fit import fit_counts
    >>> from goose_theory.fitcheck import check_group
    >>> from goose_theory.optimize import build_topology
    >>> from goose_theory.acceptance import Acceptance
    >>> truth = build_topology("optimal", Acceptance.parse(0.6, 0.2), budget=4)
    >>> fit = fit_counts(count_tables([synthetic_table(SyntheticSpec(0.6, 0.2, (truth.topology,)), seed=1)]))
    >>> checks = check_group(fit.overall, fit.counts)
    >>> (lo, hi), = [i.ci95 for i in tree_intervals(fit.overall, fit.counts, checks, [truth.topology], seed=0)]
    >>> lo < truth.predicted_tau < hi
    True
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from .acceptance import pad_with_last
from .fit import GroupFit
from .fitcheck import GroupChecks, availability_rows, fill_gaps, fold_availability, pool_tail
from .recommend import Recommendation
from .topology import Topology
from .yields import taus_by_draw


@dataclass(frozen=True)
class TreeInterval:
    """95% percentile intervals over bootstrap draws for one tree: its predicted tau, and its gain
    over the reference tree priced under the same draw (None without a reference)."""

    ci95: tuple[float, float]
    gain_ci95: tuple[float, float] | None
    draws: int


def group_seed(seed: int, label: str) -> list[int]:
    """A seed for one group's draws: the fit's seed and a stable hash of the group's label (Python's
    ``hash`` of a string changes from run to run)."""
    return [seed, zlib.crc32(label.encode("utf-8")), 7]


def prompt_weights(prompts: int, draws: int, seed: Sequence[int]) -> np.ndarray:
    """(draws, prompts) multinomial weights: how often each prompt is drawn (each row sums to
    ``prompts``), as the fit's own cluster bootstrap draws them."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(prompts, np.full(prompts, 1.0 / prompts), size=draws).astype(np.float64)


def draw_totals(group: GroupFit, counts: Any, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Each draw's summed counts (draws first): spine by depth, transitions by rank, by parent
    source and rank (where counted), and the matcher's offers per cycle (a histogram). ``weights``:
    (draws, prompts), prompts in the order of ``counts.cluster_prompt``'s values in the group."""
    c = group.clusters
    units, per_cluster = np.unique(counts.cluster_prompt[c], return_inverse=True)
    if weights.ndim != 2 or weights.shape[1] != units.size:
        raise ValueError(f"weights must be (draws, {units.size}) for this group's prompts, got {weights.shape}")
    names = {"sm": "spine_matched", "sr": "spine_reached", "rm": "rank_matched", "rr": "rank_reached",
             "pm": "parent_rank_matched", "pr": "parent_rank_reached", "offers": "spine_avail"}
    totals = {}
    for key, name in names.items():
        table = getattr(counts, name, None)
        if table is not None:  # a prompt's counts over its clusters (runs, groups), then weighted per draw
            per_unit = np.zeros((units.size, *table.shape[1:]))
            np.add.at(per_unit, per_cluster, table[c])
            totals[key] = np.tensordot(weights, per_unit, axes=1)
    return totals


def binned_rates(matched: np.ndarray, reached: np.ndarray, *, start: int, bins: int) -> np.ndarray:
    """Each draw's (row's) matched / reached in ``bins`` bins from column ``start``, the last bin
    pooling the tail, as :func:`goose_theory.fitcheck.curve_test` bins a supported curve; a bin
    without data takes :func:`~goose_theory.fitcheck.fill_gaps`' value, a draw without any NaN
    (the caller decides: see :func:`_transition_rates`, :func:`draw_parameters`).

    Example:
        >>> binned_rates(np.array([[0, 6, 2, 1]]), np.array([[0, 10, 10, 10]]), start=1, bins=2).tolist()
        [[0.6, 0.15]]
    """
    kb, nb = pool_tail(matched[:, start:], bins), pool_tail(reached[:, start:], bins)
    with np.errstate(all="ignore"):
        rates = np.where(nb > 0, kb / np.where(nb > 0, nb, 1.0), np.nan)
        pooled = kb.sum(1) / nb.sum(1)
    for row in np.flatnonzero(np.isnan(rates).any(1) & (nb.sum(1) > 0)):
        fill_gaps(rates[row], pooled[row])
    return np.clip(rates, 0.0, 1.0)  # NaN stays NaN


def _bins(test: Any) -> int:
    """How many bins a fitted curve has: its own where the test supports it, else 1 (a scalar)."""
    return len(test.curve) if test.supported else 1


def _transition_rates(checks: GroupChecks, totals: dict[str, np.ndarray]) -> np.ndarray:
    """Per draw, (draws, 3, ranks) p_t by the parent's source (root, spine, transition) and rank:
    pooled over sources, or each source's own where the fit chose p_t by parent. As the fit
    (``fitcheck._source_p_t``): a source without reached nodes in a draw takes the draw's pooled
    rates, and a draw without any transition node rates them 0."""
    pooled = np.nan_to_num(binned_rates(totals["rm"], totals["rr"], start=0, bins=_bins(checks.transition_rank)))
    if checks.parent is None or not checks.parent.supported:
        return np.stack([pooled] * 3, axis=1)
    own = [binned_rates(totals["pm"][:, k], totals["pr"][:, k], start=0, bins=_bins(test))
           for k, test in enumerate(checks.parent_rank)]
    width = max(r.shape[1] for r in (pooled, *own))
    rates = np.stack([pad_with_last(r, width) for r in own], axis=1)
    unseen = np.isnan(rates)  # whole rows: binned_rates fills every gap of a row with data
    rates[unseen] = np.broadcast_to(pad_with_last(pooled, width)[:, None, :], rates.shape)[unseen]
    return rates


def draw_parameters(checks: GroupChecks, totals: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each draw's p_s by spine depth (draws, depths) and p_t by parent source and rank (draws, 3,
    ranks): the fit's selected model (``checks``) re-estimated from the draw's ``totals``, with the
    draw's a(d) folded into p_s(d) as :attr:`~goose_theory.fitcheck.GroupChecks.for_recommendation`
    folds the fit's (:func:`goose_theory.yields.taus_by_draw` prices trees under them). As the fit
    rates them: p_s 0 in a draw without a reached spine node, and no a(d) folded in a draw whose
    cycles recorded no offers (``spine_avail`` null, as ``ar``, ``tr`` and ``iso`` write it)."""
    p_s = np.nan_to_num(binned_rates(totals["sm"], totals["sr"], start=1 if checks.spine_depth.supported else 0,
                                     bins=_bins(checks.spine_depth)))
    if checks.availability:
        availability = availability_rows(totals["offers"], max_spine=len(checks.availability))
        availability[totals["offers"].sum(1) <= 0] = 1.0  # nothing recorded: spine_availability's ()
        p_s = fold_availability(p_s, availability)
    return p_s, _transition_rates(checks, totals)


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def tree_intervals(group: GroupFit, counts: Any, checks: GroupChecks, trees: Sequence[Topology], *,
                   reference: int | None = None, n_boot: int = 1000, seed: int = 0,
                   model: str = "exclusive") -> list[TreeInterval]:
    """Bootstrap intervals on each of ``trees``' predicted tau under ``group``'s fit, whose model
    ``checks`` selected (see the module docstring); ``reference``: the index of the tree that
    gains are measured against. A group of one prompt has nothing to resample: (NaN, NaN)."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if group.prompts < 2:
        nan = (math.nan, math.nan)
        return [TreeInterval(nan, None if reference is None else nan, 0) for _ in trees]
    if not trees:
        return []
    weights = prompt_weights(group.prompts, n_boot, group_seed(seed, group.label))
    p_s, p_t = draw_parameters(checks, draw_totals(group, counts, weights))
    taus = np.stack([taus_by_draw(tree, p_s, p_t, model) for tree in trees], axis=1)
    if not np.isfinite(taus).all():  # a rate without data is rated as the fit rates it: no draw may drop out
        raise RuntimeError("a bootstrap draw priced a tree at NaN")
    gains = None if reference is None else taus / taus[:, [reference]] - 1.0  # tau >= 1: finite
    return [TreeInterval(_percentiles(taus[:, j]), None if gains is None else _percentiles(gains[:, j]), n_boot)
            for j in range(len(trees))]


def with_intervals(recommendation: Recommendation, group: GroupFit, counts: Any, checks: GroupChecks, *,
                   n_boot: int = 1000, seed: int = 0, model: str = "exclusive") -> Recommendation:
    """``recommendation`` with ``predicted_ci95`` and ``gain_vs_paper_ci95`` (paired, None without a
    ``paper`` row) in each comparison row (:func:`tree_intervals` over its trees)."""
    rules = [row["rule"] for row in recommendation.rows]
    reference = rules.index("paper") if "paper" in rules else None
    intervals = tree_intervals(group, counts, checks, recommendation.trees, reference=reference, n_boot=n_boot,
                               seed=seed, model=model)
    rows = [{**row, "predicted_ci95": list(i.ci95), "gain_vs_paper_ci95": None if i.gain_ci95 is None else list(i.gain_ci95)}
            for row, i in zip(recommendation.rows, intervals)]
    return replace(recommendation, rows=rows)
