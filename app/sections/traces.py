"""Traces: fit p_s and p_t from shipped or uploaded trace files; intervals, curves, predicted
against observed tau, and the paper's bound against the observed tau."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app import compute_io, fitted
from app.sections import common, sidebar
from app.sections.common import INPUT_ERRORS, show_error

TRACES_DIR = Path(__file__).resolve().parents[2] / "traces"
GROUP_COLUMNS = ("model", "benchmark", "method")
# the Load button's sidebar keys and the fit summary's columns for them
PARENTS = (("p_t", "p_t_root"), ("p_t_spine", "p_t_spine"), ("p_t_chain", "p_t_transition"))


def shipped_traces() -> list[Path]:
    """The parquet traces shipped in ``traces/`` (sorted by name)."""
    return sorted(TRACES_DIR.glob("*.parquet")) if TRACES_DIR.is_dir() else []


def _choose() -> tuple[str, Any] | None:
    source = st.radio("traces", ("shipped traces", "upload parquet files"), key="trace_source", horizontal=True)
    if source == "shipped traces":
        files = shipped_traces()
        if not files:
            st.info(f"No traces shipped in {TRACES_DIR}; upload parquet files instead.")
            return None
        common.seed("trace_files", [f.name for f in files])
        chosen = st.multiselect("trace files", [f.name for f in files], key="trace_files")
        if not chosen:  # the user's choice, not a fault: a hint rather than an error box
            st.info("Choose one or more trace files to fit.")
            return None
        return "shipped", tuple(str(TRACES_DIR / name) for name in chosen)
    uploads = common.uploader("goose trace files (parquet, goose_trace_version=1)", "trace_upload",
                              type=["parquet"], accept_multiple_files=True)
    if not uploads:
        st.info("Upload one or more trace files recorded by `goose decode --trace-out FILE ...`.")
        return None
    return "upload", uploads


def fitted_label(group: str, files: list[str]) -> str:
    """The loaded model's name in the sidebar: the group and the files it was fitted on.

    Example:
        >>> fitted_label("all", ["stdlib.parquet"]), fitted_label("mtbench", ["a.parquet", "b.parquet", "c.parquet"])
        ('stdlib.parquet (all)', 'mtbench of 3 files')
    """
    if len(files) <= 2:
        return f"{', '.join(files)} ({group})"
    return f"{group} of {len(files)} files"


def _offer_load(summary: pd.DataFrame, models: dict[str, dict[str, Any]], files: list[str]) -> None:
    """For one group: a button that puts the model ``fit-acceptance`` predicts with into the
    sidebar (p_s by depth, p_t by rank and parent: ``app.fitted``), and one that puts the fitted
    scalars, p_t per parent source pooled over rank, into its sliders (a source the traces never
    reached gets the pooled p_t)."""
    groups = [g for g in summary["group"] if g in models]
    if not groups:
        return
    group = groups[0] if len(groups) == 1 else st.selectbox("group to load", groups, key="trace_load_group")
    entry = models[group]
    st.caption(f"The model `fit-acceptance` predicts with ({group}): {fitted.describe(entry)}. Loaded, it replaces "
               f"the sidebar's p_s and p_t; the rule becomes optimal, the model exclusive, the limits "
               f"`fit-acceptance`'s, and the budget and top-K the largest recorded ({entry['budget']}, "
               f"{entry['top_k']}): the What-if tab's tree is then the one `fit-acceptance` recommends.")
    st.button("Use the fitted model in the sidebar", key="trace_use_fit", on_click=sidebar.load_fitted,
              kwargs={"label": fitted_label(group, files), "entry": entry}, type="primary")
    row = summary[summary["group"] == group].iloc[0]
    if row[["p_t_root_n", "p_t_spine_n", "p_t_transition_n"]].sum() == 0:
        st.caption("These traces do not count p_t by parent source, so there are no per-parent scalars to load.")
        return
    st.caption(load_caption(row, group))
    values = {key: value for key, (value, _) in _parent_values(row).items()}
    st.button("Load p_s and p_t by parent into the sliders", key="trace_load_acceptance",
              on_click=sidebar.load_acceptance, kwargs={"p_s": float(row["p_s"]), **values},
              help=f"sets p_s, p_t (under the root, capped at the slider's {sidebar.P_T_MAX}) and the "
                   f"per-parent sliders, rounded to the sliders' steps ({sidebar.P_S_STEP} and {sidebar.P_T_STEP})")


def _parent_values(row: pd.Series) -> dict[str, tuple[float, bool]]:
    """The sidebar key -> (the p_t to load, fitted there?) per parent source: a source the traces
    never reached gets the pooled p_t."""
    return {key: (float(row[col]), True) if row[f"{col}_n"] > 0 else (float(row["p_t"]), False)
            for key, col in PARENTS}


def load_caption(row: pd.Series, group: str) -> str:
    """What the Load button puts into the sidebar, fitted values exactly, and which are stand-ins:
    p_t under a parent the traces never reached is the pooled p_t; p_s without a spine node in
    the traces is not loaded."""
    where = {"p_t": "under the root", "p_t_spine": "under a spine node", "p_t_chain": "under a transition node"}
    parts = [f"{value:.4f} {where[key]}" if fitted else
             f"{where[key]} none reached (the pooled p_t {value:.4f} stands in)"
             for key, (value, fitted) in _parent_values(row).items()]
    p_s = (f"p_s {row['p_s']:.4f}" if pd.notna(row["p_s"]) else
           "p_s: no spine node in these traces (the slider is left as it is)")
    offered = row.get("spine_offered", math.nan)
    # the loaded p_s is per offered token: a what-if tree's spine always has one, so its E[tau] is a matched cycle's
    matched = ("" if not (pd.notna(row["p_s"]) and offered < 1) else
               f" p_s is per spine token the matcher offered, and it offered one in {offered:.0%} of these cycles; "
               f"the What-if trees assume it always does, so their E[tau] is that of cycles with a match, above what "
               f"`fit-acceptance` (which scales p_s by the offers, as the fitted model above does) predicts for these "
               f"traces.")
    return (f"Fitted ({group}; p_t by parent pooled over rank): {p_s}; p_t " + ", ".join(parts)
            + f". Loading rounds them to the sliders' steps ({sidebar.P_S_STEP} for p_s, {sidebar.P_T_STEP} for p_t)."
            + matched)


def _metric(column, label: str, row: pd.Series, name: str, digits: int, missing: str) -> None:
    """A fitted value with its interval; "n/a" and why where the traces reach no node of its kind
    (adjacency-only methods reach no spine node, pld no transition node), never "nan"."""
    if pd.isna(row[name]):
        column.metric(label, "n/a", delta=missing, delta_color="off", delta_arrow="off")
        return
    column.metric(label, f"{row[name]:.{digits}f}", delta=f"95% CI {row[name + '_lo']:.{digits}f} .. "
                  f"{row[name + '_hi']:.{digits}f}", delta_color="off", delta_arrow="off")


# group labels were cut to "human" / "mtbenc" at Streamlit's default width (app review, 6 Dec)
GROUP_COLUMN = {"group": st.column_config.TextColumn("group", width="medium")}


def _show(fit: dict[str, Any]) -> None:
    st.caption("Files: " + ", ".join(fit["files"]))
    summary: pd.DataFrame = fit["summary"]
    overall = summary.iloc[0]
    c1, c2, c3 = st.columns(3)
    _metric(c1, "fitted p_s", overall, "p_s", 4, "no spine node reached")
    _metric(c2, "fitted p_t", overall, "p_t", 4, "no transition node reached")
    _metric(c3, "p_s / p_t", overall, "ratio", 2, "needs both")
    st.caption(f"Intervals: cluster bootstrap over prompts, {compute_io.N_BOOT} draws (`fit-acceptance` "
               "draws 1000, so an interval's ends can differ slightly); naive binomial "
               "intervals in the table, for contrast.")
    st.dataframe(summary, hide_index=True, key="trace_summary_table", column_config=GROUP_COLUMN)
    _offer_load(summary, fit["models"], fit["files"])
    left, right = st.columns(2)
    if fit["spine_spec"] is None:
        left.info("p_s by spine depth: no spine node in these traces (adjacency-only methods such as tr, iso:K)")
    else:
        left.vega_lite_chart(fit["spine_spec"], width="stretch")
    right.vega_lite_chart(fit["rank_spec"], width="stretch")
    left, right = st.columns(2)
    if fit["calibration_spec"] is not None:
        left.vega_lite_chart(fit["calibration_spec"], width="stretch")
    left.dataframe(fit["gof"], hide_index=True, key="trace_gof_table", column_config=GROUP_COLUMN)
    bound: pd.DataFrame = fit["bound"]
    right.vega_lite_chart(fit["bound_spec"], width="stretch")
    right.dataframe(bound, hide_index=True, key="trace_bound_table", column_config=GROUP_COLUMN)
    right.caption("model: where the fitted rates would push a recorded tree past the exclusive model's limit (a "
                  "node's children's acceptances summing over 1), that tree is scored under the independent model. "
                  "The goodness of fit (left) uses the depth and rank curves, the bound the scalar p_s and p_t, so "
                  "their counts of such cycles can differ.")
    violated = bound[bound["violated"]]
    if violated.empty:
        right.success("The paper's bound holds in every group (bound <= upper end of the observed interval).")
    else:
        right.error("The paper's bound is violated beyond its interval in: " + ", ".join(violated["group"]))


def render() -> None:
    """Draw the Traces tab."""
    choice = _choose()
    group_by = tuple(st.multiselect("group by", GROUP_COLUMNS, key="trace_group_by"))
    if choice is None:
        return
    kind, value = choice
    try:
        # a new fit takes a second or more (cached after): say so rather than leave the tab blank
        with st.spinner("Fitting the traces (once; cached after)..."):
            if kind == "shipped":
                mtimes = tuple(os.path.getmtime(p) for p in value)
                fit = common.fit_shipped_view(value, mtimes, group_by)
            else:
                fit = common.fit_uploaded_view(value, group_by)
    except INPUT_ERRORS as exc:
        show_error("cannot fit these traces", exc)
        return
    _show(fit)
