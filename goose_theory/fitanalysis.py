"""The whole fit-acceptance analysis as data: fit, model checks, goodness of fit, bound check
and recommendation, overall and per group (``fit-acceptance`` renders it; it writes nothing).

Example:
    >>> from goose_theory.topology import Topology
    >>> from goose_theory.synthetic import SyntheticSpec, synthetic_table
    >>> from goose_theory.fitcounts import count_tables
    >>> from goose_theory.fit import fit_counts
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    >>> fit = fit_counts(count_tables([synthetic_table(SyntheticSpec(0.6, 0.2, (t,)), seed=0)]), n_boot=100)
    >>> a = analyze(fit)
    >>> {"p_s", "p_t", "ratio", "groups", "bound", "recommended"} <= set(a.to_json()), a.overall.bound.violated
    (True, False)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .fit import FitResult, GroupFit
from .fitcheck import GroupChecks, check_group
from .fitinterval import with_intervals
from .fitpredict import BoundCheck, GoodnessOfFit, bound_check, calibration, goodness_of_fit, recorded_shapes
from .recommend import Recommendation, recommend
from .shapeeval import RecordedShapes


# why recommended.acceptance.p_s reads 0.1 where the fitted p_s is 0.9
ACCEPTANCE_NOTE = ("p_s(d) is the fitted p_s times a(d), the share of cycles whose matcher offered a d-th spine "
                   "token among those that offered a (d-1)-th (checks.spine_availability): a fixed tree's spine "
                   "node can only match then")


FEW_DRAWS = 200  # below this the 2.5% and 97.5% bootstrap percentiles rest on about 5 draws each


@dataclass(frozen=True)
class GroupAnalysis:
    """Everything fit-acceptance reports for one group."""

    fit: GroupFit
    checks: GroupChecks
    gof: GoodnessOfFit
    bound: BoundCheck
    calibration: pd.DataFrame = field(repr=False)
    recommendation: Recommendation | None = None

    @property
    def label(self) -> str:
        return self.fit.label

    @property
    def file_stem(self) -> str:
        return "topology-" + re.sub(r"[^A-Za-z0-9._-]+", "_", self.label)

    def to_json(self) -> dict[str, Any]:
        out = self.fit.to_dict()
        out.update({"predicted_tau": self.gof.predicted, "goodness_of_fit": self.gof.to_dict(),
                    "checks": self.checks.to_dict(), "bound": self.bound.to_dict(),
                    "curves": {"p_s_by_depth": _records(self.fit.spine_by_depth),
                               "p_t_by_rank": _records(self.fit.transition_by_rank),
                               "p_t_by_depth": _records(self.fit.transition_by_depth)}})
        if self.recommendation is not None:
            out["recommended"] = self.recommended_json()
        return out

    def recommended_json(self) -> dict[str, Any]:
        """The recommendation's JSON, with a note on what its acceptance is."""
        assert self.recommendation is not None
        return {**self.recommendation.to_dict(),
                "acceptance_note": ACCEPTANCE_NOTE if self.checks.availability else "the selected model as fitted"}


def _with_file(group: dict[str, Any], file: str | None) -> dict[str, Any]:
    """A group's JSON with its written topology file, beside the group and in its ``recommended``
    (where the pooled ``recommended`` has it too)."""
    if "recommended" in group:
        group["recommended"] = {**group["recommended"], "file": file}
    return {**group, "file": file}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.reset_index().to_dict(orient="records")


@dataclass(frozen=True)
class Analysis:
    """The analysis of a whole fit: ``overall`` plus one entry per group."""

    fit: FitResult = field(repr=False)
    overall: GroupAnalysis
    groups: tuple[GroupAnalysis, ...]

    @property
    def violations(self) -> list[BoundCheck]:
        return [g.bound for g in self.groups if g.bound.violated]

    @property
    def unaccepted_matches(self) -> dict[str, int]:
        """Group label -> its reached nodes that matched but were not accepted, for groups with any
        (greedy verification leaves none: see FitCounts.unaccepted_matches)."""
        per_cluster = self.fit.counts.unaccepted_matches
        if per_cluster is None:
            return {}
        counts = {g.fit.label: int(per_cluster[g.fit.clusters].sum()) for g in self.groups}
        return {label: n for label, n in counts.items() if n}

    def to_json(self, files: dict[str, str] | None = None) -> dict[str, Any]:
        """The ``--json`` object; ``files`` maps group labels to written topology files."""
        files = files or {}
        o = self.overall
        rec = o.recommendation
        recommended = None if rec is None else {**o.recommended_json(), "file": files.get(o.label)}
        return {"p_s": o.fit.p_s.to_dict(), "p_t": o.fit.p_t.to_dict(), "ratio": o.fit.ratio.to_dict(),
                "observed_tau": o.fit.observed_tau.to_dict(), "predicted_tau": o.gof.predicted,
                "cycles": o.fit.cycles, "prompts": o.fit.prompts, "group_by": list(self.fit.counts.group_by),
                "groups": [_with_file(g.to_json(), files.get(g.label)) for g in self.groups],
                "bound": [g.bound.to_dict() for g in self.groups], "violations": [b.label for b in self.violations],
                "recommended": recommended, "checks": o.checks.to_dict(), "goodness_of_fit": o.gof.to_dict(),
                "unaccepted_matches": self.unaccepted_matches,
                "files": list(self.fit.counts.files), "bootstrap": self.fit.n_boot, "seed": self.fit.seed,
                "bootstrap_too_few": self.fit.n_boot < FEW_DRAWS}  # the text summary says so too


def recorded_top_k(group: GroupFit) -> int:
    """The ranks the recommendation may use: as many as the recorded trees had (10 if none), at most 64.
    A rank the runs never drafted has no fitted p_t."""
    ranks = int(group.transition_by_rank.index.max()) + 1 if len(group.transition_by_rank) else 10
    return max(1, min(ranks, 64))


def _analyze_group(group: GroupFit, fit: FitResult, shapes: RecordedShapes, *, budget: int | None,
                   latency: Any, model: str) -> GroupAnalysis:
    counts = fit.counts
    checks = check_group(group, counts, model=model)
    gof = goodness_of_fit(group, counts, shapes, selected=checks.selected, scalar=checks.scalar)
    bound = bound_check(group, counts, shapes, scalar=checks.scalar)
    calib = calibration(group, counts, shapes, checks.selected)
    use_budget = group.budget if budget is None else budget
    if group.roots_only:  # an ar group: nothing fitted, no tree to recommend
        return GroupAnalysis(group, checks, gof, bound, calib, None)
    rec = recommend(checks.for_recommendation, budget=use_budget, budget_source="recorded" if budget is None else "given",
                    latency=latency, top_k=recorded_top_k(group))
    rec = with_intervals(rec, group, counts, checks, n_boot=fit.n_boot, seed=fit.seed, model=model)
    return GroupAnalysis(group, checks, gof, bound, calib, rec)


def analyze(fit: FitResult, *, budget: int | None = None, latency: Any = None, model: str = "exclusive") -> Analysis:
    """Checks, goodness of fit, bound check and recommendation for ``fit`` (all groups)."""
    shapes = recorded_shapes(fit.counts)
    kw = {"budget": budget, "latency": latency, "model": model}
    overall = _analyze_group(fit.overall, fit, shapes, **kw)
    if len(fit.groups) == 1 and not fit.counts.group_by:
        return Analysis(fit, overall, (overall,))  # one group: the same clusters as overall
    return Analysis(fit, overall, tuple(_analyze_group(g, fit, shapes, **kw) for g in fit.groups))
