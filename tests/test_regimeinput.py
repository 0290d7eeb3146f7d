"""The regime fit's trace input: what read_frames refuses in one line naming the file (a trace
recorded with --min-score, a parent out of range, a trace whose config metadata was lost)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from goose_theory.regimeinput import read_frames
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from goose_theory.traceio import TraceFileError
from tests.conftest import TREE

SHIPPED = "traces/stdlib-b8.parquet"


def synthetic_trace(tmp_path):
    """A small synthetic trace with the recorder's config added (the synthetic writer records
    none, and the regime fit reads each method's budget and tree from it)."""
    path = tmp_path / "t.parquet"
    write_synthetic(path, SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    table = pq.read_table(path)
    config = {"methods": [{"label": "goose", "name": "goose", "budget": TREE.budget, "topology": None}]}
    meta = {**table.schema.metadata, b"config": json.dumps(config).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def test_traces_recorded_with_min_score_are_refused(tmp_path):
    from tests.conftest import thresholded_trace_copy
    bad = tmp_path / "thresholded.parquet"
    thresholded_trace_copy("traces/mtbench-b8.parquet", bad)
    assert read_frames(["traces/mtbench-b8.parquet"])  # the shipped one reads
    with pytest.raises(ValueError, match="recorded with --min-score"):
        read_frames([str(bad)])


def test_a_parent_out_of_range_is_refused_when_read(tmp_path):
    """An unsigned parent column (the root's -1 stored as 2**32 - 1) ended in an IndexError in
    _annotate; it is a one-line error naming the file."""
    path = synthetic_trace(tmp_path)
    table = pq.read_table(path)
    parent = [p if p >= 0 else 2**32 - 1 for p in table["parent"].to_pylist()]
    i = table.schema.get_field_index("parent")
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(i, pa.field("parent", pa.uint32()), pa.array(parent, pa.uint32())), bad)
    with pytest.raises(TraceFileError, match=rf"^{bad}: column parent is 4294967295 on row 0 \(node 0\): the root's"):
        read_frames([str(bad)])
    parent = table["parent"].to_pylist()
    parent[1] = 5  # node 1's parent: not an earlier node
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array(parent, pa.int32())), bad)
    with pytest.raises(TraceFileError, match="column parent is 5 on row 1 \\(node 1\\)"):
        read_frames([str(bad)])


@pytest.mark.parametrize("config", [None, b"null", b"{}", b'{"methods": []}'])
def test_a_trace_without_its_config_is_refused(tmp_path, config):
    """Without the config the fit found no method budgets, so it pooled every method (ar included)
    and dropped the confident regime, silently: predicted tau 3.0008 -> 2.9403 on stdlib-b8. The
    method labels alone give neither the budget of an unsuffixed label nor a topology:FILE's tree,
    so it is one line naming the file and what the fit needs."""
    table = pq.read_table(SHIPPED)
    meta = {k: v for k, v in table.schema.metadata.items() if k != b"config"}
    if config is not None:
        meta[b"config"] = config
    bad = tmp_path / "lost-config.parquet"
    pq.write_table(table.replace_schema_metadata(meta), bad)
    needle = rf"^{bad}: (no config|a config without a list of methods) in the parquet metadata; the two-regime fit"
    with pytest.raises(TraceFileError, match=needle + " needs the recorder's config") as caught:
        read_frames([str(bad)])
    assert "\n" not in str(caught.value)
    assert read_frames([SHIPPED])


def test_a_trace_without_its_config_is_one_usage_line_for_the_cli(tmp_path):
    """fit-acceptance --regimes and goose loop turn it into their one line (exit 2)."""
    from goose_runtime.fit_cli import regime_exports
    from goose_theory.cli_util import UsageError

    table = pq.read_table(SHIPPED)
    bad = tmp_path / "version-only.parquet"
    pq.write_table(table.replace_schema_metadata({b"goose_trace_version": b"1"}), bad)
    with pytest.raises(UsageError, match=rf"^--regimes: all: {bad}: no config in the parquet metadata; [^\n]*$"):
        regime_exports([str(bad)], bench=None, budget=8, context="--regimes: all")
