"""Fit p_s and p_t from traces, with intervals that are honest for correlated data.

Estimates come from *reached* nodes (parent accepted): p_s = matched / reached spine nodes,
p_t = matched / reached transition nodes, pooled, and as curves (p_s by spine depth, p_t by
rank and by depth). p_t is also split by the parent's source (root / spine / transition), each
with its by-rank curve: measured traces show transition acceptance depends strongly on it.
Cycles of one prompt share text and so are not independent; the 95% interval is therefore a
**cluster bootstrap over prompts** (prompt = (benchmark, prompt_id): the same prompt decoded in
several runs -- methods, budgets -- is one unit, as its cycles share the text, except the legacy
``--prompt`` label (benchmark and id "prompt"), one unit per run; resample prompts
with replacement, recompute the ratio of sums; percentile interval; seeded). The naive binomial
(Wilson) interval, which treats every node as independent, is reported beside it: when it is
much narrower, the data are over-dispersed.
With fewer than 2 prompts there is nothing to resample and ``ci95`` falls back to Wilson
(``ci_method`` says so).

Example:
    >>> from goose_theory.topology import Topology
    >>> from goose_theory.synthetic import SyntheticSpec, synthetic_table
    >>> from goose_theory.fitcounts import count_tables
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    >>> table = synthetic_table(SyntheticSpec(0.6, 0.2, (t,), prompts=40, cycles=100), seed=1)
    >>> fit = fit_counts(count_tables([table]), n_boot=200, seed=0)
    >>> fit.overall.p_s.ci95[0] < 0.6 < fit.overall.p_s.ci95[1]
    True
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from .fitcounts import CAP, POOLED, FitCounts, count_files
from .traceio import TraceFileError

Z95 = 1.959963984540054
CURVE_COLUMNS = ("n", "matched", "estimate", "lo", "hi", "naive_lo", "naive_hi")


def wilson(matched: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (NaNs when n = 0).

    Example:
        >>> [round(v, 4) for v in wilson(5, 10)]
        [0.2366, 0.7634]
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = matched / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


@dataclass(frozen=True)
class Estimate:
    """One proportion: estimate, cluster-bootstrap ci95, naive Wilson interval, reached nodes."""

    estimate: float
    ci95: tuple[float, float]
    naive_ci95: tuple[float, float]
    n: int
    matched: int
    ci_method: str = "cluster-bootstrap"

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "ci95": list(self.ci95), "n": self.n, "matched": self.matched,
                "naive_ci95": list(self.naive_ci95), "ci_method": self.ci_method}


@dataclass(frozen=True)
class Interval:
    """A statistic with its cluster-bootstrap 95% interval (ratio, mean tau)."""

    estimate: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "ci95": list(self.ci95)}


@dataclass(frozen=True)
class ParentFit:
    """p_t of transition nodes whose parent has one source (``root``, ``spine``, ``transition``)."""

    source: str
    p_t: Estimate
    by_rank: pd.DataFrame = field(repr=False)  # index: rank; CURVE_COLUMNS

    def to_dict(self) -> dict[str, Any]:
        return {**self.p_t.to_dict(), "by_rank": self.by_rank.reset_index().to_dict(orient="records")}


PARENT_SOURCES = ("root", "spine", "transition")
# what fit-acceptance and the explorer say when GroupFit.roots_only: nothing to estimate from
ROOTS_ONLY = "the traces reach no drafted node (roots only: ar runs?), so p_s and p_t cannot be estimated"


@dataclass(frozen=True)
class GroupFit:
    """Fit of one group (or of everything: label ``all``)."""

    label: str
    key: dict[str, str]
    clusters: np.ndarray  # indices into the FitCounts cluster rows
    p_s: Estimate
    p_t: Estimate
    ratio: Interval  # p_s / p_t
    observed_tau: Interval  # mean tau per cycle
    spine_by_depth: pd.DataFrame = field(repr=False)  # index: spine depth; CURVE_COLUMNS
    transition_by_rank: pd.DataFrame = field(repr=False)  # index: rank
    transition_by_depth: pd.DataFrame = field(repr=False)  # index: depth
    cycles: int = 0
    prompts: int = 0
    budget: int = 0  # largest recorded tree (non-root nodes): the runs' budget
    p_t_by_parent: tuple[ParentFit, ...] = ()  # root, spine, transition (empty: not counted)

    def parent(self, source: str) -> ParentFit | None:
        return next((p for p in self.p_t_by_parent if p.source == source), None)

    @property
    def roots_only(self) -> bool:
        """No drafted node was reached (``ar`` records the root alone): nothing to estimate from."""
        return self.p_s.n == 0 and self.p_t.n == 0

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "key": self.key, "p_s": self.p_s.to_dict(), "p_t": self.p_t.to_dict(),
                "ratio": self.ratio.to_dict(), "observed_tau": self.observed_tau.to_dict(),
                "cycles": self.cycles, "prompts": self.prompts, "budget": self.budget,
                "p_t_by_parent": {p.source: p.to_dict() for p in self.p_t_by_parent}}


@dataclass(frozen=True)
class FitResult:
    """Everything :func:`fit_counts` estimated, overall and per group."""

    counts: FitCounts = field(repr=False)
    overall: GroupFit
    groups: tuple[GroupFit, ...]
    n_boot: int
    seed: int


def _percentile(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2.5% / 97.5% percentiles over bootstrap draws (axis 0), ignoring undefined draws."""
    finite = np.where(np.isfinite(draws), draws, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-undefined column -> NaN, on purpose
        lo, hi = np.nanpercentile(finite, [2.5, 97.5], axis=0)
    return np.asarray(lo), np.asarray(hi)


def _ratio_percentile(p_s: np.ndarray, p_t: np.ndarray) -> tuple[float, float]:
    """2.5% / 97.5% percentiles of p_s / p_t over bootstrap draws. A draw with p_t = 0 under p_s > 0
    is an unbounded ratio, not an undefined one: it counts as larger than every finite draw (a limit
    that falls among such draws is inf), so a tight-looking interval cannot hide draws without a
    matched transition (they were dropped: 34% of them gave [47.9, 160.0] in a review's case)."""
    with np.errstate(all="ignore"):
        draws = np.where(p_t > 0, p_s / np.where(p_t > 0, p_t, 1.0), np.where((p_t == 0) & (p_s > 0), np.inf, np.nan))
    if not np.isposinf(draws).any():
        lo, hi = _percentile(draws)
        return float(lo), float(hi)
    finite = draws[np.isfinite(draws)]
    top = float(finite.max()) if finite.size else -math.inf
    stand_in = max(top, 0.0) * 2.0 + 1.0  # above every finite draw; a limit past ``top`` reads as inf
    lo, hi = np.nanpercentile(np.where(np.isposinf(draws), stand_in, draws), [2.5, 97.5])
    return tuple(float(x) if x <= top else math.inf for x in (lo, hi))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _proportion(m: np.ndarray, r: np.ndarray, W: np.ndarray | None) -> Estimate:
    """Pooled proportion of per-cluster counts ``m`` / ``r``; W = bootstrap weights (B x C)."""
    k, n = int(m.sum()), int(r.sum())
    est = k / n if n else math.nan
    naive = wilson(k, n)
    if W is None or n == 0:
        return Estimate(est, naive, naive, n, k, "wilson (fewer than 2 prompts)" if n else "no data")
    lo, hi = _percentile(_ratio(W @ m, W @ r))
    return Estimate(est, (float(lo), float(hi)), naive, n, k)


def _curve(M: np.ndarray, R: np.ndarray, W: np.ndarray | None, name: str) -> pd.DataFrame:
    """Per-column proportions of (clusters x CAP) count tables, only columns with data."""
    m, r = M.sum(0), R.sum(0)
    cols = np.flatnonzero(r > 0)
    if W is not None and cols.size:
        lo, hi = _percentile(_ratio(W @ M[:, cols], W @ R[:, cols]))
    else:
        lo = hi = None
    rows = []
    for j, c in enumerate(cols):
        wl, wh = wilson(m[c], r[c])
        rows.append({name: int(c), "n": int(r[c]), "matched": int(m[c]), "estimate": m[c] / r[c],
                     "lo": float(lo[j]) if lo is not None else wl, "hi": float(hi[j]) if hi is not None else wh,
                     "naive_lo": wl, "naive_hi": wh})
    return pd.DataFrame(rows, columns=[name, *CURVE_COLUMNS]).set_index(name)


def _fit_group(label: str, key: dict[str, str], clusters: np.ndarray, counts: FitCounts,
               merge: np.ndarray | None, n_boot: int, rng: np.random.Generator) -> GroupFit:
    """Fit one set of clusters; ``merge`` maps clusters to resampling units (prompts)."""
    tab = counts.shape_table[counts.shape_table["cluster"].isin(clusters)]
    local = pd.Series(np.arange(clusters.size), index=clusters)
    cyc = np.bincount(local[tab["cluster"]].to_numpy(), weights=tab["n"], minlength=clusters.size)
    tau = np.bincount(local[tab["cluster"]].to_numpy(), weights=tab["tau_sum"], minlength=clusters.size)
    by_parent = counts.parent_rank_matched is not None
    pm_all = counts.parent_rank_matched if by_parent else np.zeros((counts.n_clusters, 3, CAP), np.int64)
    pr_all = counts.parent_rank_reached if by_parent else pm_all
    tables = [t[clusters] for t in (counts.spine_matched, counts.spine_reached, counts.rank_matched,
                                     counts.rank_reached, counts.depth_matched, counts.depth_reached, pm_all, pr_all)]
    per_unit = [*tables, cyc, tau]
    if merge is not None:  # same prompt in several runs or groups: one resampling unit
        units, inv = np.unique(merge[clusters], return_inverse=True)
        per_unit = [_sum_rows(x, inv, units.size) for x in per_unit]
    sm, sr, rm, rr, dm, dr, pm, pr, cyc, tau = per_unit
    n_units = cyc.shape[0]
    W = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=n_boot).astype(np.float64) if n_units > 1 else None
    p_s, p_t = _proportion(sm.sum(1), sr.sum(1), W), _proportion(rm.sum(1), rr.sum(1), W)
    # p_t of exactly 0 under p_s > 0: unbounded, not undefined (NaN p_t, no transition data, is truthy)
    ratio_est = p_s.estimate / p_t.estimate if p_t.estimate else (math.inf if p_s.estimate > 0 else math.nan)
    tau_mean = tau.sum() / cyc.sum() if cyc.sum() else math.nan
    if W is not None:
        rlo, rhi = _ratio_percentile(_ratio(W @ sm.sum(1), W @ sr.sum(1)), _ratio(W @ rm.sum(1), W @ rr.sum(1)))
        tlo, thi = _percentile(_ratio(W @ tau, W @ cyc))
    else:  # one prompt: no bootstrap; tau gets the naive interval over cycles, as p_s and p_t get Wilson's
        rlo = rhi = math.nan
        tlo, thi = _naive_mean_ci(tau_mean, float(tab["tau_sq"].sum()), float(cyc.sum()))
    shapes = tab["shape"].unique()
    budget = max((counts.shapes[s].parent.shape[0] - 1 for s in shapes), default=0)
    return GroupFit(label, key, clusters, p_s, p_t, Interval(ratio_est, (float(rlo), float(rhi))),
                    Interval(float(tau_mean), (float(tlo), float(thi))),
                    _curve(sm, sr, W, "depth"), _curve(rm, rr, W, "rank"), _curve(dm, dr, W, "depth"),
                    int(cyc.sum()), int(n_units), int(budget), _by_parent(pm, pr, W) if by_parent else ())


def _naive_mean_ci(mean: float, sum_sq: float, n: float) -> tuple[float, float]:
    """mean +- 1.96 sd / sqrt(n) over n cycles (independent cycles: too narrow within one prompt,
    which the report's few-prompts note says). Without it one prompt's bound check could never fire.

    Example:
        >>> [round(x, 4) for x in _naive_mean_ci(2.0, 4 * 4.5, 4)]  # taus 1, 2, 2, 3: sd 0.7071, se 0.3536
        [1.307, 2.693]
    """
    if not n > 1 or not math.isfinite(mean):
        return math.nan, math.nan
    half = Z95 * math.sqrt(max(sum_sq / n - mean * mean, 0.0) / n)
    return max(mean - half, 1.0), mean + half  # tau >= 1 (the bonus token): few cycles gave [-0.29, 5.63]


def _by_parent(pm: np.ndarray, pr: np.ndarray, W: np.ndarray | None) -> tuple[ParentFit, ...]:
    """p_t per parent source (pooled over rank, and by rank) from (units, 3, CAP) counts; the
    same bootstrap weights as every other statistic of the group."""
    return tuple(ParentFit(name, _proportion(pm[:, k].sum(1), pr[:, k].sum(1), W), _curve(pm[:, k], pr[:, k], W, "rank"))
                 for k, name in enumerate(PARENT_SOURCES))


def _sum_rows(x: np.ndarray, inv: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, *x.shape[1:]), dtype=np.float64)
    np.add.at(out, inv, x)
    return out


def fit_counts(counts: FitCounts, *, n_boot: int = 1000, seed: int = 0) -> FitResult:
    """Estimates, curves and intervals, overall and per group; reproducible from ``seed``."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if counts.n_clusters == 0:
        raise TraceFileError("no cycles in the traces")
    every = np.arange(counts.n_clusters)
    overall = _fit_group(POOLED, {}, every, counts, counts.cluster_prompt, n_boot, np.random.default_rng([seed, 0]))
    if len(counts.groups) == 1 and not counts.group_by:  # the one group is everything
        return FitResult(counts, overall, (overall,), n_boot, seed)
    groups = []
    for g, values in enumerate(counts.groups):
        clusters = np.flatnonzero(counts.cluster_group == g)
        if clusters.size == counts.n_clusters:  # the group is everything: the pooled fit, same bootstrap draws
            groups.append(replace(overall, label=counts.group_label(g), key=dict(zip(counts.group_by, values))))
            continue
        groups.append(_fit_group(counts.group_label(g), dict(zip(counts.group_by, values)), clusters, counts,
                                 counts.cluster_prompt, n_boot, np.random.default_rng([seed, g + 1])))
    return FitResult(counts, overall, tuple(groups), n_boot, seed)


def fit_traces(paths: Iterable[str | os.PathLike], *, group_by: Sequence[str] = (), n_boot: int = 1000,
               seed: int = 0) -> FitResult:
    """Stream trace files (:func:`goose_theory.fitcounts.count_files`) and fit them."""
    return fit_counts(count_files(paths, group_by=group_by), n_boot=n_boot, seed=seed)


__all__ = ["CAP", "PARENT_SOURCES", "Estimate", "Interval", "ParentFit", "GroupFit", "FitResult", "fit_counts", "fit_traces", "wilson"]
