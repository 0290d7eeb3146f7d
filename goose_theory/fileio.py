"""Atomic file output and validated JSON input: the one implementation every writer and loader
of the project shares.

Every file the toolkit writes goes to a temp file beside its target first and is renamed over it
only when complete, so a crash or a bad input never leaves a half-written file.

Example:
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "x.txt")
    >>> with atomic_output(target, ".txt") as tmp:
    ...     with open(tmp, "w") as fh:
    ...         _ = fh.write("done")
    >>> with open(target) as fh:
    ...     fh.read()
    'done'
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")


@contextmanager
def atomic_output(path: str | os.PathLike, suffix: str) -> Iterator[str]:
    """Yield a temp path beside ``path``; on success it is renamed to ``path`` (mode 0644), on
    any exception it is removed and ``path`` is left as it was."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; written files are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_output(path, os.path.splitext(os.fspath(path))[1] or ".txt") as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


def read_json(path: str | os.PathLike, error: type[Exception]) -> Any:
    """Parse a JSON file; a missing or malformed file raises ``error`` with one line naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: malformed JSON ({exc})") from None


def load_json_file(path: str | os.PathLike, parse: Callable[[Any], T], error: type[Exception]) -> T:
    """Read JSON and ``parse`` it; every failure is one ``error`` line that starts with the path."""
    data = read_json(path, error)
    try:
        return parse(data)
    except error as exc:
        raise error(f"{path}: {exc}") from None
