"""Traces: fit p_s and p_t from shipped or uploaded trace files; intervals, curves, predicted
against observed tau, and the paper's bound against the observed tau."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app.sections import common
from app.sections.common import INPUT_ERRORS, show_error

TRACES_DIR = Path(__file__).resolve().parents[2] / "traces"
GROUP_COLUMNS = ("model", "benchmark", "method")


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
        chosen = st.multiselect("trace files", [f.name for f in files], default=[f.name for f in files],
                                key="trace_files")
        paths = tuple(str(TRACES_DIR / name) for name in chosen)
        return "shipped", paths
    uploads = st.file_uploader("goose trace files (parquet, goose_trace_version=1)", type=["parquet"],
                               accept_multiple_files=True, key="trace_upload")
    if not uploads:
        st.info("Upload one or more trace files recorded by `goose decode --trace ...`.")
        return None
    return "upload", tuple((u.name, u.getvalue()) for u in uploads)


def _show(fit: dict[str, Any]) -> None:
    st.caption("Files: " + ", ".join(fit["files"]))
    summary: pd.DataFrame = fit["summary"]
    overall = summary.iloc[0]
    c1, c2, c3 = st.columns(3)
    c1.metric("fitted p_s", f"{overall['p_s']:.4f}", delta=f"95% CI {overall['p_s_lo']:.4f} .. {overall['p_s_hi']:.4f}",
              delta_color="off", delta_arrow="off")
    c2.metric("fitted p_t", f"{overall['p_t']:.4f}", delta=f"95% CI {overall['p_t_lo']:.4f} .. {overall['p_t_hi']:.4f}",
              delta_color="off", delta_arrow="off")
    c3.metric("p_s / p_t", f"{overall['ratio']:.2f}", delta=f"95% CI {overall['ratio_lo']:.2f} .. {overall['ratio_hi']:.2f}",
              delta_color="off", delta_arrow="off")
    st.caption("Intervals: cluster bootstrap over prompts (naive binomial intervals in the table, for contrast).")
    st.dataframe(summary, hide_index=True, key="trace_summary_table")
    left, right = st.columns(2)
    left.vega_lite_chart(fit["spine_spec"], width="stretch")
    right.vega_lite_chart(fit["rank_spec"], width="stretch")
    left, right = st.columns(2)
    if fit["calibration_spec"] is not None:
        left.vega_lite_chart(fit["calibration_spec"], width="stretch")
    left.dataframe(fit["gof"], hide_index=True, key="trace_gof_table")
    bound: pd.DataFrame = fit["bound"]
    right.vega_lite_chart(fit["bound_spec"], width="stretch")
    right.dataframe(bound, hide_index=True, key="trace_bound_table")
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
        if kind == "shipped":
            mtimes = tuple(os.path.getmtime(p) for p in value)
            fit = common.fit_shipped_view(value, mtimes, group_by)
        else:
            fit = common.fit_uploaded_view(value, group_by)
    except INPUT_ERRORS as exc:
        show_error("cannot fit these traces", exc)
        return
    _show(fit)
