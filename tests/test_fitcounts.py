"""Counting trace rows for the fit (count_files / count_tables): streaming in batches of any
size, checked files and their footers, bad rows rolled back, ``reached`` derived where absent,
prompts and groups told apart (rows the fit refuses: test_fitcounts_refusals.py)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from goose_theory.fit import fit_counts, fit_traces
from goose_theory import fitcounts
from goose_theory.fitcounts import _Accumulator, count_files, count_tables
from goose_theory.synthetic import SyntheticSpec, synthetic_table, write_synthetic
from goose_theory.traceio import TraceFileError, check_trace
from tests.conftest import DEEP, TREE
from tests.fittraces import cycle_rows, with_column


def test_reached_is_derived_when_absent_or_null():
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=5, cycles=30), seed=6)
    ref = count_tables([table])
    dropped = count_tables([table.drop_columns(["reached"])])
    i = table.schema.get_field_index("reached")
    nulled = count_tables([table.set_column(i, table.schema.field(i), pa.nulls(table.num_rows, pa.bool_()))])
    for other in (dropped, nulled):
        assert np.array_equal(ref.spine_reached, other.spine_reached)
        assert np.array_equal(ref.rank_matched, other.rank_matched)


def test_streaming_batch_boundaries_do_not_change_counts(tmp_path):
    path = tmp_path / "t.parquet"
    write_synthetic(path, SyntheticSpec(0.5, 0.1, (TREE, DEEP), prompts=6, cycles=30), seed=7)
    whole = count_files([path])
    tiny = count_files([path], batch_rows=7)  # cycles straddle every batch
    assert np.array_equal(whole.spine_reached, tiny.spine_reached)
    assert np.array_equal(whole.depth_matched, tiny.depth_matched)
    assert whole.shape_table.equals(tiny.shape_table)
    assert fit_traces([path], n_boot=50).overall.cycles == 180


def test_reached_null_in_some_batches_only_is_derived_row_by_row(tmp_path):
    """A null ``reached`` (not recorded on that row) is derived per row: nulls in one batch and none
    in the next used to give the batches different keys (KeyError 'reached'); a recorded value
    that disagrees is still refused."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=3, cycles=10), seed=6)
    ref = count_tables([table])
    reached = table["reached"].to_pylist()
    path = tmp_path / "t.parquet"
    pq.write_table(with_column(table, "reached", [None, None, *reached[2:]]), path)
    got = count_files([path], batch_rows=7)  # the nulls are in the first batch only
    assert np.array_equal(ref.spine_reached, got.spine_reached) and ref.shape_table.equals(got.shape_table)
    wrong = [None, *reached[1:]]
    wrong[1] = not wrong[1]  # row 1: the root's child, reached
    with pytest.raises(TraceFileError, match="column reached disagrees"):
        count_tables([with_column(table, "reached", wrong)])


def test_unsigned_integer_columns_are_read_as_their_values():
    """An unsigned width is a writer's choice: tau / spine_avail of uint8 / uint16 count as int16
    did (their nulls became -1 in an unsigned type: OverflowError); a value past int64 is refused."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=5), seed=8)
    ref = count_tables([table])
    for name, kind in (("tau", pa.uint8()), ("spine_avail", pa.uint16()), ("rank", pa.uint32()), ("node", pa.uint8())):
        i = table.schema.get_field_index(name)
        got = count_tables([table.set_column(i, pa.field(name, kind), table[name].cast(kind))])
        assert got.shape_table.equals(ref.shape_table) and np.array_equal(got.spine_avail, ref.spine_avail), name
    i = table.schema.get_field_index("tau")
    huge = pa.array([2**63 + 5] * table.num_rows, pa.uint64())
    with pytest.raises(TraceFileError, match=r"column tau has values too large \(found 9223372036854775813\)"):
        count_tables([table.set_column(i, pa.field("tau", pa.uint64()), huge)])


def _footer_reads(monkeypatch) -> list[str]:
    """Records every ParquetFile opened without a parsed footer (one that reads the footer)."""
    reads: list[str] = []
    real = pq.ParquetFile

    def counting(source, *args, **kwargs):
        if kwargs.get("metadata") is None:
            reads.append(str(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", counting)
    return reads


def test_count_files_reads_each_footer_once_and_takes_checked_files(tmp_path, monkeypatch):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_synthetic(a, SyntheticSpec(0.5, 0.1, (TREE,), prompts=3, cycles=10), seed=9)
    write_synthetic(b, SyntheticSpec(0.5, 0.1, (DEEP,), prompts=3, cycles=10, run_id="r2"), seed=10)
    ref = count_files([a, b])
    checked = check_trace(b)
    reads = _footer_reads(monkeypatch)
    got = count_files([a, checked])
    assert reads == [str(a)]  # the path once; the checked file not again
    assert got.files == (str(a), str(b)) and got.shape_table.equals(ref.shape_table)
    assert np.array_equal(got.spine_reached, ref.spine_reached)


def test_bad_rows_in_a_checked_file_are_rolled_back_with_on_bad(tmp_path):
    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    write_synthetic(good, SyntheticSpec(0.5, 0.1, (TREE,), prompts=3, cycles=10), seed=9)
    table = pq.read_table(good)
    pq.write_table(table.take(np.r_[1, 0, 2:table.num_rows]), bad)  # passes the check, fails counting
    errors: list[str] = []
    got = count_files([check_trace(bad), check_trace(good)], on_bad=lambda e: errors.append(str(e)))
    assert len(errors) == 1 and errors[0].startswith(f"{bad}: ")
    ref = count_files([good])
    assert got.files == (str(good),) and got.shape_table.equals(ref.shape_table)
    with pytest.raises(TraceFileError, match="root first|grouped by cycle"):
        count_files([check_trace(bad)])


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "t.parquet"
    write_synthetic(path, SyntheticSpec(0.5, 0.1, (TREE, DEEP), prompts=4, cycles=15, prompt_sd=0.5), seed=12)
    return path, count_files([path])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch_rows=st.integers(min_value=1, max_value=400))
def test_any_batch_size_gives_the_same_counts(small_trace, batch_rows):
    path, ref = small_trace
    got = count_files([path], batch_rows=batch_rows)
    for name in ("spine_reached", "spine_matched", "rank_reached", "rank_matched", "depth_reached", "depth_matched"):
        assert np.array_equal(getattr(ref, name), getattr(got, name)), name
    assert ref.shape_table.equals(got.shape_table)


def test_cluster_keys_too_many_for_one_number_are_counted_alike(small_trace, monkeypatch):
    # a cycle's cluster key is one int64 where the string codes allow it, else a row of codes
    path, ref = small_trace
    monkeypatch.setattr(fitcounts, "_FLAT_KEYS", 1)
    got = count_files([path], group_by=["method"])
    assert got.shape_table.equals(ref.shape_table) and np.array_equal(got.cluster_prompt, ref.cluster_prompt)
    assert np.array_equal(got.rank_matched, ref.rank_matched)


def test_legacy_prompt_traces_count_one_unit_per_run():
    # `goose decode --prompt` traces written before their ids named the text all say prompt_id
    # "prompt": each run is then its own prompt, not one prompt for every text ever decoded
    tables = []
    for i in range(3):
        t = synthetic_table(SyntheticSpec(0.6, 0.2, (TREE,), prompts=1, cycles=20, run_id=f"r{i}", benchmark="prompt"),
                            seed=i)
        ids = pa.array(["prompt"] * t.num_rows).dictionary_encode()
        tables.append(t.set_column(t.schema.get_field_index("prompt_id"), "prompt_id", ids))
    assert fit_counts(count_tables(tables), n_boot=20).overall.prompts == 3
    # the rule is that pair only: a set of another name whose prompt is called "prompt" is one prompt
    other = [t.set_column(t.schema.get_field_index("benchmark"), "benchmark",
                          pa.array(["mine"] * t.num_rows).dictionary_encode()) for t in tables]
    assert fit_counts(count_tables(other), n_boot=20).overall.prompts == 1
    # while one named prompt decoded in three runs is one prompt
    same = [synthetic_table(SyntheticSpec(0.6, 0.2, (TREE,), prompts=1, cycles=20, run_id=f"r{i}",
                                          prompt_group="one"), seed=i) for i in range(3)]
    assert fit_counts(count_tables(same), n_boot=20).overall.prompts == 1


def test_synthetic_prompts_of_other_runs_are_other_prompts():
    # each spec draws its own random effects: two runs of 20 prompts are 40 prompts to the fit,
    # unless the specs say they re-draw the same ones (prompt_group)
    specs = [SyntheticSpec(0.6, 0.2, (TREE,), prompts=20, cycles=10, run_id=f"r{i}") for i in range(2)]
    assert fit_counts(count_tables([synthetic_table(specs, seed=1)]), n_boot=20).overall.prompts == 40
    shared = [dataclasses.replace(s, prompt_group="g") for s in specs]
    assert fit_counts(count_tables([synthetic_table(shared, seed=1)]), n_boot=20).overall.prompts == 20


def test_a_row_group_per_cycle_is_counted_in_one_batch(tmp_path, monkeypatch):
    """A writer that calls write_table once per cycle makes a row group per cycle; each was a batch
    of its own, and the per-batch costs made 64k rows take 41 s instead of 2 s."""
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE, DEEP), prompts=3, cycles=20), seed=5)
    path = tmp_path / "groups.parquet"
    with pq.ParquetWriter(path, table.schema) as writer:
        for rows in cycle_rows(table):
            writer.write_table(table.slice(int(rows[0]), len(rows)))
    assert pq.ParquetFile(path).num_row_groups == 60
    ref = count_tables([table])
    added: list[int] = []
    real = _Accumulator.add
    monkeypatch.setattr(_Accumulator, "add", lambda acc, a, file: (added.append(len(a["node"])), real(acc, a, file)))
    got = count_files([path])
    assert len(added) == 2 and sum(added) == table.num_rows  # the whole cycles, then the last (carried) one
    assert got.shape_table.equals(ref.shape_table) and np.array_equal(got.spine_reached, ref.spine_reached)
    assert np.array_equal(got.parent_rank_matched, ref.parent_rank_matched)


def test_the_same_cycles_in_another_order_give_the_same_intervals(tmp_path):
    """Clusters, groups and shapes were numbered by first appearance, and the bootstrap draws
    units by position: a file and a copy with its (whole) cycles in another order gave other
    intervals for one seed."""
    specs = [SyntheticSpec(0.5, 0.1, (TREE, DEEP), prompts=6, cycles=10, prompt_sd=0.5, method=m, run_id=f"r-{m}")
             for m in ("goose", "iso")]
    table = synthetic_table(specs, seed=3)
    cycles = cycle_rows(table)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(table, a)
    order = np.random.default_rng(0).permutation(len(cycles))
    pq.write_table(table.take(np.concatenate([cycles[i] for i in order])), b)
    for group_by in ((), ("method",)):
        fa, fb = (fit_traces([f], group_by=group_by, n_boot=100, seed=1) for f in (a, b))
        for ga, gb in zip((fa.overall, *fa.groups), (fb.overall, *fb.groups)):
            assert json.dumps(ga.to_dict()) == json.dumps(gb.to_dict())
        assert fa.counts.groups == fb.counts.groups and fa.counts.shape_table.equals(fb.counts.shape_table)


def test_string_view_columns_count_as_strings(tmp_path):
    # a string_view file (pyarrow 26, polars' newest arrow output) was refused; its strings are read
    # as dictionaries, as those of any other string type
    table = synthetic_table(SyntheticSpec(0.5, 0.1, (TREE, DEEP), prompts=3, cycles=10), seed=5)
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type):
            table = table.set_column(i, pa.field(field.name, pa.string_view()), table[i].cast(pa.string_view()))
    path = tmp_path / "view.parquet"
    pq.write_table(table, path)
    ref, got = count_tables([synthetic_table(SyntheticSpec(0.5, 0.1, (TREE, DEEP), prompts=3, cycles=10), seed=5)]), \
        count_files([path])
    assert got.groups == ref.groups and got.shape_table.equals(ref.shape_table)
    assert np.array_equal(got.spine_reached, ref.spine_reached) and np.array_equal(got.rank_matched, ref.rank_matched)


def test_groups_whose_values_join_to_one_label_keep_apart():
    # ("x-y", "goose") and ("x", "y-goose") both join to "x-y-goose": the second group's topology file
    # replaced the first's and the report gave both recommendations that one file (review, 3 Dec)
    from goose_theory.synthetic import SyntheticSpec, synthetic_table
    from tests.conftest import TREE

    specs = [SyntheticSpec(0.7, 0.1, (TREE,), prompts=3, cycles=10, benchmark="x-y", method="goose", run_id="r1"),
             SyntheticSpec(0.1, 0.3, (TREE,), prompts=3, cycles=10, benchmark="x", method="y-goose", run_id="r2"),
             SyntheticSpec(0.5, 0.2, (TREE,), prompts=3, cycles=10, benchmark="z", method="goose", run_id="r3"),
             SyntheticSpec(0.5, 0.2, (TREE,), prompts=3, cycles=10, benchmark="all", method="goose", run_id="r4")]
    counts = fitcounts.count_tables([synthetic_table(specs[:3], seed=0)], group_by=("benchmark", "method"))
    labels = {counts.groups[g]: counts.group_label(g) for g in range(len(counts.groups))}
    assert labels == {("x-y", "goose"): '["x-y", "goose"]', ("x", "y-goose"): '["x", "y-goose"]',
                      ("z", "goose"): "z-goose"}  # a label no other group shares stays as it was
    # a set named "all" is not the pooled fit "all": its topology-all.json replaced the pooled one (sweep, 6 Dec)
    by_set = fitcounts.count_tables([synthetic_table(specs[2:], seed=0)], group_by=("benchmark",))
    assert sorted(by_set.group_label(g) for g in range(2)) == ['["all"]', "z"]
    fit = fit_counts(counts, n_boot=20, seed=0)
    assert sorted(g.label for g in fit.groups) == sorted(labels.values())
