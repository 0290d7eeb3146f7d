"""The CPython sets cut from the standard library: ids, the GOOSE_STDLIB_DIR copy, stdlib-wide's
modules and order (read through :func:`goose_runtime.prompts.load_prompts`, as every command does)."""
from __future__ import annotations

import pathlib

from goose_runtime.prompts import load_prompts


def test_stdlib_prompts_are_code_prefixes_with_module_line_ids():
    prompts = load_prompts("stdlib")
    assert len(prompts) >= 10
    assert len({p.id for p in prompts}) == len(prompts)
    for p in prompts:
        module, line = p.id.rsplit(":", 1)
        assert int(line) > 0 and module
        assert p.text.count("\n") > 40  # context lines plus the def


def test_stdlib_dir_override_cuts_from_a_copy_of_the_sources(tmp_path, monkeypatch):
    # a copy of two modules, one of them edited: the prompts come from the copy, not the interpreter
    import sysconfig
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    (tmp_path / "textwrap.py").write_text((root / "textwrap.py").read_text(encoding="utf-8"), encoding="utf-8")
    src = (root / "heapq.py").read_text(encoding="utf-8")
    (tmp_path / "heapq.py").write_text("# an extra first line\n" + src, encoding="utf-8")
    monkeypatch.setenv("GOOSE_STDLIB_DIR", str(tmp_path))
    copied = {p.id.split(":")[0]: p for p in load_prompts("stdlib")}
    monkeypatch.delenv("GOOSE_STDLIB_DIR")
    original = {p.id.split(":")[0]: p for p in load_prompts("stdlib")}
    assert set(copied) == {"heapq", "textwrap"}
    assert copied["textwrap"] == original["textwrap"]
    module, line = original["heapq"].id.split(":")
    assert copied["heapq"].id == f"heapq:{int(line) + 1}"  # shifted by the added line


def _qualifying_module(name: str) -> str:
    """Source with one function that the stdlib cut takes: past the first third, 40 lines of context
    before it, 9 body lines after its first statement (the def lands on line 61)."""
    body = "".join(f"    x{i} = {i}\n" for i in range(9))
    return "".join(f"A{i} = {i}\n" for i in range(60)) + f"def {name}():\n    '''doc'''\n" + body


def test_stdlib_wide_cuts_every_other_module_in_a_fixed_shuffle(tmp_path, monkeypatch):
    import hashlib
    for rel in ("alpha.py", "beta.py", "pkg/gamma.py", "pkg/delta.py", "heapq.py", "test/test_x.py",
                "pkg/tests/t.py", "idlelib/idle_test/t.py", "site-packages/foo.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_qualifying_module(path.stem), encoding="utf-8")
    (tmp_path / "py2.py").write_text("print 'old syntax'\n", encoding="utf-8")  # skipped, not fatal
    (tmp_path / "short.py").write_text("X = 1\n", encoding="utf-8")  # no qualifying function
    monkeypatch.setenv("GOOSE_STDLIB_DIR", str(tmp_path))
    wide = load_prompts("stdlib-wide")
    # heapq belongs to the stdlib set; test suites and site-packages are not library code
    expected = sorted(["alpha", "beta", "pkg/gamma", "pkg/delta"],
                      key=lambda rel: hashlib.sha256(rel.encode()).hexdigest())
    assert [p.id for p in wide] == [rel.replace("/", ".") + ":61" for rel in expected]
    assert all(p.benchmark == "stdlib-wide" for p in wide)
    assert [p.id for p in load_prompts("stdlib")] == ["heapq:61"]
