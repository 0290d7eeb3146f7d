"""The trace recorder: round trip, column types, atomicity, reached/accepted consistency."""
from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

from goose_runtime.records import CycleRecord, PromptResult
from goose_runtime.tracing import TraceRecordError, trace_columns, write_run_trace
from goose_theory.traceio import open_trace, trace_metadata, trace_schema

NAN = float("nan")


def _cycle(parent, accepted, match=None, source=None, tau=None):
    n = len(parent)
    match = match or [a or i == 0 for i, a in enumerate(accepted)]
    source = source or ["root"] + ["spine"] * (n - 1)
    return CycleRecord(parent=parent, source=source, rank=[0] * n, token=list(range(10, 10 + n)),
                       match=match, accepted=accepted, score=[NAN] * n,
                       spine_pos=[0] + list(range(1, n)), tau=tau if tau is not None else sum(accepted),
                       verify_s=0.02, draft_s=0.0005, ngram=3, consensus=2, ema=0.4, bypass=False)


def _results():
    tree = _cycle([-1, 0, 1, 0, 3], [True, True, False, False, False],
                  match=[True, True, False, True, False],
                  source=["root", "spine", "spine", "transition", "transition"], tau=2)
    tree.spine_avail = 5
    tree.confident = 1
    chain = _cycle([-1, 0, 1], [True, True, True], tau=3)
    root_only = _cycle([-1], [True], tau=1)
    return [PromptResult("goose", "p0", "humaneval", 7, [1, 2, 3, 4, 5], "", cycles=[tree, chain]),
            PromptResult("ar", "p0", "humaneval", 7, [1], "", cycles=[root_only])]


def test_columns_cover_schema_and_derive_depth_reached_budget():
    cols = trace_columns(_results(), run_id="run", model="m")
    assert set(cols) == {f.name for f in trace_schema()}
    assert cols["depth"] == [0, 1, 2, 1, 2, 0, 1, 2, 0]
    assert cols["reached"] == [True, True, True, True, False, True, True, True, True]
    assert cols["budget"] == [4] * 5 + [2] * 3 + [0]
    assert cols["cycle"] == [0] * 5 + [1] * 3 + [0]
    assert cols["node"] == [0, 1, 2, 3, 4, 0, 1, 2, 0]
    assert cols["method"] == ["goose"] * 8 + ["ar"]
    assert cols["tau"] == [2] * 5 + [3] * 3 + [1]
    assert cols["spine_avail"] == [5] * 5 + [None] * 4  # -1 (not recorded) becomes null
    assert cols["confident"] == [True] * 5 + [None] * 4
    results = _results()
    results[0].cycles[0].confident = 0  # recorded as not confident: False, not null (not recorded)
    assert trace_columns(results, run_id="run", model="m")["confident"][:5] == [False] * 5


def test_round_trip_types_and_metadata(tmp_path):
    path = tmp_path / "t.parquet"
    # the recorder's shape (runner.run_config): the reader checks it (traceio.config_problem)
    config = {"methods": [{"label": "goose@16", "name": "goose", "budget": 16, "topology": None},
                          {"label": "ar", "name": "ar", "budget": 0, "topology": None}], "reset_adjacency": True}
    rows = write_run_trace(path, _results(), run_id="run", model="m", device="cpu", dtype="float32", config=config)
    pf = open_trace(path)
    assert rows == pf.metadata.num_rows == 9
    assert pf.schema_arrow.remove_metadata() == trace_schema().remove_metadata()
    meta = trace_metadata(pf)
    assert meta["goose_trace_version"] == 1 and meta["config"] == config
    assert meta["device"] == "cpu" and meta["dtype"] == "float32" and meta["model"] == "m"
    assert {"torch", "transformers", "numpy", "goose"} <= set(meta["versions"])
    table = pq.read_table(path).to_pydict()
    assert table["source"][:5] == ["root", "spine", "spine", "transition", "transition"]
    assert math.isnan(table["score"][0]) and table["ngram"][0] == 3
    assert table["verify_s"][0] == pytest.approx(0.02)


def test_accepted_nodes_are_reached_and_match(tmp_path):
    path = tmp_path / "t.parquet"
    write_run_trace(path, _results(), run_id="r", model="m", device="cpu", dtype="float32", config={})
    df = pq.read_table(path).to_pandas()
    accepted = df[df.accepted]
    assert accepted.reached.all() and accepted.match.all()
    root = df[df.node == 0]
    assert (root.parent == -1).all() and root.accepted.all() and root.reached.all() and (root.depth == 0).all()


def test_crash_mid_write_leaves_no_file(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")
    monkeypatch.setattr(pq, "write_table", boom)
    path = tmp_path / "t.parquet"
    with pytest.raises(RuntimeError, match="disk full"):
        write_run_trace(path, _results(), run_id="r", model="m", device="cpu", dtype="float32", config={})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cycle, message", [
    (_cycle([-1, 0, 1], [True, False, True]), "accepted but its parent"),
    (_cycle([-1, 0], [True, True], match=[True, False]), "does not match"),
    (_cycle([-1, 2, 0], [True, False, False]), "parents must come first"),
    (_cycle([0, 0], [True, False]), "accepted root"),
])
def test_inconsistent_records_rejected(cycle, message):
    result = PromptResult("goose", "p", "b", 1, [1], "", cycles=[cycle])
    with pytest.raises(TraceRecordError, match=message):
        trace_columns([result], run_id="r", model="m")


def test_list_length_mismatch_rejected():
    cycle = _cycle([-1, 0], [True, True])
    cycle.token = [1]
    with pytest.raises(TraceRecordError, match="token"):
        trace_columns([PromptResult("pld", "p", "b", 1, [1], "", cycles=[cycle])], run_id="r", model="m")


def test_nothing_to_record(tmp_path):
    with pytest.raises(TraceRecordError, match="nothing to record"):
        write_run_trace(tmp_path / "t.parquet", [PromptResult("ar", "p", "b", 1, [], "")], run_id="r",
                        model="m", device="cpu", dtype="float32", config={})
    assert not (tmp_path / "t.parquet").exists()


def test_a_consensus_past_int16_saturates_instead_of_failing_the_write(tmp_path):
    # keep_history on degenerate repetition counted 32997 earlier occurrences: the write of the whole run
    # had failed with pyarrow's "Value 32997 too large to fit in C integer type" (runtime review, 7 Dec)
    import pyarrow.parquet as pq

    results = _results()
    results[0].cycles[0].consensus = 32997
    path = tmp_path / "t.parquet"
    write_run_trace(path, results, run_id="r", model="m", device="cpu", dtype="float32", config={})
    assert pq.read_table(path, columns=["consensus"]).column(0).to_pylist()[:6] == [32767] * 5 + [2]
