"""Atomic output shared by every writer: temp file, then rename; paths checked before the work."""
from __future__ import annotations

import os
import stat

import pytest

from goose_theory.errors import OutputPathError
from goose_theory.fileio import (atomic_output, output_dir_problem, output_file_problem, write_files_together, write_text,
                                 write_text_atomic)


def test_success_renames_with_shared_mode(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    write_text_atomic(target, "hello")
    assert target.read_text() == "hello"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_failure_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(target, ".txt") as tmp:
            with open(tmp, "w") as fh:
                fh.write("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_write_error_names_the_file_it_was_writing(tmp_path):
    # a full disk raised a bare "No space left on device" (no file, no option) from the writer
    def full(tmp):
        raise OSError(28, "No space left on device")
    with pytest.raises(OutputPathError, match=r"out\.txt: cannot be written \(No space left on device\)$"):
        with atomic_output(tmp_path / "out.txt", ".txt") as tmp:
            full(tmp)
    with pytest.raises(OutputPathError, match=r"/b\.txt: cannot be written \(No space left on device\)$"):
        write_files_together({str(tmp_path / "a.txt"): lambda tmp: write_text(tmp, "a"), str(tmp_path / "b.txt"): full,
                              str(tmp_path / "c.txt"): lambda tmp: write_text(tmp, "c")})
    assert list(tmp_path.iterdir()) == []


def test_a_failed_set_removes_the_folders_it_made_and_nothing_else(tmp_path):
    def boom(tmp):
        raise RuntimeError("renderer failed")
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        write_files_together({str(tmp_path / "new" / "deep" / "a.txt"): boom,
                              str(tmp_path / "kept" / "b.txt"): lambda tmp: write_text(tmp, "b")})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["old.txt"]


def test_output_paths_checked_before_writing(tmp_path):
    (tmp_path / "file").write_text("x")
    assert output_file_problem(tmp_path / "new.json") is None and output_dir_problem(tmp_path / "a" / "b") is None
    assert output_file_problem(tmp_path) == "is a directory"
    assert output_file_problem("  ") == output_dir_problem(" \t") == "is blank (white space only)"  # wrote a file "  "
    assert output_file_problem("/dev/null") == "exists and is not a regular file"
    assert "is not a directory" in output_file_problem(tmp_path / "file" / "x.json")
    assert "is not a directory" in output_dir_problem(tmp_path / "file" / "sub")
    with pytest.raises(OutputPathError, match="is a directory"):
        with atomic_output(tmp_path, ".json"):
            pass
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_a_trailing_slash_and_an_over_long_name_are_named_before_the_work(tmp_path):
    # both failed only at the final rename, after the work; a trailing '/' on a file was "a directory"
    (tmp_path / "file.json").write_text("x")
    for name in ("file.json/", "missing.json/"):
        assert output_file_problem(f"{tmp_path}/{name}") == "ends with a '/': that names a folder, not a file"
    assert output_file_problem(tmp_path / ("x" * 300 + ".parquet")) == \
        "cannot be written: a name of 308 bytes, more than the file system's 255"
    assert "a name of 256 bytes" in output_dir_problem(tmp_path / ("y" * 256) / "sub")
    assert output_file_problem(tmp_path / ("z" * 255)) is None  # at the limit is fine


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_where_nothing_can_be_made_is_refused_up_front():
    # os.access says /proc is writable to root: the run failed only at the end, naming its temp file
    assert output_file_problem("/proc/x.json") == "cannot be written: nothing can be created in /proc " \
                                                  "(No such file or directory)" or os.geteuid() != 0
    assert "nothing can be created in /proc" in output_dir_problem("/proc/new/sub") or os.geteuid() != 0
    assert output_file_problem("/proc/x.json") is not None and output_dir_problem("/proc/new") is not None


def test_a_failed_replace_names_the_target_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")

    def immutable(src, dst):  # what os.replace meets over a chattr +i file
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "replace", immutable)
    with pytest.raises(OutputPathError, match=rf"^{target}: cannot be replaced \(Operation not permitted\)$"):
        write_text_atomic(target, "new")
    assert target.read_text() == "old" and not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_a_set_goes_in_place_in_the_order_given(tmp_path, monkeypatch):
    # an ExitStack unwinds in reverse: the report (listed last) went in place first
    import goose_theory.fileio as fileio
    renamed, real = [], os.replace
    monkeypatch.setattr(fileio.os, "replace", lambda src, dst: (renamed.append(os.path.basename(dst)), real(src, dst)))
    write_files_together({str(tmp_path / n): (lambda tmp: write_text(tmp, "x")) for n in ("a.json", "b.html", "report.md")})
    assert renamed == ["a.json", "b.html", "report.md"]


def test_a_failed_chmod_is_named_as_its_own_file(tmp_path, monkeypatch):
    # it escaped to the enclosing contexts, whose files were then named instead
    import goose_theory.fileio as fileio
    real = os.chmod
    def chmod(path, mode):
        if path.endswith(".md"):
            raise PermissionError(1, "Operation not permitted")
        real(path, mode)
    monkeypatch.setattr(fileio.os, "chmod", chmod)
    with pytest.raises(OutputPathError, match=r"report\.md: cannot be replaced \(Operation not permitted\)$"):
        write_files_together({str(tmp_path / n): (lambda tmp: write_text(tmp, "x")) for n in ("a.json", "report.md")})
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # the report, last, never went in place; no temp file
