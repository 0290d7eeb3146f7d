"""The explorer's data-driven computations: fitting traces and costing budgets.

Like :mod:`app.compute`: plain arguments (paths with their mtimes, uploaded bytes, JSON text)
in, plain data out, no Streamlit; the page caches them. Uploads are written to a private
temporary directory under their own base name, so error messages name the file the user chose.

Example:
    >>> fit_shipped((), (), ())   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    goose_theory.traceio.TraceFileError: no trace files chosen
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Sequence

import numpy as np
import pandas as pd

from app.compute import acceptance
from app.fitted import probabilities_text
from goose_theory.errors import InputError
from goose_theory.fit import PARENT_SOURCES, ROOTS_ONLY, GroupFit, fit_traces
from goose_theory.fitanalysis import recorded_top_k
from goose_theory.fitcheck import check_group
from goose_theory.fitpredict import bound_check, calibration, goodness_of_fit, recorded_shapes
from goose_theory.jsonio import loads_json
from goose_theory.latency import CostAwareResult, LatencyError, LatencyProfile, cost_aware, latency_from_dict, priced
from goose_runtime.fit_inputs import copy_problem, trace_copies
from goose_theory.topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K
from goose_theory.traceio import TraceFileError, check_trace

MAX_BUDGETS = 20  # the Cost tab's log-spaced grid for rules other than optimal (a tree per budget)
REFINE_ALL = 64  # Cost tab, a rule's best budget: every budget of a window this narrow, else
REFINE_POINTS = 9  # narrowing rounds of this many budgets (trees at large budgets cost ms each)
N_BOOT = 300  # bootstrap draws: enough for stable 95% percentiles, cheap enough for the page


def _estimate_row(g: GroupFit) -> dict[str, Any]:
    return {"group": g.label, "prompts": g.prompts, "cycles": g.cycles,
            "p_s": g.p_s.estimate, "p_s_lo": g.p_s.ci95[0], "p_s_hi": g.p_s.ci95[1], "p_s_n": g.p_s.n,
            "p_s_naive_lo": g.p_s.naive_ci95[0], "p_s_naive_hi": g.p_s.naive_ci95[1],
            "p_t": g.p_t.estimate, "p_t_lo": g.p_t.ci95[0], "p_t_hi": g.p_t.ci95[1], "p_t_n": g.p_t.n,
            "p_t_naive_lo": g.p_t.naive_ci95[0], "p_t_naive_hi": g.p_t.naive_ci95[1],
            "ratio": g.ratio.estimate, "ratio_lo": g.ratio.ci95[0], "ratio_hi": g.ratio.ci95[1],
            **_by_parent_row(g)}


def _by_parent_row(g: GroupFit) -> dict[str, float]:
    """p_t pooled over rank under each parent source (NaN where the traces did not count it):
    the values the page can load into its per-parent sliders."""
    row = {}
    for source in PARENT_SOURCES:
        fit = g.parent(source)
        row[f"p_t_{source}"] = fit.p_t.estimate if fit is not None and fit.p_t.n > 0 else float("nan")
        row[f"p_t_{source}_n"] = fit.p_t.n if fit is not None else 0
    return row


def _curve(frame: pd.DataFrame, x: str, label: str) -> pd.DataFrame:
    """A fitted curve in the shape goose_runtime.charts.curve_chart draws."""
    return frame.reset_index()[[x, "estimate", "lo", "hi", "naive_lo", "naive_hi", "n"]].assign(group=label)


def _check_fittable(paths: Sequence[str]) -> None:
    """What ``fit-acceptance`` refuses before its fit: a file that is not a trace, and the
    same trace under a second name (:func:`goose_runtime.fit_inputs.trace_copies`), whose cycles
    would count twice and narrow every interval (TraceFileError, the CLI's wording)."""
    copies = trace_copies([check_trace(p) for p in paths])
    if copies:
        (copy, original), *_ = copies
        raise TraceFileError(copy_problem(copy, original))


def _fit_paths(paths: Sequence[str], group_by: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    _check_fittable(paths)
    fit = fit_traces(paths, group_by=tuple(group_by), n_boot=n_boot, seed=seed)
    if fit.overall.roots_only:  # as `fit-acceptance`: else NaN estimates and no message
        raise TraceFileError(ROOTS_ONLY)
    counts = fit.counts
    shapes = recorded_shapes(counts)
    groups = [fit.overall, *fit.groups] if group_by else [fit.overall]
    summary, spine, rank, calib, gof, bound = [], [], [], [], [], []
    models: dict[str, dict[str, Any]] = {}
    for g in groups:
        checks = check_group(g, counts)
        # the share of cycles whose matcher offered a spine token: the What-if tab's trees assume every one did
        summary.append({**_estimate_row(g), "spine_offered": checks.availability[0] if checks.availability else math.nan})
        spine.append(_curve(g.spine_by_depth, "depth", g.label))
        rank.append(_curve(g.transition_by_rank, "rank", g.label))
        calib.append(calibration(g, counts, shapes, checks.selected))
        good = goodness_of_fit(g, counts, shapes, selected=checks.selected, scalar=checks.scalar)
        gof.append({"group": g.label, "cycles": good.cycles, "observed_tau": good.observed,
                    "lo": good.observed_ci95[0], "hi": good.observed_ci95[1], "predicted_tau": good.predicted,
                    "predicted_scalar": good.predicted_scalar, "relative_error": good.relative_error,
                    "model": good.model, "fitted_p_s": probabilities_text(checks.selected.p_s),
                    "fitted_p_t": probabilities_text(checks.selected.p_t)})
        if not g.roots_only:  # what fit-acceptance recommends with, for the sidebar (an ar group has none)
            models[g.label] = {"acceptance": checks.for_recommendation.to_dict(), "budget": int(g.budget),
                               "top_k": recorded_top_k(g)}
        b = bound_check(g, counts, shapes, scalar=checks.scalar)
        bound.append({"group": g.label, "lower_bound": b.lower_bound, "exact": b.exact,
                      "observed_tau": b.observed_tau, "lo": b.ci95[0], "hi": b.ci95[1],
                      "violated": b.violated, "model": b.model})
    return {"summary": pd.DataFrame(summary), "spine_curve": pd.concat(spine, ignore_index=True),
            "rank_curve": pd.concat(rank, ignore_index=True), "calibration": pd.concat(calib, ignore_index=True),
            "gof": pd.DataFrame(gof), "bound": pd.DataFrame(bound), "models": models,
            "files": [os.path.basename(p) for p in counts.files]}


def fit_shipped(paths: tuple[str, ...], mtimes: tuple[float, ...], group_by: tuple[str, ...], *,
                n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Fit trace files on disk (``mtimes`` only make a changed file a new cache key)."""
    del mtimes
    if not paths:
        raise TraceFileError("no trace files chosen")
    return _fit_paths(paths, group_by, n_boot, seed)


def _safe_name(name: str, i: int) -> str:
    base = os.path.basename(name.replace("\\", "/")) or f"upload-{i}"
    return f"{i}-{base}"


def fit_uploaded(files: tuple[tuple[str, bytes], ...], group_by: tuple[str, ...], *,
                 n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Fit uploaded ``(name, bytes)`` files; every failure is a one-line TraceFileError naming
    the uploaded file."""
    if not files:
        raise TraceFileError("no trace files uploaded")
    with tempfile.TemporaryDirectory(prefix="goose-app-") as tmp:
        paths, names = [], {}
        for i, (name, data) in enumerate(files):
            if not data:
                raise TraceFileError(f"{name}: the file is empty (0 bytes)")
            path = os.path.join(tmp, _safe_name(name, i))
            with open(path, "wb") as fh:
                fh.write(data)
            paths.append(path); names[path] = name
        try:
            result = _fit_paths(paths, group_by, n_boot, seed)
        except TraceFileError as exc:  # a bad file, or the fit's "no cycles in the traces"
            text = str(exc)
            for path, name in names.items():
                text = text.replace(path, name)
            if not any(name in text for name, _ in files):
                text = f"{', '.join(n for n, _ in files)}: {text}"
            raise TraceFileError(text.replace(tmp + os.sep, "")) from None
    result["files"] = [name for name, _ in files]
    return result


def parse_latency(data: bytes, name: str = "latency.json") -> str:
    """Validate an uploaded ``goose-latency/1`` profile; returns its canonical JSON text (the
    cache key :func:`cost_table` takes). LatencyError names the file and the problem."""
    if not data:
        raise LatencyError(f"{name}: the file is empty (0 bytes)")
    try:
        profile = latency_from_dict(loads_json(data.decode("utf-8-sig")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LatencyError(f"{name}: not a JSON file ({exc})") from None
    except LatencyError as exc:
        raise LatencyError(f"{name}: {exc}") from None
    return json.dumps(profile.to_dict(), sort_keys=True)


def page_budgets(profile: LatencyProfile, limit: int = MAX_BUDGETS) -> tuple[int, ...]:
    """The budgets the page evaluates: every budget the profile covers when there are at most
    ``limit``, else ``limit`` budgets spaced evenly on a log scale (ends included)."""
    lo, hi = profile.sizes[0] - 1, profile.sizes[-1] - 1
    if hi - lo + 1 <= limit:
        return tuple(range(lo, hi + 1))
    grid = np.unique(np.round(np.geomspace(lo + 1, hi + 1, limit) - 1).astype(int))
    return tuple(int(b) for b in grid)


def cost_table(p_s: float, p_t: float, model: str, profile_json: str, rules: tuple[str, ...], *,
               max_depth: int = PAPER_MAX_DEPTH, max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K,
               p_t_spine: float | None = None, p_t_chain: float | None = None) -> dict[str, Any]:
    """Predicted speedup against budget for each rule under one latency profile, and each rule's
    best budget (:func:`_rule_cost`; ``p_t_spine``/``p_t_chain``: p_t by parent, None = as p_t).
    ``speedup_vs_ar`` is NaN throughout when the profile does not measure size 1 (no
    autoregressive baseline). A rule that cannot be built with these parameters (isotropic:3
    with top_k 2) is left out and named in ``errors``; InputError only when every rule fails.
    Returns {"table": DataFrame, "best": DataFrame, "budgets": tuple, "errors": {rule: message}}."""
    acc = acceptance(p_s, p_t, model, p_t_spine, p_t_chain)
    latency = latency_from_dict(json.loads(profile_json))
    grid = page_budgets(latency)
    shape = dict(max_depth=max_depth, max_spine=max_spine, top_k=top_k)
    frames, best, errors = [], [], {}
    for rule in rules:
        try:
            res = _rule_cost(acc, latency, rule, grid, shape)
        except InputError as exc:
            errors[rule] = str(exc)
            continue
        frames.append(pd.DataFrame(res.table).assign(rule=rule))
        row = next(r for r in res.table if r["budget"] == res.best.budget)
        best.append({"rule": rule, "budget": res.best.budget, "nodes": res.best.topology.budget,
                     "predicted_tau": res.best.predicted_tau,
                     "tokens_per_s": row["tokens_per_s"], "speedup_vs_ar": row["speedup_vs_ar"]})
    if not frames:
        raise InputError("; ".join(f"{rule}: {message}" for rule, message in errors.items()))
    table, best_table = pd.concat(frames, ignore_index=True), pd.DataFrame(best)
    for frame in (table, best_table):  # None (the profile has no t(1)) -> NaN
        frame["speedup_vs_ar"] = frame["speedup_vs_ar"].astype(float)
    return {"table": table, "best": best_table, "budgets": grid, "errors": errors}


def tree_cost(profile_json: str, nodes: int, tau: float) -> dict[str, Any] | None:
    """One tree (the sidebar's) priced as :func:`cost_table` prices each budget's tree (speedup
    NaN without a size-1 measurement); None when the profile does not measure a tree that large."""
    try:
        row = priced(latency_from_dict(json.loads(profile_json)), nodes, tau)
    except LatencyError:  # the tree is larger than the profile measures: no extrapolation
        return None
    return {**row, "speedup_vs_ar": math.nan if row["speedup_vs_ar"] is None else row["speedup_vs_ar"]}


def _rule_cost(acc, latency: LatencyProfile, rule: str, grid: tuple[int, ...], shape: dict) -> CostAwareResult:
    """One rule's cost-aware scan, aiming at the best budget ``goose optimize --latency`` finds:
    ``optimal`` over every budget the profile covers (one optimisation gives them all); another
    rule (a tree per budget) over the page's grid, then every budget between the best point's
    neighbours, narrowed first in rounds of nine where they are far apart (exact where the rate
    has one peak near the grid's best: a second peak elsewhere, or a jagged top inside a wide
    window, can be missed)."""
    if rule == "optimal":
        return cost_aware(acc, latency, rule=rule, **shape)
    rows: dict[int, dict] = {}
    trees: dict[int, Any] = {}  # each scan's best tree, by budget: the final one is among them

    def scan(budgets) -> int:  # the best budget so far (the smallest of equal rates)
        new = sorted(set(budgets) - set(rows))
        if new:
            res = cost_aware(acc, latency, rule=rule, budgets=new, **shape)
            rows.update((r["budget"], r) for r in res.table)
            trees[res.best.budget] = res.best
        return max(sorted(rows), key=lambda b: rows[b]["tokens_per_s"])

    best = scan(grid)
    while True:
        known = sorted(rows)
        at = known.index(best)
        lo, hi = known[max(at - 1, 0)], known[min(at + 1, len(known) - 1)]
        if hi - lo <= REFINE_ALL:
            best = scan(range(lo, hi + 1))
            break
        step = scan(np.unique(np.linspace(lo, hi, REFINE_POINTS).round().astype(int)).tolist())
        if step == best and known == sorted(rows):
            break
        best = step
    # the overall best is the best of the scan that priced it (ties: the smallest budget, in both)
    return CostAwareResult(trees[best], [rows[b] for b in sorted(rows)])


def profile_summary(profile_json: str) -> str:
    """A profile in one line for the page: where it was measured, the sizes it covers, a forward
    pass at its ends and the drafting cost, in milliseconds.

    Example:
        >>> profile_summary(json.dumps({"schema": "goose-latency/1", "device": "cpu", "sizes": [1, 64],
        ...                             "seconds": [0.03, 0.09], "draft_s": 0.0006, "draft_s_per_node": 2e-5}))
        'cpu; sizes 1..64 tokens; a forward pass of 1 token 30.0 ms, of 64 tokens 90.0 ms; drafting 0.600 ms a cycle + 0.0200 ms a node'
    """
    data = json.loads(profile_json)
    where = ", ".join(str(data[k]) for k in ("device", "model", "dtype") if data.get(k) not in (None, ""))
    sizes, seconds = data["sizes"], data["seconds"]
    parts = [where, f"sizes {sizes[0]}..{sizes[-1]} tokens",
             f"a forward pass of {sizes[0]} token{'s' * (sizes[0] != 1)} {seconds[0] * 1e3:.1f} ms, "
             f"of {sizes[-1]} tokens {seconds[-1] * 1e3:.1f} ms",
             f"drafting {data.get('draft_s', 0.0) * 1e3:.3f} ms a cycle + {data.get('draft_s_per_node', 0.0) * 1e3:.4f} ms a node"]
    return "; ".join(p for p in parts if p)
