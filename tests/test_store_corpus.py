"""The retrieval store's corpus (goose_runtime.store_corpus): bad corpora named in one line, the
up-front check, and the default corpus that leaves out the stdlib prompt set."""
from __future__ import annotations

import os

import pytest

import goose_runtime.store_corpus as corpus_mod
from goose_runtime.stdlib_prompts import STDLIB_MODULES, stdlib_root
from goose_runtime.store_corpus import StoreError, check_corpus, corpus_files, default_corpus, read_corpus


def test_bad_corpora_are_named(tmp_path, monkeypatch):
    with pytest.raises(StoreError, match="no such file or folder"):
        corpus_files([str(tmp_path / "nope")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="holds no files"):
        corpus_files([str(tmp_path / "empty")])
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\xff\xfe\x00" * 10)
    with pytest.raises(StoreError, match="no UTF-8 text"):
        read_corpus(corpus_files([str(blob)]))
    big = tmp_path / "big.txt"
    big.write_text("a" * 2000, encoding="utf-8")
    monkeypatch.setattr(corpus_mod, "MAX_CORPUS_BYTES", 1000)
    with pytest.raises(StoreError, match="more than 0 MB of files"):
        corpus_files([str(big)])  # by the sizes on disk, before reading
    with pytest.raises(StoreError, match="empty path"):
        corpus_files([""])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="not a regular file or folder"):
        corpus_files([str(fifo)])
    (tmp_path / "blank.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(StoreError, match="no UTF-8 text"):
        read_corpus([tmp_path / "blank.txt"])


def test_the_up_front_check_refuses_what_read_corpus_does_and_stops_at_the_first_text(tmp_path, monkeypatch):
    blob, blank, text = tmp_path / "a.bin", tmp_path / "b.txt", tmp_path / "c.py"
    blob.write_bytes(b"\xff\xfe\x00" * 10)
    blank.write_text("\n \n", encoding="utf-8")
    text.write_text("x = 1\n", encoding="utf-8")
    for files in ([blob], [blank], [blob, blank], []):
        with pytest.raises(StoreError, match="no UTF-8 text"):
            check_corpus(files)
        with pytest.raises(StoreError, match="no UTF-8 text"):
            read_corpus(files)
    opened = []
    monkeypatch.setattr(corpus_mod, "_text", lambda p: opened.append(p.name) or corpus_mod.pathlib.Path.read_text(p))
    check_corpus([text, blob, blank])
    assert opened == ["c.py"]  # the rest is read only when the store is built


def test_default_corpus_leaves_out_the_stdlib_prompt_set_and_the_tests():
    root = stdlib_root()
    files = default_corpus()
    rel = {p.relative_to(root).with_suffix("").as_posix() for p in files}
    assert len(files) > 300 and "collections/__init__" in rel
    assert not rel & set(STDLIB_MODULES)
    assert not any(part in ("test", "tests", "idle_test", "site-packages") for r in rel for part in r.split("/")[:-1])
