"""Pure chart builders for the explorer: a DataFrame in, an altair chart out (no Streamlit).

Each builder checks that its frame has the columns it needs (a :class:`ValueError` naming the
missing ones) so a wrong call fails at once rather than as an empty chart in the page.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"tau": [1, 2, 1, 2], "probability": [.4, .6, .41, .59],
    ...                    "kind": ["exact", "exact", "simulated", "simulated"]})
    >>> pmf_chart(df).to_dict()["mark"]["type"]
    'bar'
"""
from __future__ import annotations

from typing import Iterable

import altair as alt
import numpy as np
import pandas as pd

SOURCE_COLORS = alt.Scale(domain=["root", "spine", "transition"], range=["#444444", "#d62728", "#1f77b4"])
# one colour per rule on every tab (Vega-Lite's default colours by order of appearance, so the
# same rule changed colour between the What-if curves and the Cost tab's chosen rules)
RULE_COLORS = {"optimal": "#1f77b4", "linear": "#ff7f0e", "harmonic": "#2ca02c", "paper": "#d62728",
               "source-blind": "#9467bd", "isotropic:3": "#8c564b", "isotropic:5": "#e377c2",
               "mixed-isotropic:3": "#7f7f7f", "mixed-isotropic:5": "#bcbd22", "spine-only": "#17becf",
               "transition-only": "#aec7e8", "uniform-levels": "#ffbb78"}
_SPARE_COLORS = ("#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5")
PAPER_GAIN = (0.12, 0.33)  # the paper's spine-tree gain over Iso(3)/Iso(5): +12% .. +33%


def _counting_axis(**kw) -> alt.Axis:
    """An axis of whole numbers (depth, position, width, budget): whole ticks only, printed without
    decimals (Vega-Lite's default put 0.5, 1.5 on a depth axis and '0.000000' on a flat one)."""
    return alt.Axis(tickMinStep=1, format="d", **kw)


# Every channel below is an altair channel object, never a bare "field:T" string: altair turns a
# string into its channel with from_dict, which hashes some 500 schema classes each time (about 2 ms
# a channel on a slow host, 60 ms of the tree chart's 64 ms on 3 Dec); an object goes straight through.


def _inline(df: pd.DataFrame) -> dict:
    """The frame's rows inline, as altair's default data transformer writes them but without its
    5000-row limit (a MaxRowsError): a valid tree has up to 10000 nodes, its pmf as many taus.
    Inline rows carry no dtypes, so every encoding on them names its type (``"node:Q"``).

    Numeric and string columns, what every What-if move draws, are converted here column by
    column to the values ``alt.to_values`` gives (NaN and inf as None; tested), without its copy
    and sanitising of the whole frame (with the tree chart's spec 19-37 -> 13-23 ms,
    bench/bench_app_moves.py); any other frame goes to it."""
    if isinstance(df.index, pd.MultiIndex) or isinstance(df.columns, pd.MultiIndex):
        return alt.to_values(df)
    columns = []
    for name in df.columns:
        values = _column_values(df[name]) if isinstance(name, str) else None
        if values is None:
            return alt.to_values(df)
        columns.append(values)
    names = list(df.columns)
    return {"values": [dict(zip(names, row)) for row in zip(*columns)]}


def _column_values(col: pd.Series) -> list | None:
    """A numpy int, bool or float column or a string column as Python values (None for NaN, inf
    and missing strings, as altair writes them); None for any other column."""
    kind = col.dtype.kind if isinstance(col.dtype, np.dtype) else None
    values = col.tolist()
    if kind in ("i", "u", "b") or (kind == "O" and all(isinstance(v, str) for v in values)):
        return values
    if kind == "f":
        missing = ~np.isfinite(col.to_numpy())
    elif str(col.dtype) in ("str", "string"):
        missing = col.isna().to_numpy()
    else:
        return None
    for i in np.flatnonzero(missing).tolist():
        values[i] = None
    return values


def rule_color(rule: str) -> str:
    """The colour of a rule on every chart; a variant ("optimal (spine <= m)") takes its rule's.

    Example:
        >>> rule_color("optimal (spine <= m)") == rule_color("optimal") == "#1f77b4"
        True
    """
    base = rule.split(" (")[0]
    if base in RULE_COLORS:
        return RULE_COLORS[base]
    return _SPARE_COLORS[sum(base.encode()) % len(_SPARE_COLORS)]  # stable across runs (no hash seed)


def _rule_names(df: pd.DataFrame) -> list[str]:
    """The frame's rules in order of appearance (the legend's order)."""
    return list(dict.fromkeys(df["rule"].astype(str)))


def _rule_channel(df: pd.DataFrame, title: str) -> alt.Color:
    names = _rule_names(df)
    # a side legend is cut at the chart's height (seven rules at 280 px, app review 6 Dec): many go below, in columns
    # (only then a legend key: the widths chart's colour and dash legends merge while neither has one)
    below = {"legend": alt.Legend(orient="bottom", columns=4, symbolLimit=0)} if len(names) > 6 else {}
    return alt.Color("rule:N", title=title, scale=alt.Scale(domain=names, range=[rule_color(n) for n in names]),
                     **below)


def _need(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)}")


def spine_curve_chart(df: pd.DataFrame) -> alt.Chart:
    """E[tau] against spine length m, one line per rule (columns m, rule, expected_tau)."""
    _need(df, ("m", "rule", "expected_tau"), "spine_curve_chart")
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("m:Q", title="spine length m", axis=_counting_axis()),
        y=alt.Y("expected_tau:Q", title="E[tau]", scale=alt.Scale(zero=False)),
        color=_rule_channel(df, "allocation"),
        tooltip=[alt.Tooltip("rule"), alt.Tooltip("m"), alt.Tooltip("expected_tau:Q", format=".4f")],
    ).properties(title="E[tau] against spine length", height=260)


def widths_chart(df: pd.DataFrame) -> alt.Chart:
    """First-level branch widths w_i along the spine (columns position, rule, width)."""
    _need(df, ("position", "rule", "width"), "widths_chart")
    return alt.Chart(df).mark_line(point=True, interpolate="step-after").encode(
        x=alt.X("position:Q", title="spine position i (0 = root)", axis=_counting_axis()),
        y=alt.Y("width:Q", title="branch width w_i", axis=_counting_axis()),
        # the same field and title in both channels: Vega-Lite merges them into one legend (a
        # legend=None on the dash dropped the colour legend too, leaving the lines unnamed)
        color=_rule_channel(df, "allocation"),
        strokeDash=alt.StrokeDash("rule:N", title="allocation",  # the colour's order: one merged legend
                                  scale=alt.Scale(domain=_rule_names(df))),
        tooltip=[alt.Tooltip("rule"), alt.Tooltip("position"), alt.Tooltip("width")],
    ).properties(title="Branch widths along the spine", height=260)


def tree_chart(nodes: pd.DataFrame, edges: pd.DataFrame, height: int = 320) -> alt.LayerChart:
    """The tree: nodes at (depth, order) coloured by source, edges as segments.

    ``nodes``: x, y, source, node, rank, reach; ``edges``: x, y, x2, y2, source (of the child).
    """
    _need(nodes, ("x", "y", "source", "node", "rank", "reach"), "tree_chart nodes")
    _need(edges, ("x", "y", "x2", "y2", "source"), "tree_chart edges")
    color = alt.Color("source:N", scale=SOURCE_COLORS, title="source")
    lines = alt.Chart(_inline(edges)).mark_rule(opacity=0.6).encode(
        x=alt.X("x:Q", title="depth", axis=_counting_axis()), y=alt.Y("y:Q", axis=None), x2=alt.X2("x2:Q"), y2=alt.Y2("y2:Q"),
        color=color)
    points = alt.Chart(_inline(nodes)).mark_circle(size=70, opacity=1).encode(
        x=alt.X("x:Q"), y=alt.Y("y:Q"), color=color,
        tooltip=[alt.Tooltip("node:Q"), alt.Tooltip("source:N"), alt.Tooltip("rank:Q"), alt.Tooltip("x:Q", title="depth"),
                 alt.Tooltip("reach:Q", format=".4f", title="P(accepted)")])
    return alt.layer(lines, points).properties(title="The tree (spine red, branches blue)", height=height)


def pmf_chart(df: pd.DataFrame) -> alt.Chart:
    """pmf of tau, exact against simulated side by side (columns tau, probability, kind)."""
    _need(df, ("tau", "probability", "kind"), "pmf_chart")
    return alt.Chart(_inline(df)).mark_bar().encode(
        x=alt.X("tau:O", title="tau (accepted tokens per call)"),
        xOffset=alt.XOffset("kind:N"),
        y=alt.Y("probability:Q", title="P(tau)"),
        color=alt.Color("kind:N", title=""),
        tooltip=[alt.Tooltip("kind:N"), alt.Tooltip("tau:Q"), alt.Tooltip("probability:Q", format=".4f")],
    ).properties(title="Distribution of tau", height=260)


def gain_heatmap_chart(df: pd.DataFrame, band: tuple[float, float] = PAPER_GAIN) -> alt.LayerChart:
    """Gain of the optimal tree over the best isotropic one over (p_s, p_t); cells whose gain
    lies in the paper's band are outlined (columns p_s, p_t, gain; gain as a fraction)."""
    _need(df, ("p_s", "p_t", "gain"), "gain_heatmap_chart")
    data = df.assign(in_band=df["gain"].between(band[0], band[1]),
                     p_s_label=df["p_s"].map(lambda v: f"{v:.2f}"),
                     p_t_label=df["p_t"].map(lambda v: f"{v:.3f}"))
    base = alt.Chart(data).encode(
        x=alt.X("p_s_label:O", title="p_s"),
        y=alt.Y("p_t_label:O", title="p_t", sort="descending"))
    cells = base.mark_rect().encode(
        color=alt.Color("gain:Q", title="gain", scale=alt.Scale(scheme="viridis"),
                        legend=alt.Legend(format="%")),
        tooltip=[alt.Tooltip("p_s:Q", format=".2f"), alt.Tooltip("p_t:Q", format=".3f"),
                 alt.Tooltip("gain:Q", format="+.1%")])
    marked = base.transform_filter("datum.in_band").mark_rect(
        fill=None, stroke="white", strokeWidth=2)
    title = f"Optimal over best isotropic (outlined: the paper's +{band[0]:.0%}..+{band[1]:.0%})"
    return alt.layer(cells, marked).properties(title=title, height=300)


def speedup_chart(df: pd.DataFrame) -> alt.Chart:
    """Predicted speedup over autoregressive decoding against budget, one line per rule (a
    ``nodes`` column, the tree's own node count where the rule stops short of B, joins the tooltip)."""
    _need(df, ("budget", "rule", "speedup_vs_ar"), "speedup_chart")
    tooltip = [alt.Tooltip("rule"), alt.Tooltip("budget"), *([alt.Tooltip("nodes")] if "nodes" in df else []),
               alt.Tooltip("speedup_vs_ar:Q", format=".3f")]
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("budget:Q", title="budget B (tree nodes)", axis=_counting_axis()),
        y=alt.Y("speedup_vs_ar:Q", title="predicted speedup vs AR", scale=alt.Scale(zero=False)),
        color=_rule_channel(df, "rule"),
        tooltip=tooltip,
    ).properties(title="Predicted speedup against budget", height=280)
