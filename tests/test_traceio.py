"""The trace reader: check_trace (validate once, keep the footer) against open_trace.

(The writer's round trip through the runtime recorder is tested in test_tracing.py; bad files
through the CLI in test_fit_cli.py.)"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from goose_theory.synthetic import SyntheticSpec, synthetic_table, write_synthetic
from goose_theory.topology import Topology
from goose_theory.traceio import TraceFileError, TraceInfo, check_trace, open_trace, trace_metadata

TREE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("traces") / "good.parquet"
    write_synthetic(path, SyntheticSpec(0.6, 0.2, (TREE,), prompts=3, cycles=5), seed=0)
    return path


def _bad(good, tmp):
    table = pq.read_table(good)
    meta = dict(table.schema.metadata)
    pq.write_table(table.drop_columns(["match"]), tmp / "nomatch.parquet")
    pq.write_table(table.replace_schema_metadata({**meta, b"goose_trace_version": b"2"}), tmp / "v2.parquet")
    # bytes that are not UTF-8 there ended in a UnicodeDecodeError traceback
    pq.write_table(table.replace_schema_metadata({**meta, b"goose_trace_version": b"\xff\xfe"}), tmp / "vbin.parquet")
    pq.write_table(table.slice(0, 0), tmp / "empty.parquet")
    pq.write_table(table.replace_schema_metadata({}), tmp / "plain.parquet")
    (tmp / "notes.parquet").write_text("this is not parquet\n")
    return [tmp / n for n in ("nomatch.parquet", "v2.parquet", "vbin.parquet", "empty.parquet", "plain.parquet", "notes.parquet",
                              "absent.parquet")]


def test_check_trace_keeps_what_open_trace_learns(good):
    info = check_trace(good)
    pf = open_trace(good)
    assert isinstance(info, TraceInfo) and info.path == str(good)
    assert info.num_rows == pf.metadata.num_rows == synthetic_table(
        SyntheticSpec(0.6, 0.2, (TREE,), prompts=3, cycles=5), seed=0).num_rows
    assert info.columns == pf.schema_arrow.names and info.schema == pf.schema_arrow
    assert info.metadata() == trace_metadata(pf) and info.metadata()["synthetic"] is True


def test_trace_info_reads_the_data_with_its_footer(good, monkeypatch):
    info = check_trace(good)
    made = []
    real = pq.ParquetFile

    def counting(*args, **kwargs):
        made.append(kwargs.get("metadata"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", counting)
    with info.open(read_dictionary=["source"]) as pf:
        table = pf.read(columns=["source", "node"])
    assert made == [info.footer]  # no second footer read
    assert table.column("source").type.value_type == "string"  # read as a dictionary
    assert table.equals(pq.read_table(good, columns=["source", "node"], read_dictionary=["source"]))


def test_check_trace_raises_open_traces_one_line_error(good, tmp_path):
    for path in _bad(good, tmp_path):
        with pytest.raises(TraceFileError) as checked:
            check_trace(path)
        with pytest.raises(TraceFileError) as opened:
            open_trace(path)
        assert str(checked.value) == str(opened.value)
        assert str(checked.value).startswith(f"{path}: ") and "\n" not in str(checked.value)


@pytest.mark.parametrize("config, problem", [
    (b"[1, 2]", "not a JSON object but list"),
    (b'"goose@8"', "not a JSON object but str"),
    (b"[" * 50_000, "not JSON (nested too deeply)"),
    (b'{"methods": 5}', "decode must be an object and methods a list"),
    (b'{"decode": {"max_new_tokens": "128"}}', "decode.max_new_tokens is not a positive integer: '128'"),
    (b'{"decode": {"max_new_tokens": -5}}', "decode.max_new_tokens is not a positive integer: -5"),  # validate quoted it
    (b'{"decode": {"max_new_tokens": 0}}', "decode.max_new_tokens is not a positive integer: 0"),
    (b'{"methods": [7]}', "methods[0] is not an object"),
    (b'{"methods": [{"name": "ar", "budget": 0}]}', "methods[0].label is not a string: None"),
    (b'{"methods": [{"label": "goose@8", "budget": true}]}', "methods[0].budget is not an integer: True"),
    (b'{"methods": [{"label": "t", "topology": "tree.json"}]}', "methods[0].topology is not a topology object"),
    (b'{"methods": [{"label": "goose@8", "budget": -5}]}', "methods[0].budget is negative: -5"),  # a numpy warning
    (b'{"methods": [{"label": "x", "budget": -1}]}', "methods[0].budget is negative: -1"),
    (b'{"methods": [{"label": "a"}, {"label": "a"}]}', "methods[1].label 'a' names an earlier method too"),
    (b'{"methods": [{"label": "t", "topology": {"nodes": []}}]}', "methods[0].topology: no 'schema' key"),  # named no file
])
def test_a_config_the_fit_cannot_read_is_one_line_naming_the_file(good, tmp_path, config, problem):
    # the fit's readers index config.methods[i].label / .budget / .topology: a hand-edited
    # config used to escape as an AttributeError or TypeError traceback
    table = pq.read_table(good)
    path = tmp_path / "edited.parquet"
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"config": config}), path)
    with pytest.raises(TraceFileError) as err:
        check_trace(path)
    assert str(err.value).startswith(f"{path}: metadata config: {problem}") and "\n" not in str(err.value)


def test_a_recorded_config_and_none_at_all_pass(good, tmp_path):
    table = pq.read_table(good)
    import json
    recorded = json.dumps({"decode": {"max_new_tokens": 128}, "methods": [
        {"label": "goose@8", "name": "goose", "budget": 8, "topology": None},
        {"label": "t", "name": "topology", "budget": 2, "topology": TREE.to_dict(), "min_score": 0.0}]}).encode()
    for name, config in (("recorded", recorded), ("null", b"null")):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"config": config}), path)
        assert check_trace(path).num_rows == table.num_rows


def test_metadata_keys_that_are_not_utf8_are_read(good, tmp_path):
    # the regime fit reads the metadata: such a key ended as "--regimes: all: 'utf-8' codec can't decode
    # byte 0xff", naming no file
    table = pq.read_table(good)
    path = tmp_path / "key.parquet"
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"\xffnote": b"1"}), path)
    meta = check_trace(path).metadata()
    assert meta["\ufffdnote"] == 1 and meta["synthetic"] is True


def test_a_column_name_twice_is_one_line(good, tmp_path):
    # pyarrow lets a table hold one name twice: schema.field(name) raised a KeyError traceback (in
    # fit-acceptance and the explorer's upload) for a required column and an extra one alike
    table = pq.read_table(good)
    for name in ("node", "score"):
        path = tmp_path / f"{name}-twice.parquet"
        twice = pa.Table.from_arrays([*table.columns, table[name]], names=[*table.column_names, name])
        pq.write_table(twice.replace_schema_metadata(table.schema.metadata), path)
        with pytest.raises(TraceFileError) as err:
            check_trace(path)
        assert str(err.value) == f"{path}: column {name} appears 2 times"


def _string_view(table: pa.Table) -> pa.Table:
    """Every string column as string_view (what pyarrow 26 and polars' newest arrow output write)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type):
            table = table.set_column(i, pa.field(field.name, pa.string_view()), table[i].cast(pa.string_view()))
    return table


def test_string_view_columns_are_strings(good, tmp_path):
    # they were refused: "column run_id is string_view, expected string (or another width of that kind)"
    path = tmp_path / "view.parquet"
    pq.write_table(_string_view(pq.read_table(good)), path)
    info = check_trace(path)
    assert info.schema.field("run_id").type == pa.string_view() and info.metadata()["synthetic"] is True


def test_a_file_name_that_is_not_utf8_is_one_line(good, tmp_path):
    # bad-input sweep, 6 Dec: pyarrow raised UnicodeEncodeError (a traceback) on a listed name with byte 0xff,
    # so one such file in a folder stopped fit-acceptance, --skip-bad included
    import os
    import shutil
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/tr\xffx.parquet")
    shutil.copy(good, name)
    with pytest.raises(TraceFileError, match=r"tr\ufffdx\.parquet: the file's name is not UTF-8 text") as err:
        check_trace(name)
    assert "\n" not in str(err.value)


def test_a_required_column_of_null_type_is_refused(good, tmp_path):
    # only the extra columns may be of null type (a recorder left them empty); a null `match` has no value to fit
    table = pq.read_table(good)
    i = table.schema.get_field_index("match")
    path = tmp_path / "nullmatch.parquet"
    pq.write_table(table.set_column(i, pa.field("match", pa.null()), pa.nulls(table.num_rows)), path)
    with pytest.raises(TraceFileError, match=r"column match is null, expected bool"):
        check_trace(path)
