"""Validated JSON input shared by every loader: one line naming the file for each way it can fail."""
from __future__ import annotations

import json
import os

import pytest

from goose_theory.errors import InputError
from goose_theory.jsonio import json_misfit, load_json_file, loads_json, read_json


def test_read_json_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(InputError, match=r"bad\.json: malformed JSON"):
        read_json(bad, InputError)
    with pytest.raises(InputError, match=r"missing\.json: no such file"):
        read_json(tmp_path / "missing.json", InputError)
    with pytest.raises(InputError, match=r"^'': the file name is empty$"):  # was ": no such file"
        read_json("", InputError)
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2]}')
    assert read_json(good, InputError) == {"a": [1, 2]}


@pytest.mark.parametrize("text, problem", [("[" * 50_000, "nested too deeply"),
                                           ('{"budget": ' + "9" * 5000 + "}", "an integer longer than")])
def test_json_the_parser_refuses_is_malformed_json_not_a_traceback(tmp_path, text, problem):
    # json.loads raises RecursionError / a bare ValueError for these, which no loader caught
    path = tmp_path / "odd.json"
    path.write_text(text)
    with pytest.raises(InputError, match=rf"odd\.json: malformed JSON \({problem}"):
        read_json(path, InputError)


def test_json_input_that_is_not_a_regular_file(tmp_path):
    class Bad(ValueError):
        pass

    with pytest.raises(Bad, match="is a directory, not a JSON file"):
        read_json(tmp_path, Bad)
    with pytest.raises(Bad, match="/dev/zero: is a device, not a JSON file"):  # would be read forever
        read_json("/dev/zero", Bad)
    read_end, write_end = os.pipe()  # a pipe is a fine source (cat tree.json | goose yield --topology /dev/stdin)
    os.write(write_end, b'{"a": 1}')
    os.close(write_end)
    assert read_json(f"/dev/fd/{read_end}", Bad) == {"a": 1}
    os.close(read_end)


def test_load_json_file_prefixes_the_parse_error_with_the_path(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"n": true}')

    def parse(obj):
        misfit = json_misfit(obj, {"n": ((int,), "an integer")})
        if misfit:
            raise InputError(f"{misfit[0]} must be {misfit[1]}, not {misfit[2]!r}")
        return obj["n"]

    with pytest.raises(InputError, match=r"^.*t\.json: n must be an integer, not True$"):
        load_json_file(path, parse, InputError)
    path.write_text('{"n": 4}')
    assert load_json_file(path, parse, InputError) == 4


def test_a_leading_byte_order_mark_is_dropped(tmp_path):
    # Windows editors save UTF-8 with a BOM; json refused it ("Unexpected UTF-8 BOM") in every loader
    path = tmp_path / "bom.json"
    path.write_bytes(b'\xef\xbb\xbf{"n": 1}')
    assert read_json(str(path), InputError) == {"n": 1}


@pytest.mark.parametrize("text, key", [('{"nodes": [], "nodes": [1]}', "nodes"),
                                       ('{"a": [{"source": "spine", "source": "transition"}]}', "source")])
def test_a_key_twice_in_one_object_is_refused(text, key):
    """Python's json keeps the last value of a repeated key silently (a second "nodes" replaced the tree)."""
    with pytest.raises(json.JSONDecodeError, match=f"the key '{key}' appears twice"):
        loads_json(text)
    assert loads_json('{"a": {"k": 1}, "b": {"k": 2}}') == {"a": {"k": 1}, "b": {"k": 2}}  # apart: fine
