"""Batches of whole cycles and the row checks of goose_theory.tracecheck (through the fit's
counting in tests/test_fitcounts.py; bad files through the CLI in test_fit_cli.py)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from goose_theory import tracecheck
from goose_theory._fitarrays import Codes
from goose_theory.tracecheck import (_coalesced, batch_arrays, check_budget, check_node_values, check_same_in_cycle,
                                     file_batches, per_cycle_values, whole_cycles)
from goose_theory.traceio import TraceFileError


def test_per_cycle_values_of_an_unsigned_column():
    # null (not recorded) is -1, which an unsigned column cannot hold: fill_null(-1) raised OverflowError
    got = per_cycle_values("f.parquet", pa.array([3, None, 255], pa.uint8()), "tau", lowest=1)
    assert got.tolist() == [3, -1, 255] and got.dtype == np.int64
    with pytest.raises(TraceFileError, match=r"^f.parquet: column spine_avail has values too large \(found 9223372036854775808\)$"):
        per_cycle_values("f.parquet", pa.array([0, 2**63], pa.uint64()), "spine_avail", lowest=0)


def test_check_node_values_skips_reached_where_not_recorded():
    # a root and its two children, the first accepted; reached -1: not recorded on that row
    kw = dict(depth=np.array([0, 1, 1]), gparent=np.array([0, 0, 0]), nonroot=np.array([False, True, True]),
              rank=np.zeros(3, np.int64), accepted=np.array([True, True, False]), match=np.array([True, True, False]))
    check_node_values("f.parquet", reached=np.array([-1, 1, -1], np.int8), **kw)
    with pytest.raises(TraceFileError, match="column reached disagrees"):
        check_node_values("f.parquet", reached=np.array([-1, 0, -1], np.int8), **kw)


@pytest.mark.parametrize("change, message", [
    (dict(depth=np.array([3, 4, 4, 0, 1])), r"column depth is 3 on a root row \(the root's depth is 0\)"),
    (dict(depth=np.array([0, 1, 1, -1, 0])), r"column depth is -1 on a root row"),  # the parent links alone agree
    (dict(accepted=np.array([True, True, True, True, False]), match=np.array([True, True, True, True, False])),
     "column accepted marks two children of one node"),
])
def test_check_node_values_refuses_a_shifted_root_depth_and_two_accepted_siblings(change, message):
    # two cycles: a root with two children, and a root with one (review, 3 Dec: a root depth of 3 or
    # -1 shifted the fitted depth curve; two accepted siblings raised p_t from 0.107 to 0.489, silently)
    kw = dict(depth=np.array([0, 1, 1, 0, 1]), gparent=np.array([0, 0, 0, 3, 3]),
              nonroot=np.array([False, True, True, False, True]), rank=np.zeros(5, np.int64),
              accepted=np.array([True, True, False, True, False]), match=np.array([True, True, True, True, False]),
              reached=None)
    check_node_values("f.parquet", **kw)
    with pytest.raises(TraceFileError, match=message):
        check_node_values("f.parquet", **{**kw, **change})


def test_a_string_view_batch_reads_as_its_strings():
    # what count_tables hands over without asking for dictionaries: cast to string, then coded
    batch = pa.record_batch({"method": pa.array(["goose", "ar", "goose"], pa.string_view()),
                             "node": pa.array([0, 0, 1], pa.int32())})
    codes = {"method": Codes()}
    a = batch_arrays(batch, "f.parquet", codes)
    assert a["method"].tolist() == [0, 1, 0] and codes["method"].values == ["goose", "ar"]


def _batches(sizes: list[int]) -> list[pa.RecordBatch]:
    """Batches of the given sizes; ``node`` numbers the rows, ``s`` is dictionary-coded per batch."""
    out, first = [], 0
    for n in sizes:
        rows = np.arange(first, first + n)
        strings = pa.array([f"v{r % 5}" for r in rows]).dictionary_encode()
        out.append(pa.record_batch({"node": pa.array(rows), "s": strings}))
        first += n
    return out


def test_small_batches_are_joined_to_the_batch_size(monkeypatch):
    got = list(_coalesced(_batches([3] * 10 + [40, 2]), 10))
    assert [b.num_rows for b in got] == [12, 12, 6 + 40, 2]  # the last one as it comes
    joined = pa.Table.from_batches(got)
    assert joined["node"].to_pylist() == list(range(72))
    assert joined["s"].to_pylist() == [f"v{r % 5}" for r in range(72)]  # dictionaries of several batches unified
    monkeypatch.setattr(tracecheck, "JOIN_BATCHES", 4)  # each held batch costs memory of its own
    assert [b.num_rows for b in _coalesced(_batches([1] * 10), 100)] == [4, 4, 2]


def test_file_batches_read_runs_of_row_groups(tmp_path, monkeypatch):
    # one iter_batches over 17k row groups held 200 MB more than runs of 1024
    path = tmp_path / "groups.parquet"
    with pq.ParquetWriter(path, pa.schema([("node", pa.int64())])) as writer:
        for first in range(0, 30, 3):
            writer.write_table(pa.table({"node": np.arange(first, first + 3)}))
    monkeypatch.setattr(tracecheck, "JOIN_BATCHES", 4)
    runs: list[list[int]] = []
    pf = pq.ParquetFile(path)
    real = pf.iter_batches
    monkeypatch.setattr(pf, "iter_batches", lambda **kw: (runs.append(list(kw["row_groups"])), real(**kw))[1])
    rows = [v for b in file_batches(pf, ["node"], 7) for v in b.column(0).to_pylist()]
    assert rows == list(range(30)) and runs == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    runs.clear()
    assert sum(b.num_rows for b in file_batches(pf, ["node"], 100)) == 30
    assert runs == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_whole_cycles_carry_a_cycle_across_batches():
    node = [0, 1, 2, 0, 1, 0, 0, 1, 2, 3]
    batches = [pa.record_batch({"node": pa.array(node[i:i + 4])}) for i in range(0, 10, 4)]
    arrays = lambda b: {"node": b.column(0).to_numpy()}  # noqa: E731
    got = [a["node"].tolist() for a in whole_cycles(batches, "f.parquet", 1, arrays)]
    assert got == [[0, 1, 2], [0, 1, 0], [0, 1, 2, 3]]
    with pytest.raises(TraceFileError, match="^f.parquet: rows are not grouped by cycle with the root first$"):
        list(whole_cycles([pa.record_batch({"node": pa.array([1, 0])})], "f.parquet", 1, arrays))


def test_check_budget_compares_where_recorded():
    lens = np.array([3, 1, 5])
    check_budget("f.parquet", np.array([2, -1, 4]), lens, str)  # -1: not recorded
    with pytest.raises(TraceFileError, match=r"^f.parquet: 2 has 4 non-root rows, but column budget says 7$"):
        check_budget("f.parquet", np.array([2, 0, 7]), lens, str)


def test_check_same_in_cycle_names_the_column():
    start = np.array([0, 0, 0, 3, 3])
    check_same_in_cycle("f.parquet", "method", np.array([4, 4, 4, 1, 1]), start)
    with pytest.raises(TraceFileError, match="^f.parquet: column method differs between the rows of one cycle$"):
        check_same_in_cycle("f.parquet", "method", np.array([4, 4, 1, 1, 1]), start)
