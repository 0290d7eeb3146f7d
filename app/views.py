"""Views: a computation plus its chart, as ready-to-draw vega-lite specs (no Streamlit).

Building an altair chart and checking it against the vega-lite schema costs tens of
milliseconds; the page caches these views (``st.cache_data``) so a repeated interaction draws
cached specs with ``st.vega_lite_chart`` and spends its time only on what changed. The specs are
serialised without the schema check (``validate=False``): the chart builders' tests validate
every builder's output, so the page need not pay for it on every new parameter value.

Example:
    >>> v = curves_view(0.6, 0.05, "exclusive", budget=12, max_spine=4)
    >>> sorted(v)
    ['curve_spec', 'widths_spec']
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from app import charts, compute, compute_io
from goose_runtime import charts as fit_charts

PMF_FLOOR = 1e-12  # the pmf chart stops where every later tau is less likely than this, exact and simulated


def drawn_pmf(pmf: pd.DataFrame, floor: float = PMF_FLOOR) -> tuple[pd.DataFrame, str | None]:
    """The pmf rows worth drawing: up to the last tau whose exact or simulated probability reaches
    ``floor`` (a long spine's pmf runs to thousands of taus, nearly all of them ~0), and a caption
    saying what was left out (None when nothing was).

    Example:
        >>> df = pd.DataFrame({"tau": [1, 2, 3], "probability": [0.9, 0.1, 1e-20], "kind": "exact"})
        >>> drawn, note = drawn_pmf(df)
        >>> len(drawn), note
        (2, 'Drawn up to tau = 2: P(tau) < 1e-12 for each larger tau (1 more), exact and simulated.')
    """
    if pmf.empty:
        return pmf, None
    likely = pmf.loc[pmf["probability"] >= floor, "tau"]
    last = int(likely.max()) if not likely.empty else int(pmf["tau"].min())
    drawn = pmf[pmf["tau"] <= last]
    dropped = pmf["tau"][pmf["tau"] > last].nunique()
    if not dropped:
        return pmf, None
    return drawn.reset_index(drop=True), (f"Drawn up to tau = {last}: P(tau) < {floor:g} for each larger tau "
                                          f"({dropped} more), exact and simulated.")


def whatif_view(p_s: float, p_t: float, model: str, rule: str, *, budget: int, max_depth: int,
                max_spine: int, top_k: int, seed: int, topology_json: str | None,
                p_t_spine: float | None = None, p_t_chain: float | None = None) -> dict[str, Any]:
    """:func:`app.compute.whatif` plus the tree and pmf specs (``pmf_note``: what the pmf chart
    leaves out, see :func:`drawn_pmf`; ``pmf`` itself stays whole)."""
    r = compute.whatif(p_s, p_t, model, rule, budget=budget, max_depth=max_depth, max_spine=max_spine,
                       top_k=top_k, seed=seed, topology_json=topology_json, p_t_spine=p_t_spine,
                       p_t_chain=p_t_chain)
    nodes, edges = compute.tree_layout(r["topology"], r["reach"])
    height = min(max(260, 9 * int(nodes["y"].nunique())), 640)  # room for every leaf row
    pmf, pmf_note = drawn_pmf(r["pmf"])
    return {**r, "tree_spec": charts.tree_chart(nodes, edges, height=height).to_dict(validate=False),
            "pmf_spec": charts.pmf_chart(pmf).to_dict(validate=False), "pmf_note": pmf_note}


def curves_view(p_s: float, p_t: float, model: str, *, p_t_spine: float | None = None,
                p_t_chain: float | None = None, **shape: int) -> dict[str, Any]:
    """E[tau] against spine length and the branch widths, as specs."""
    args = dict(shape, p_t_spine=p_t_spine, p_t_chain=p_t_chain)
    return {"curve_spec": charts.spine_curve_chart(compute.spine_curves(p_s, p_t, model, **args)).to_dict(validate=False),
            "widths_spec": charts.widths_chart(compute.width_profiles(p_s, p_t, model, **args)).to_dict(validate=False)}


def heatmap_view(model: str, **shape: int) -> dict[str, Any]:
    """The gain grid and its heatmap spec."""
    grid = compute.gain_grid(model, **shape)
    return {"grid": grid, "spec": charts.gain_heatmap_chart(grid).to_dict(validate=False)}


def cost_view(p_s: float, p_t: float, model: str, profile_json: str, rules: tuple[str, ...], *,
              p_t_spine: float | None = None, p_t_chain: float | None = None, **shape: int) -> dict[str, Any]:
    """:func:`app.compute_io.cost_table` plus the speedup chart spec."""
    out = compute_io.cost_table(p_s, p_t, model, profile_json, rules, p_t_spine=p_t_spine,
                                p_t_chain=p_t_chain, **shape)
    return {**out, "spec": charts.speedup_chart(out["table"]).to_dict(validate=False)}


def fit_view(fit: dict[str, Any]) -> dict[str, Any]:
    """A trace fit plus the fitting helper's charts (goose_runtime.charts), as specs."""
    # no spine node reached (adjacency-only methods): no p_s chart rather than an empty one
    spine = fit["spine_curve"]
    specs = {"spine_spec": None if spine.empty else fit_charts.p_s_by_depth_chart(spine).to_dict(validate=False),
             "rank_spec": fit_charts.p_t_by_rank_chart(fit["rank_curve"]).to_dict(validate=False),
             "bound_spec": fit_charts.bound_check_chart(fit["bound"]).to_dict(validate=False),
             "calibration_spec": None}
    if not fit["calibration"].empty:
        specs["calibration_spec"] = fit_charts.predicted_vs_observed_chart(fit["calibration"]).to_dict(validate=False)
    return {**fit, **specs}


def fit_shipped_view(paths: tuple[str, ...], mtimes: tuple[float, ...], group_by: tuple[str, ...]) -> dict[str, Any]:
    return fit_view(compute_io.fit_shipped(paths, mtimes, group_by))


def fit_uploaded_view(files: tuple[tuple[str, bytes], ...], group_by: tuple[str, ...]) -> dict[str, Any]:
    return fit_view(compute_io.fit_uploaded(files, group_by))
