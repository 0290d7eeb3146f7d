"""Topology metadata shapes: a hand-edited file is refused on load with one line."""
from __future__ import annotations

import json

import pytest

from goose_theory.topology import Topology, TopologyError, load_topology
from goose_theory.topometa import SHAPES, meta_problem

TREE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
WRITTEN = {"predicted_tau": 1.9, "acceptance": {"p_s": 0.6, "p_t": 0.1},
           "provenance": {"traces": ["a.parquet"], "fitted": {"selected": {"p_s": 0.6, "p_t": 0.1}},
                          "group_key": {"benchmark": "mtbench"}, "prompts": 40, "regime_budgets": [2, 8]},
           "regime_fit": {"unmatched": {"p_s": 0.5, "p_t": 0.1}, "matched": None, "spines": [None, None]}}


def _file(tmp_path, **meta):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**TREE.to_dict(), **meta}))
    return path


def test_what_the_toolkit_writes_loads(tmp_path):
    assert meta_problem(WRITTEN) is None
    assert load_topology(_file(tmp_path, **WRITTEN)).meta["provenance"]["prompts"] == 40


@pytest.mark.parametrize("key", list(SHAPES))
def test_each_key_of_the_wrong_type_is_refused_naming_it(tmp_path, key):
    # goose validate read these as dicts / lists / floats mid-run: 'str' object has no attribute 'get'
    *parents, last = key.split(".")
    meta = json.loads(json.dumps(WRITTEN))
    holder = meta
    for part in parents:
        holder = holder.setdefault(part, {}) or {}
    holder[last] = "x" if SHAPES[key][1] != "a number" else True
    with pytest.raises(TopologyError) as err:
        load_topology(_file(tmp_path, **meta))
    assert str(err.value).startswith(f"{tmp_path / 't.json'}: meta: {key} must be ") and "\n" not in str(err.value)


def test_trace_names_must_be_strings(tmp_path):
    with pytest.raises(TopologyError, match="provenance.traces must be a list of file names"):
        load_topology(_file(tmp_path, provenance={"traces": [5]}))


def test_other_meta_is_free_form():
    assert meta_problem({"note": [1, {"a": "b"}], "rule": 7, "provenance": {"anything": "else"}}) is None


@pytest.mark.parametrize("key, acc", [("acceptance", {"p_s": 2, "p_t": -1}),
                                      ("provenance", {"fitted": {"selected": {"p_s": [float("nan")], "p_t": 0.1}}})])
def test_an_acceptance_validate_predicts_with_is_checked_naming_the_file(tmp_path, key, acc):
    # goose validate said only "p_s: 2.0 is not a probability in [0, 1]", after the model load
    named = "acceptance" if key == "acceptance" else "provenance.fitted.selected"
    with pytest.raises(TopologyError, match=rf"t\.json: meta: {named}: p_s"):
        load_topology(_file(tmp_path, **{key: acc}))


@pytest.mark.parametrize("tau", ["NaN", "Infinity", "0.5", "-2"])
def test_a_prediction_that_is_no_number_of_tokens_is_refused(tmp_path, tau):
    # validate read NaN as "no prediction" and printed 0.5 as one; the writer never makes either
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TREE.to_dict())[:-1] + f', "predicted_tau": {tau}}}')
    with pytest.raises(TopologyError, match=r"t\.json: meta: predicted_tau must be a number of tokens per cycle, at least 1"):
        load_topology(path)
