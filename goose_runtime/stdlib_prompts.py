"""The CPython code-continuation sets, cut from this interpreter's standard library (or the copy
named by ``GOOSE_STDLIB_DIR``): ``stdlib``, one prompt per module of :data:`STDLIB_MODULES`, and
``stdlib-wide``, every other module in a fixed shuffle. The cut is described in
:mod:`goose_runtime.prompts`, which loads these sets by name; :mod:`goose_runtime.store` builds its
default corpus from :func:`stdlib_wide_modules`.

Example:
    >>> _cut("x = 1\\n" * 50 + "def f(a):\\n    b = a\\n" + "    b += 1\\n" * 8)[0]
    51
"""
from __future__ import annotations

import ast
import hashlib
import os
import sysconfig
from pathlib import Path

from .prompts import Prompt, PromptError

STDLIB_MODULES = (
    "argparse", "ast", "calendar", "configparser", "csv", "dataclasses", "difflib", "enum",
    "fractions", "ftplib", "functools", "gettext", "heapq", "inspect", "ipaddress", "json/decoder",
    "logging/__init__", "mailbox", "pprint", "shutil", "statistics", "string", "tarfile", "textwrap",
    "tokenize", "typing", "urllib/parse", "uuid",
)
STDLIB_WIDE_SKIP = frozenset({"site-packages", "test", "tests", "idle_test"})
STDLIB_CONTEXT_LINES = 40
STDLIB_MIN_REST = 8


def stdlib_root() -> Path:
    """The folder the sets are cut from: ``GOOSE_STDLIB_DIR`` if set, else this interpreter's stdlib."""
    return Path(os.environ.get("GOOSE_STDLIB_DIR") or sysconfig.get_paths()["stdlib"])


def stdlib_prompts() -> list[Prompt]:
    """``stdlib``: one prompt per module of :data:`STDLIB_MODULES` that has a qualifying function."""
    return _cuts(stdlib_root(), STDLIB_MODULES, benchmark="stdlib")


def stdlib_wide_modules(root: Path | None = None) -> list[str]:
    """Every module of the stdlib folder (``root``, default :func:`stdlib_root`) outside the
    folders of :data:`STDLIB_WIDE_SKIP`, minus :data:`STDLIB_MODULES`, as paths relative to it without
    ``.py``, sorted: the sources of ``stdlib-wide`` and of the retrieval store's default corpus
    (:mod:`goose_runtime.store`). Skipped folders are pruned, not walked (``site-packages`` is large:
    a walk through it took 0.3 s of the 0.33)."""
    root = stdlib_root() if root is None else root
    named, modules = set(STDLIB_MODULES), []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in STDLIB_WIDE_SKIP]
        here = Path(folder).relative_to(root)
        modules += [rel for rel in ((here / f[:-3]).as_posix() for f in files if f.endswith(".py"))
                    if rel not in named]
    return sorted(modules)


def stdlib_wide_prompts() -> list[Prompt]:
    """``stdlib-wide``: the same cut from every other module, in the SHA-256 order of their paths."""
    root = stdlib_root()
    modules = sorted(stdlib_wide_modules(root), key=lambda rel: hashlib.sha256(rel.encode()).hexdigest())
    return _cuts(root, modules, benchmark="stdlib-wide")


def _cuts(root: Path, modules, *, benchmark: str) -> list[Prompt]:
    """One prompt per module that has a qualifying function, in the order given."""
    prompts = []
    for module in modules:
        path = root / f"{module}.py"
        if not path.is_file():
            continue  # module absent in this Python version: documented, deterministic per version
        try:
            cut = _cut(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # e.g. a lib2to3 fixture in Python 2 syntax: not this Python's source
        if cut is not None:
            line, text = cut
            prompts.append(Prompt(id=f"{module.replace('/', '.')}:{line}", text=text, benchmark=benchmark))
    if not prompts:
        raise PromptError(f"{root}: no standard-library sources found for the {benchmark} prompt set")
    return prompts


def _cut(source: str) -> tuple[int, str] | None:
    """(1-based line of the def, prompt text) of the first qualifying function, or None."""
    lines = source.splitlines(keepends=True)
    start_after = max(STDLIB_CONTEXT_LINES, len(lines) // 3)
    defs = sorted((n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                  key=lambda n: n.lineno)
    for node in defs:
        first = node.body[0]
        if node.lineno > start_after and node.end_lineno - first.end_lineno >= STDLIB_MIN_REST:
            return node.lineno, "".join(lines[node.lineno - 1 - STDLIB_CONTEXT_LINES:first.end_lineno])
    return None
