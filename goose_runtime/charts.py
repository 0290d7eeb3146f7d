"""Pure altair chart builders for fitted acceptance (DataFrame -> ``alt.Chart``).

Used by ``fit-acceptance``'s HTML report and reusable by the Streamlit app. Every builder takes
a tidy DataFrame and returns a chart; nothing here reads files or computes statistics.
:func:`save_chart` writes HTML atomically. Every encoding is a channel object: a bare ``"field:T"``
string makes altair resolve it through ``from_dict``, which hashes hundreds of schema classes each
time (the app's Traces tab draws these on first opening).

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"group": ["a"], "depth": [1], "estimate": [0.6], "lo": [0.5], "hi": [0.7],
    ...                    "naive_lo": [0.55], "naive_hi": [0.65], "n": [100]})
    >>> curve_chart(df, x="depth", title="p_s by spine depth").to_dict()["layer"][0]["mark"]["type"]
    'rule'
"""
from __future__ import annotations

import os

import altair as alt
import pandas as pd

from goose_theory.fileio import atomic_output

CURVE_FIELDS = ("group", "estimate", "lo", "hi", "naive_lo", "naive_hi", "n")


def _require(df: pd.DataFrame, columns: tuple[str, ...] | list[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"chart data lacks column(s) {', '.join(missing)}")


def curve_chart(df: pd.DataFrame, *, x: str, title: str, y_title: str = "acceptance") -> alt.Chart:
    """A fitted curve (p_s by depth, p_t by rank or depth): points at the estimate, a bar for
    the cluster-bootstrap 95% interval, a tick pair for the naive Wilson interval; one colour
    per group."""
    _require(df, [x, *CURVE_FIELDS])
    base = alt.Chart(df).encode(
        x=alt.X(f"{x}:O", title=x),
        color=alt.Color("group:N", title="group"),
        xOffset=alt.XOffset("group:N"),
        tooltip=[alt.Tooltip("group"), alt.Tooltip(x), alt.Tooltip("estimate:Q", format=".4f"),
                 alt.Tooltip("lo:Q", format=".4f"), alt.Tooltip("hi:Q", format=".4f"), alt.Tooltip("n")],
    )
    bars = base.mark_rule(strokeWidth=2).encode(y=alt.Y("lo:Q", title=y_title), y2=alt.Y2("hi:Q"))
    naive_lo = base.mark_tick(thickness=1, size=8, opacity=0.6).encode(y=alt.Y("naive_lo:Q"))
    naive_hi = base.mark_tick(thickness=1, size=8, opacity=0.6).encode(y=alt.Y("naive_hi:Q"))
    points = base.mark_point(filled=True, size=50).encode(y=alt.Y("estimate:Q"))
    return alt.layer(bars, naive_lo, naive_hi, points).properties(title=title, width=420, height=260)


def p_s_by_depth_chart(df: pd.DataFrame) -> alt.Chart:
    """p_s by spine depth with intervals (columns: group, depth, estimate, lo, hi, naive_*, n)."""
    return curve_chart(df, x="depth", title="p_s by spine depth (bar: cluster bootstrap 95%, ticks: naive)")


def p_t_by_rank_chart(df: pd.DataFrame) -> alt.Chart:
    """p_t by transition rank with intervals (columns: group, rank, estimate, lo, hi, naive_*, n)."""
    return curve_chart(df, x="rank", title="p_t by rank (bar: cluster bootstrap 95%, ticks: naive)")


def p_t_by_parent_chart(df: pd.DataFrame) -> alt.Chart:
    """p_t by rank per parent source (``group`` = "<group> / <source>"), with intervals."""
    return curve_chart(df, x="rank", title="p_t by rank and parent source (bar: cluster bootstrap 95%, ticks: naive)")


def p_t_by_depth_chart(df: pd.DataFrame) -> alt.Chart:
    """p_t by tree depth with intervals."""
    return curve_chart(df, x="depth", title="p_t by depth (bar: cluster bootstrap 95%, ticks: naive)")


def predicted_vs_observed_chart(df: pd.DataFrame) -> alt.Chart:
    """Calibration: observed mean tau (with 95% interval) against the model's predicted E[tau]
    per bin of cycles, with the diagonal y = x (columns: group, predicted, observed, lo, hi, n)."""
    _require(df, ["group", "predicted", "observed", "lo", "hi", "n"])
    top = float(max(df["hi"].max(), df["predicted"].max(), 1.0)) if len(df) else 1.0
    diagonal = alt.Chart(pd.DataFrame({"v": [1.0, top]})).mark_line(color="gray", strokeDash=[4, 4]).encode(
        x=alt.X("v:Q"), y=alt.Y("v:Q"))
    base = alt.Chart(df).encode(x=alt.X("predicted:Q", title="predicted E[tau]", scale=alt.Scale(zero=False)),
                                color=alt.Color("group:N"),
                                tooltip=[alt.Tooltip("group"), alt.Tooltip("n"), alt.Tooltip("predicted:Q", format=".3f"),
                                         alt.Tooltip("observed:Q", format=".3f")])
    bars = base.mark_rule().encode(y=alt.Y("lo:Q", title="observed mean tau", scale=alt.Scale(zero=False)),
                                   y2=alt.Y2("hi:Q"))
    points = base.mark_point(filled=True).encode(y=alt.Y("observed:Q"), size=alt.Size("n:Q", legend=None))
    return alt.layer(diagonal, bars, points).properties(title="Predicted vs observed tau (dashed: y = x)", width=420,
                                                        height=300)


OBSERVED, BOUND = "observed mean tau, 95% interval", "paper's lower bound (solid: violated)"  # its legend


def bound_check_chart(df: pd.DataFrame) -> alt.Chart:
    """Per group: observed mean tau with its 95% interval against the paper's lower bound at the
    fitted parameters (red tick; a filled red bound marks a violation). Columns: group,
    observed_tau, lo, hi, lower_bound, violated."""
    _require(df, ["group", "observed_tau", "lo", "hi", "lower_bound", "violated"])
    base = alt.Chart(df).encode(y=alt.Y("group:N", title=None))
    # a legend names the two colours (the marks alone left the reader to guess which is which)
    colour = alt.Color("what:N", title=None,
                       scale=alt.Scale(domain=[OBSERVED, BOUND], range=["steelblue", "firebrick"]))
    interval = base.mark_rule(strokeWidth=3).transform_calculate(what=f"'{OBSERVED}'").encode(
        x=alt.X("lo:Q", title="tau"), x2=alt.X2("hi:Q"), color=colour)
    observed = base.mark_point(filled=True, size=60).transform_calculate(what=f"'{OBSERVED}'").encode(
        x=alt.X("observed_tau:Q"), color=colour,
        tooltip=[alt.Tooltip("group"), alt.Tooltip("observed_tau:Q", format=".3f"),
                 alt.Tooltip("lower_bound:Q", format=".3f"), alt.Tooltip("violated")])
    bound = base.mark_tick(thickness=3, size=18).transform_calculate(what=f"'{BOUND}'").encode(
        x=alt.X("lower_bound:Q"), color=colour, opacity=alt.condition("datum.violated", alt.value(1.0), alt.value(0.5)))
    return alt.layer(interval, observed, bound).properties(title="Paper's lower bound vs observed tau", width=420)


def write_html(chart: alt.Chart, path: str | os.PathLike) -> None:
    """Write ``chart`` as standalone HTML to ``path`` (not atomic: for temp paths)."""
    chart.save(path, format="html")


def save_chart(chart: alt.Chart, path: str | os.PathLike) -> None:
    """Write ``chart`` as standalone HTML, atomically (temp file, then rename)."""
    with atomic_output(path, ".html") as tmp:
        write_html(chart, tmp)
