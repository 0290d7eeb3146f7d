"""Rows the fit's counting refuses in one line naming the file: rows out of order, a root that is
not a root, per-cycle columns that differ within a cycle or do not fit it (tau, budget), cluster
columns that disagree within a cycle, and cycles counted twice."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from goose_theory.fitcounts import BATCH_ROWS, count_files, count_tables
from goose_theory.synthetic import SyntheticSpec, synthetic_table
from goose_theory.traceio import TraceFileError
from tests.conftest import TREE
from tests.fittraces import cycle_rows, with_column


def test_rows_out_of_order_are_rejected():
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=1, cycles=3), seed=8)
    shuffled = table.take(np.r_[1, 0, 2:table.num_rows])
    with pytest.raises(TraceFileError, match="root first|grouped by cycle"):
        count_tables([shuffled])


def test_per_cycle_columns_the_regime_fit_reads_are_checked():
    """tau and spine_avail feed the regime fit (psi, the match length), so a value no recorder
    writes is refused, naming the column; nulls (not recorded) pass."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    ref = count_tables([table])
    tau = table["tau"].to_numpy()
    with pytest.raises(TraceFileError, match="column tau has values below 1"):
        count_tables([with_column(table, "tau", -tau)])
    with pytest.raises(TraceFileError, match="column tau exceeds the accepted rows"):
        count_tables([with_column(table, "tau", tau + 1)])
    uneven = tau.copy()
    uneven[1] += 1  # rows 0 and 1 are the first cycle's root and its first child
    with pytest.raises(TraceFileError, match="tau differs between the rows of one cycle"):
        count_tables([with_column(table, "tau", uneven)])
    avail = table["spine_avail"].to_numpy()
    with pytest.raises(TraceFileError, match="column spine_avail has values below 0"):
        count_tables([with_column(table, "spine_avail", avail - 100)])
    unrecorded = count_tables([with_column(table, "tau", [None] * table.num_rows)])
    assert unrecorded.shape_table.equals(ref.shape_table)
    for name in ("tau", "spine_avail"):  # a column of Arrow's null type (a recorder that left it empty)
        i = table.schema.get_field_index(name)
        empty = table.set_column(i, pa.field(name, pa.null()), pa.nulls(table.num_rows))
        assert count_tables([empty]).shape_table.equals(ref.shape_table)
    fewer = count_tables([with_column(table, "tau", np.maximum(tau - 1, 1))])  # EOS / token cap cut the path
    assert fewer.shape_table.equals(ref.shape_table)


def test_a_root_whose_parent_is_not_minus_one_is_refused():
    """An unsigned parent column stores the root's -1 as 2**32 - 1; it was taken silently (and the
    regime fit indexed row 4294967295)."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    parent = [p if p >= 0 else 2**32 - 1 for p in table["parent"].to_pylist()]
    i = table.schema.get_field_index("parent")
    unsigned = table.set_column(i, pa.field("parent", pa.uint32()), pa.array(parent, pa.uint32()))
    with pytest.raises(TraceFileError, match=r"column parent is 4294967295 on a root row \(the root's parent is -1\)"):
        count_tables([unsigned])


@pytest.mark.parametrize("name", ["run_id", "model", "benchmark", "prompt_id", "method"])
def test_a_cycle_whose_rows_disagree_on_a_cluster_column_is_refused(name):
    """The fit reads these on the root row only, while the regime fit filters rows by method row by
    row: a non-root row of another method (or none) left its cycle there, and the later rows'
    parent links pointed at other rows, silently."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    values = table[name].to_pylist()
    values[1] = "other"  # row 1: the first cycle's first non-root row
    with pytest.raises(TraceFileError, match=rf"^<table>\[0\]: column {name} differs between the rows of one cycle$"):
        count_tables([with_column(table, name, values)])
    values[1] = None
    with pytest.raises(TraceFileError, match=rf"^<table>\[0\]: column {name} has null values$"):
        count_tables([with_column(table, name, values)])


def test_the_cycle_number_is_one_value_per_cycle():
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    cycle = table["cycle"].to_pylist()
    cycle[1] += 1
    with pytest.raises(TraceFileError, match=r"^<table>\[0\]: column cycle differs between the rows of one cycle$"):
        count_tables([with_column(table, "cycle", cycle)])
    cycle[1] = None  # the repeat check reads it
    with pytest.raises(TraceFileError, match=r"^<table>\[0\]: column cycle has null values$"):
        count_tables([with_column(table, "cycle", cycle)])


def test_a_cycle_that_lost_rows_is_refused_where_budget_is_recorded():
    """A head(n) that cut a cycle after its accepted rows, or a filter that dropped unaccepted leaf
    rows, left valid smaller trees that were fitted in silence; budget (non-root nodes of the
    cycle's tree) says so. Where it is not recorded there is nothing to compare."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    accepted = table["accepted"].to_numpy(zero_copy_only=False)
    cycles = cycle_rows(table)
    c = next(i for i, rows in enumerate(cycles) if not accepted[rows[-1]])  # its last row: not accepted
    cut = table.slice(0, cycles[c][-1])
    number, prompt = c % 5, c // 5  # 5 cycles a prompt
    with pytest.raises(TraceFileError, match=rf"^<table>\[0\]: cycle {number} of \(run_id 'run-0', benchmark "
                                             rf"'synthetic', prompt_id 'run-0/goose/p0000{prompt}', method 'goose'\) "
                                             r"has 6 non-root rows, but column budget says 7$"):
        count_tables([cut])
    dropped = np.concatenate([rows[:-1] if not accepted[rows[-1]] else rows for rows in cycles])
    with pytest.raises(TraceFileError, match=rf"cycle {number} of .*p0000{prompt}.* has 6 non-root rows, but column "
                                             r"budget says 7$"):
        count_tables([table.take(dropped)])
    with pytest.raises(TraceFileError, match="cycle 0 of .* has 7 non-root rows, but column budget says 10$"):
        count_tables([with_column(table, "budget", table["budget"].to_numpy() + 3)])
    whole = count_tables([table.slice(0, cycles[c][0])])
    for unrecorded in (with_column(cut, "budget", [None] * cut.num_rows), cut.drop_columns(["budget"])):
        assert count_tables([unrecorded]).shape_table["n"].sum() == whole.shape_table["n"].sum() + 1


def test_cycles_counted_twice_are_refused(tmp_path):
    """The same cycles twice (a trace concatenated with itself, or beside a re-compressed copy,
    whose footer differs from the original's) narrowed every interval in silence."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    first = r"cycle 0 of \(run_id 'run-0', benchmark 'synthetic', prompt_id 'run-0/goose/p00000', method 'goose'\)"
    doubled = tmp_path / "doubled.parquet"
    pq.write_table(pa.concat_tables([table, table]), doubled)
    for batch_rows in (BATCH_ROWS, 7):  # in one batch, or in other batches of the file
        with pytest.raises(TraceFileError, match=rf"^{doubled}: {first} appears twice in this file: its rows would "
                                                 "count twice$"):
            count_files([doubled], batch_rows=batch_rows)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(table, a)
    pq.write_table(table, b, compression="gzip")
    with pytest.raises(TraceFileError, match=rf"^{b}: {first} is also in {a}: its rows would count twice$"):
        count_files([a, b])
    errors: list[str] = []
    got = count_files([a, b], on_bad=lambda e: errors.append(str(e)))  # the copy skipped, its rows rolled back
    assert len(errors) == 1 and got.files == (str(a),) and got.shape_table.equals(count_files([a]).shape_table)
    # a trace split into files at a cycle boundary (inside a prompt) holds no cycle twice
    cut = int(cycle_rows(table)[2][0])
    pq.write_table(table.slice(0, cut), a)
    pq.write_table(table.slice(cut), b)
    assert count_files([a, b]).shape_table.equals(count_tables([table]).shape_table)
