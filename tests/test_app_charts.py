"""The explorer's pure chart builders: right marks, encodings and data; clear errors on bad frames."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from app import charts, compute, views
from goose_theory.acceptance import Acceptance
from goose_theory.cli import MAX_BUDGET
from goose_theory.optimize import build_topology
from goose_theory.topology import Topology


def _layers(spec: dict) -> list[dict]:
    return spec["layer"] if "layer" in spec else [spec]


def _data(spec: dict) -> list[dict]:
    """Rows of the chart's (first) dataset as altair serialised them."""
    return next(iter(spec["datasets"].values()))


def test_spine_curve_chart_encodes_rules():
    df = compute.spine_curves(0.6, 0.05, "exclusive", budget=12, max_spine=6)
    spec = charts.spine_curve_chart(df).to_dict()
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["x"]["field"] == "m" and spec["encoding"]["y"]["field"] == "expected_tau"
    rows = _data(spec)
    assert len(rows) == len(df)
    assert {r["rule"] for r in rows} == {"linear", "harmonic", "optimal (spine <= m)"}


def test_a_rule_has_one_colour_on_every_chart():
    # Vega-Lite's default colours follow the order of appearance: "optimal" was blue on the What-if
    # curves and another colour on the Cost tab, where other rules came first
    def colours(spec):
        scale = spec["encoding"]["color"]["scale"]
        return dict(zip(scale["domain"], scale["range"]))
    curves = colours(charts.spine_curve_chart(compute.spine_curves(0.6, 0.05, "exclusive", budget=12)).to_dict())
    widths = colours(charts.widths_chart(compute.width_profiles(0.6, 0.05, "exclusive", budget=12)).to_dict())
    cost = pd.DataFrame({"budget": [4, 8, 4, 8], "rule": ["paper", "paper", "optimal", "optimal"],
                         "speedup_vs_ar": [1.1, 1.2, 1.3, 1.4]})
    speed = colours(charts.speedup_chart(cost).to_dict())
    assert curves["optimal (spine <= m)"] == widths["optimal"] == speed["optimal"] == charts.RULE_COLORS["optimal"]
    assert curves["linear"] == widths["linear"] and speed["paper"] == charts.RULE_COLORS["paper"]
    assert len(set(charts.RULE_COLORS.values())) == len(charts.RULE_COLORS)  # no two rules alike
    from app.sections.sidebar import RULE_CHOICES, UPLOADED
    assert set(RULE_CHOICES) - {UPLOADED} <= set(charts.RULE_COLORS)  # every rule the page offers has its own
    # off the list: still fixed across runs (a str hash would change with the interpreter's hash seed)
    import subprocess
    import sys
    code = "from app.charts import rule_color; print(rule_color('isotropic:7'), rule_color('isotropic:9'))"
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and runs.pop().split() == [charts.rule_color("isotropic:7"), charts.rule_color("isotropic:9")]


def test_many_rules_get_a_legend_below_the_chart_that_names_them_all():
    # app review, 6 Dec: the Cost chart's side legend was cut at seven of nine rules (the chart's height)
    rules = list(charts.RULE_COLORS)[:9]
    df = pd.DataFrame({"budget": [1, 2] * 9, "rule": [r for r in rules for _ in (1, 2)], "speedup_vs_ar": 1.0})
    legend = charts.speedup_chart(df).to_dict()["encoding"]["color"]["legend"]
    assert legend == {"columns": 4, "orient": "bottom", "symbolLimit": 0}
    assert "legend" not in charts.speedup_chart(df[df["rule"].isin(rules[:6])]).to_dict()["encoding"]["color"]


def test_widths_chart_and_pmf_chart():
    w = compute.width_profiles(0.6, 0.05, "exclusive", budget=20)
    spec = charts.widths_chart(w).to_dict()
    assert spec["encoding"]["y"]["field"] == "width"
    assert sum(r["width"] for r in _data(spec)) == int(w["width"].sum())
    # one legend names the lines (colour and dash on one field and title merge; legend=None on one hid both)
    assert spec["encoding"]["strokeDash"]["title"] == spec["encoding"]["color"]["title"] == "allocation"
    assert "legend" not in spec["encoding"]["strokeDash"] and "legend" not in spec["encoding"]["color"]
    for axis in ("x", "y"):  # positions and widths are counts: whole ticks, no decimals
        assert spec["encoding"][axis]["axis"] == {"format": "d", "tickMinStep": 1}
    r = compute.whatif(0.6, 0.05, "exclusive", "optimal", budget=20, cycles=10_000)
    pspec = charts.pmf_chart(r["pmf"]).to_dict()
    assert pspec["mark"]["type"] == "bar" and pspec["encoding"]["xOffset"]["field"] == "kind"
    kinds = {row["kind"] for row in _data(pspec)}
    assert kinds == {"exact", "simulated"}


def test_tree_chart_draws_every_node_and_edge():
    res = build_topology("optimal", Acceptance.parse(0.6, 0.05), budget=15)
    nodes, edges = compute.tree_layout(res.topology.to_dict())
    spec = charts.tree_chart(nodes, edges).to_dict()
    layers = _layers(spec)
    assert [layer["mark"]["type"] for layer in layers] == ["rule", "circle"]
    sizes = sorted(len(v) for v in spec["datasets"].values())
    assert sizes == sorted([res.topology.n_nodes, res.topology.n_nodes - 1])
    assert layers[1]["encoding"]["color"]["scale"]["domain"] == ["root", "spine", "transition"]


def test_gain_heatmap_marks_the_paper_band():
    df = pd.DataFrame({"p_s": [0.2, 0.2, 0.5, 0.5], "p_t": [0.03, 0.05, 0.03, 0.05],
                       "gain": [0.05, 0.12, 0.25, 0.40]})
    spec = charts.gain_heatmap_chart(df).to_dict()
    cells, outline = _layers(spec)
    assert cells["mark"]["type"] == "rect" and outline["mark"]["stroke"] == "white"
    assert outline["transform"] == [{"filter": "datum.in_band"}]
    rows = _data(spec)
    assert [r["in_band"] for r in rows] == [False, True, True, False]  # band is [0.12, 0.33]
    assert "+12%" in spec["title"] and "+33%" in spec["title"]


def test_speedup_chart():
    df = pd.DataFrame({"budget": [8, 16, 8, 16], "rule": ["optimal", "optimal", "paper", "paper"],
                       "speedup_vs_ar": [1.5, 1.7, 1.4, 1.6], "predicted_tau": [2.0, 2.4, 1.9, 2.2]})
    spec = charts.speedup_chart(df).to_dict()
    assert spec["encoding"]["x"]["field"] == "budget" and spec["encoding"]["y"]["field"] == "speedup_vs_ar"
    assert len(_data(spec)) == 4 and "nodes" not in str(spec["encoding"]["tooltip"])
    spec = charts.speedup_chart(df.assign(nodes=[8, 12, 8, 16])).to_dict()  # the tree's own size joins the tooltip
    assert [t["field"] for t in spec["encoding"]["tooltip"]] == ["rule", "budget", "nodes", "speedup_vs_ar"]


@pytest.mark.parametrize("builder, columns", [
    (charts.spine_curve_chart, ["m", "rule"]),
    (charts.widths_chart, ["position", "rule"]),
    (charts.pmf_chart, ["tau", "kind"]),
    (charts.gain_heatmap_chart, ["p_s", "p_t"]),
    (charts.speedup_chart, ["budget", "rule"]),
])
def test_missing_columns_are_named(builder, columns):
    with pytest.raises(ValueError, match="missing column"):
        builder(pd.DataFrame({c: [1] for c in columns}))


def test_tree_layout_positions():
    res = build_topology("optimal", Acceptance.parse(0.5, 0.08), budget=30)
    topo = res.topology
    nodes, edges = compute.tree_layout(topo.to_dict())
    assert np.array_equal(nodes["x"].to_numpy(), topo.depth)
    start, index = topo.children
    y = nodes["y"].to_numpy()
    leaves = [v for v in range(topo.n_nodes) if start[v] == start[v + 1]]
    assert len(set(y[leaves])) == len(leaves)  # every leaf has its own row
    for v in range(topo.n_nodes):  # a parent is level with its first child, above the others
        kids = index[start[v]:start[v + 1]]
        if len(kids):
            assert y[v] == y[kids[0]] and (y[kids] <= y[v]).all()
    spine = [v for v in range(1, topo.n_nodes) if topo.source[v] == 1]
    assert spine and all(y[v] == y.max() for v in spine)  # spine drawn along the top
    assert len(edges) == topo.n_nodes - 1


def _spine_chain(n: int) -> Topology:
    """A valid tree of n drafted nodes in one spine: n + 1 tree rows, 2 (n + 1) pmf rows."""
    return Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(n)], max_spine=n + 1)


def test_tree_and_pmf_charts_take_more_than_5000_rows():
    """altair's default data transformer refuses frames over 5000 rows (MaxRowsError); the largest
    tree goose optimizes has 10000 nodes and its pmf as many taus."""
    nodes, edges = compute.tree_layout(_spine_chain(MAX_BUDGET).to_dict())
    spec = charts.tree_chart(nodes, edges).to_dict()
    assert sorted(len(v) for v in spec["datasets"].values()) == [MAX_BUDGET, MAX_BUDGET + 1]
    pmf = pd.DataFrame({"tau": np.tile(np.arange(1, MAX_BUDGET + 2), 2), "probability": 1.0 / (MAX_BUDGET + 1),
                        "kind": np.repeat(["exact", "simulated"], MAX_BUDGET + 1)})
    assert len(_data(charts.pmf_chart(pmf).to_dict())) == len(pmf)


def test_drawn_pmf_cuts_only_the_negligible_tail():
    pmf = pd.DataFrame({"tau": [1, 2, 3, 4, 1, 2, 3, 4], "probability": [0.5, 1e-13, 0.5, 1e-20, 0.6, 0.4, 0, 0],
                        "kind": ["exact"] * 4 + ["simulated"] * 4})
    drawn, note = views.drawn_pmf(pmf)
    assert sorted(set(drawn["tau"])) == [1, 2, 3]  # tau 2's tiny exact value stays: tau 3 after it does not
    assert note == "Drawn up to tau = 3: P(tau) < 1e-12 for each larger tau (1 more), exact and simulated."
    whole, none = views.drawn_pmf(pmf[pmf["tau"] <= 3])
    assert none is None and len(whole) == 6


def test_whatif_view_of_the_largest_tree():
    """An uploaded 10000-node tree (one spine: a pmf of 10002 taus) is scored and drawn; the pmf
    chart stops where P(tau) falls below 1e-12 and says so."""
    v = views.whatif_view(0.5, 0.05, "exclusive", "optimal", budget=60, max_depth=6, max_spine=20, top_k=10,
                          seed=0, topology_json=json.dumps(_spine_chain(MAX_BUDGET).to_dict()))
    assert v["exact"] == pytest.approx(2.0) and v["topology"]["budget"] == MAX_BUDGET
    assert len(v["pmf"]) == 2 * (MAX_BUDGET + 1)  # the data stays whole
    drawn = _data(v["pmf_spec"])
    last = max(r["tau"] for r in drawn)
    assert 30 < last < 60 and v["pmf_note"].startswith(f"Drawn up to tau = {last}: P(tau) < 1e-12")
    assert sorted(len(d) for d in v["tree_spec"]["datasets"].values()) == [MAX_BUDGET, MAX_BUDGET + 1]


def test_inline_rows_equal_altairs_own(monkeypatch):
    """charts._inline converts numeric and string columns itself: the same values as
    alt.to_values for every dtype the builders get, NaN, inf and missing strings included; other
    frames go to altair."""
    import altair as alt

    frame = pd.DataFrame({"i": np.arange(5), "u": np.arange(5, dtype=np.uint8), "b": [True, False] * 2 + [True],
                          "f": [0.5, np.nan, np.inf, -np.inf, 1e-300],
                          "s": pd.array(["a", None, "c", "d", "e"], dtype="str"),
                          "o": pd.Series(["x", "y", "z", "w", "v"], dtype=object)})
    others = [frame.assign(c=pd.Categorical(list("abcab"))),
              frame.assign(n=pd.array([1, None, 3, 4, 5], dtype="Int64")),
              frame.assign(m=pd.Series(["x", None, "z", "w", 1.5], dtype=object))]
    expected = [alt.to_values(df) for df in [frame, frame.iloc[:0], *others]]
    real, handed = alt.to_values, []
    monkeypatch.setattr(alt, "to_values", lambda df: handed.append(df) or real(df))
    assert [charts._inline(df) for df in [frame, frame.iloc[:0], *others]] == expected
    assert [id(df) for df in handed] == [id(df) for df in others]  # the numeric / string frames stay here
    row = charts._inline(frame)["values"][1]
    assert row["f"] is None and row["s"] is None and type(row["i"]) is int and type(row["b"]) is bool
