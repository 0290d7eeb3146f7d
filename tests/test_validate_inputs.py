"""validate's and loop's checks before the model loads (the CLI tests drive them end to end)."""
from __future__ import annotations

import os

from goose_runtime.validate_inputs import picked_up_by, validation_trace


def test_validation_trace_is_named_by_the_set(tmp_path):
    assert validation_trace(str(tmp_path), "stdlib") == str(tmp_path / "validation-stdlib.parquet")


def test_picked_up_by_follows_the_traces_rules(tmp_path):
    (tmp_path / "t").mkdir()
    trace = str(tmp_path / "t" / "validation-x.parquet")
    assert picked_up_by(str(tmp_path / "t"), trace) and picked_up_by(str(tmp_path / "t" / "*.parquet"), trace)
    assert picked_up_by(str(tmp_path / "t" / "validation-*.parquet"), trace)
    assert not picked_up_by(str(tmp_path / "t" / "stdlib*.parquet"), trace)
    assert not picked_up_by(str(tmp_path / "*.parquet"), trace) and not picked_up_by(str(tmp_path), trace)
    assert not picked_up_by(str(tmp_path / "t" / "a.parquet"), trace)


def test_picked_up_by_sees_through_symlinked_folders(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "traces")
    glob_spec = str(tmp_path / "traces" / "*.parquet")
    assert picked_up_by(glob_spec, str(tmp_path / "link" / "validation-x.parquet"))  # the out-dir is a link to it
    assert picked_up_by(str(tmp_path / "link" / "*.parquet"), str(tmp_path / "traces" / "validation-x.parquet"))
    assert not picked_up_by(glob_spec, str(tmp_path / "validation-x.parquet"))


def test_picked_up_by_agrees_with_recursive_glob(tmp_path):
    # goose loop reads --traces with glob(recursive=True); its out-dir check must take the same files
    import glob
    files = [tmp_path / p for p in ("v.parquet", "a/v.parquet", "a/b/v.parquet", "a/b/w.txt", "c/x1.parquet")]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
    for pattern in ("**/*.parquet", "a/**/*.parquet", "a/**", "**/b/*", "*/x?.parquet", "a/*/v.parquet", "[ac]/**/v*"):
        spec = str(tmp_path / pattern)
        taken = {p for p in glob.glob(spec, recursive=True) if os.path.isfile(p)}
        assert {str(f) for f in files if picked_up_by(spec, str(f))} == taken, pattern
