"""Goodness of fit and the paper's bound on recorded trees.

Every recorded cycle's tree is known, so the fitted model predicts each cycle's E[tau] exactly
(:func:`goose_theory.yields.exact_yield`). Cycles are grouped by tree shape first (see
:mod:`goose_theory.fitcounts`), so the work is one exact computation per distinct shape, all
shapes in one numba call per acceptance (:mod:`goose_theory.shapeeval`).

* :func:`goodness_of_fit`: mean predicted E[tau] over a group's cycles against the observed mean
  tau with its cluster-bootstrap interval, and a naive z using the exact per-shape variance.
* :func:`bound_check`: the paper's lower bound (:func:`goose_theory.bound.paper_lower_bound`,
  lbar from the topology) at the fitted scalar p_s, p_t, averaged over the recorded trees, against
  the observed mean tau; *violated* when the bound exceeds the upper end of the observed
  interval (beyond sampling noise).

The exclusive model needs the q's of one node's children to sum to <= 1; where the fitted
values break that on a recorded tree, *that tree* is evaluated under the independent model and
``model`` says on how many cycles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .acceptance import Acceptance
from .fit import GroupFit
from .fitcounts import FitCounts
from .shapeeval import RecordedShapes
from .yields import fallback_model_name


def recorded_shapes(counts: FitCounts) -> RecordedShapes:
    """The recorded shapes of ``counts``, packed for batched exact evaluation."""
    return RecordedShapes.pack(counts.shapes)


def _group_shapes(group: GroupFit, counts: FitCounts) -> pd.DataFrame:
    tab = counts.shape_table
    tab = tab[tab["cluster"].isin(group.clusters)]
    return tab.groupby("shape", as_index=False)[["n", "tau_sum", "tau_sq"]].sum()


def _evaluate(shape_ids: np.ndarray, shapes: RecordedShapes,
              acceptance: Acceptance) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(E[tau], Var[tau], bound) per shape id (NaN for shapes the topology contract rejects) and
    a mask of the shapes evaluated under the independent model because the exclusive one is
    infeasible on them (the per-tree rule of :func:`goose_theory.yields.evaluate_with_fallback`)."""
    r = shapes.evaluate(acceptance)
    return r.expected[shape_ids], r.variance[shape_ids], r.bound[shape_ids], r.fell_back[shape_ids]


def _model_name(acceptance: Acceptance, fell_back: np.ndarray, n: np.ndarray) -> str:
    """The model used: the acceptance's own, or e.g. ``exclusive (independent on 60 cycles)``."""
    return fallback_model_name(acceptance.model, int(n[fell_back].sum()))


@dataclass(frozen=True)
class GoodnessOfFit:
    """Predicted against observed mean tau for one group."""

    label: str
    cycles: int
    observed: float
    observed_ci95: tuple[float, float]
    predicted: float  # under the selected (curve where supported) model
    predicted_scalar: float  # under scalar p_s, p_t
    z: float  # (observed - predicted) / naive SE from the exact per-shape variances
    model: str
    skipped_cycles: int  # cycles on trees the topology contract rejects

    @property
    def relative_error(self) -> float:
        return (self.predicted - self.observed) / self.observed if self.observed else math.nan

    @property
    def within_ci(self) -> bool:
        return bool(self.observed_ci95[0] <= self.predicted <= self.observed_ci95[1])

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "cycles": self.cycles, "observed_tau": self.observed,
                "ci95": list(self.observed_ci95), "predicted_tau": self.predicted,
                "predicted_tau_scalar": self.predicted_scalar, "relative_error": self.relative_error,
                "z": self.z, "within_ci": self.within_ci, "model": self.model, "skipped_cycles": self.skipped_cycles}


def goodness_of_fit(group: GroupFit, counts: FitCounts, shapes: RecordedShapes, *,
                    selected: Acceptance, scalar: Acceptance) -> GoodnessOfFit:
    """Exact E[tau] of every recorded tree under the fitted model against the observed tau."""
    tab = _group_shapes(group, counts)
    ids, n = tab["shape"].to_numpy(), tab["n"].to_numpy(float)
    e, v, _, fell = _evaluate(ids, shapes, selected)
    e0, _, _, _ = _evaluate(ids, shapes, scalar)
    model = _model_name(selected, fell, n)
    ok = np.isfinite(e)
    w = n[ok]
    observed = float(tab["tau_sum"].to_numpy(float)[ok].sum() / w.sum()) if w.sum() else math.nan
    pred = float(w @ e[ok] / w.sum()) if w.sum() else math.nan
    pred0 = float(w @ e0[ok] / w.sum()) if w.sum() else math.nan
    se = math.sqrt(float(w @ v[ok])) / w.sum() if w.sum() else math.nan
    z = float((observed - pred) / se) if se > 0 else math.nan
    return GoodnessOfFit(group.label, int(w.sum()), observed, group.observed_tau.ci95, pred, pred0, z, model,
                         int(n[~ok].sum()))


def calibration(group: GroupFit, counts: FitCounts, shapes: RecordedShapes,
                acceptance: Acceptance, *, bins: int = 8) -> pd.DataFrame:
    """Cycles binned by predicted E[tau] (weighted quantiles): predicted vs observed mean tau
    with a naive 95% interval; the data behind a predicted-vs-observed chart."""
    tab = _group_shapes(group, counts)
    e, _, _, _ = _evaluate(tab["shape"].to_numpy(), shapes, acceptance)
    tab = tab.assign(predicted=e).dropna(subset=["predicted"]).sort_values("predicted")
    if tab.empty:
        return pd.DataFrame(columns=["group", "bin", "n", "predicted", "observed", "lo", "hi"])
    cum = tab["n"].cumsum() / tab["n"].sum()
    tab = tab.assign(bin=np.minimum((cum.to_numpy() * bins - 1e-9).astype(int), bins - 1))
    rows = []
    for b, part in tab.groupby("bin"):
        n = part["n"].sum()
        mean = part["tau_sum"].sum() / n
        var = max(part["tau_sq"].sum() / n - mean * mean, 0.0)
        half = 1.959963984540054 * math.sqrt(var / n)
        rows.append({"group": group.label, "bin": int(b), "n": int(n),
                     "predicted": float((part["predicted"] * part["n"]).sum() / n),
                     "observed": float(mean), "lo": float(mean - half), "hi": float(mean + half)})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class BoundCheck:
    """The paper's lower bound at the fitted parameters against the observed mean tau."""

    label: str
    lower_bound: float
    exact: float  # the fitted model's E[tau] on the same trees (bound <= exact)
    observed_tau: float
    ci95: tuple[float, float]
    model: str

    @property
    def violated(self) -> bool:
        return bool(math.isfinite(self.ci95[1]) and self.lower_bound > self.ci95[1] + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "lower_bound": self.lower_bound, "exact": self.exact,
                "observed_tau": self.observed_tau, "ci95": list(self.ci95), "violated": self.violated,
                "model": self.model}


def bound_check(group: GroupFit, counts: FitCounts, shapes: RecordedShapes, *,
                scalar: Acceptance) -> BoundCheck:
    """Mean of the paper's bound over the group's recorded trees vs observed tau and interval."""
    tab = _group_shapes(group, counts)
    e, _, b, fell = _evaluate(tab["shape"].to_numpy(), shapes, scalar)
    model = _model_name(scalar, fell, tab["n"].to_numpy())
    ok = np.isfinite(b)
    w = tab["n"].to_numpy(float)[ok]
    if not w.sum():
        return BoundCheck(group.label, math.nan, math.nan, group.observed_tau.estimate, group.observed_tau.ci95, model)
    return BoundCheck(group.label, float(w @ b[ok] / w.sum()), float(w @ e[ok] / w.sum()),
                      group.observed_tau.estimate, group.observed_tau.ci95, model)
