"""Chart builders: the right marks and fields, clear errors on missing columns, atomic HTML."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from goose_runtime import charts


def _curve(x: str) -> pd.DataFrame:
    return pd.DataFrame({"group": ["a", "a", "b"], x: [1, 2, 1], "estimate": [0.6, 0.7, 0.5],
                         "lo": [0.5, 0.6, 0.4], "hi": [0.7, 0.8, 0.6], "naive_lo": [0.55, 0.65, 0.45],
                         "naive_hi": [0.65, 0.75, 0.55], "n": [100, 50, 80]})


def _fields(spec) -> set[str]:
    found = set()
    if isinstance(spec, dict):
        if "field" in spec:
            found.add(spec["field"])
        for v in spec.values():
            found |= _fields(v)
    elif isinstance(spec, list):
        for v in spec:
            found |= _fields(v)
    return found


@pytest.mark.parametrize("builder,x", [(charts.p_s_by_depth_chart, "depth"), (charts.p_t_by_rank_chart, "rank"),
                                       (charts.p_t_by_depth_chart, "depth"), (charts.p_t_by_parent_chart, "rank")])
def test_curve_charts_encode_estimate_and_both_intervals(builder, x):
    spec = builder(_curve(x)).to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert "rule" in marks and "point" in marks and "tick" in str(spec)
    assert {x, "estimate", "lo", "hi", "naive_lo", "naive_hi", "group"} <= _fields(spec)


def test_predicted_vs_observed_has_diagonal_and_points():
    df = pd.DataFrame({"group": ["a", "a"], "predicted": [1.5, 2.5], "observed": [1.6, 2.4],
                       "lo": [1.5, 2.3], "hi": [1.7, 2.5], "n": [10, 20]})
    spec = charts.predicted_vs_observed_chart(df).to_dict()
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["line", "rule", "point"]
    assert {"predicted", "observed", "lo", "hi"} <= _fields(spec)


def test_bound_chart_marks_bound_and_interval():
    df = pd.DataFrame({"group": ["ok", "bad"], "observed_tau": [2.5, 1.8], "lo": [2.4, 1.75], "hi": [2.6, 1.85],
                       "lower_bound": [2.2, 2.3], "violated": [False, True]})
    spec = charts.bound_check_chart(df).to_dict()
    assert {"lower_bound", "observed_tau", "lo", "hi"} <= _fields(spec)
    # one legend names both colours: every layer colours by the same field and scale
    colours = [layer["encoding"]["color"] for layer in spec["layer"]]
    assert all(c["field"] == "what" and c["scale"]["domain"] == [charts.OBSERVED, charts.BOUND] for c in colours)
    assert [layer["transform"][0]["calculate"] for layer in spec["layer"]] == [
        f"'{charts.OBSERVED}'", f"'{charts.OBSERVED}'", f"'{charts.BOUND}'"]


def test_missing_column_is_a_clear_error():
    with pytest.raises(ValueError, match="lacks column.*hi"):
        charts.p_s_by_depth_chart(_curve("depth").drop(columns=["hi"]))


def test_save_chart_writes_html_atomically(tmp_path):
    path = tmp_path / "sub" / "c.html"
    charts.save_chart(charts.p_s_by_depth_chart(_curve("depth")), path)
    text = path.read_text()
    assert text.lstrip().lower().startswith("<!doctype html") and "vega" in text
    assert os.listdir(path.parent) == ["c.html"]  # no temp file left behind
