"""Shared CLI plumbing: one-line errors with exit code 2, JSON output, list parsing.

Every command is ``main(argv) -> int``. Bad input raises :class:`UsageError` (or one of the
library's validation errors); :func:`run_command` turns it into ``error: <one line>`` on
stderr and exit code 2, never a traceback, and nothing is written.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Callable

import numpy as np

from .errors import InputError


EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe


class UsageError(InputError):
    """Bad command-line input; the message is shown as one line."""


BAD_INPUT_ERRORS: tuple[type[BaseException], ...] = (InputError,)


def split_list(value: str, flag: str) -> list[str]:
    """Comma-separated items, stripped; no items, or an empty one (``a,,b``, ``a,``), is a UsageError.

    Example:
        >>> split_list(" ar, pld", "--compare")
        ['ar', 'pld']
    """
    items = [x.strip() for x in value.split(",")]
    if not value.strip():
        raise UsageError(f"{flag} is empty")
    if not all(items):
        raise UsageError(f"{flag}: empty entry in {value!r}")
    return items


def check_output_file(path: str | None, flag: str) -> None:
    """Refuse an output file path that could not be written, before any work (None: not asked for)."""
    from .fileio import output_file_problem

    _refuse(path, flag, output_file_problem)


def check_output_dir(path: str | None, flag: str) -> None:
    """Refuse an output folder that could not be made or written, before any work."""
    from .fileio import output_dir_problem

    _refuse(path, flag, output_dir_problem)


def check_not_an_input(path: str | None, flag: str, inputs: dict[str, Any]) -> None:
    """Refuse an output file that is also one of the command's inputs (``inputs``: flag -> a path,
    a list of paths or None): the atomic rename would replace it, e.g. ``goose optimize --latency
    lat.json --out lat.json``.

    Example:
        >>> check_not_an_input("t.json", "--out", {"--latency": None, "--topology": ["a.json"]})
        >>> check_not_an_input("a.json", "--out", {"--topology": ["./a.json"]})
        Traceback (most recent call last):
        ...
        goose_theory.cli_util.UsageError: --out a.json is also --topology: writing it would replace that input
    """
    if not path:
        return
    target = os.path.realpath(path)
    for in_flag, given in inputs.items():
        for value in [given] if isinstance(given, str) else list(given or []):
            if value and os.path.realpath(value) == target:
                raise UsageError(f"{flag} {path} is also {in_flag}: writing it would replace that input")


def _refuse(path: str | None, flag: str, problem_of: Callable[[str], str | None]) -> None:
    problem = None if path is None else problem_of(path)
    if problem:
        raise UsageError(f"{flag}: {path or repr('')} {problem}")


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line with exit code 2 (argparse's own convention)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {message}\n")


def make_parser(prog: str, description: str) -> argparse.ArgumentParser:
    return _Parser(prog=prog, description=description)


def run_command(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Call ``handler(args)``; map bad input to a one-line message and exit code 2."""
    try:
        code = handler(args)
        sys.stdout.flush()  # a pipe's buffered output goes out here, where a closed pipe is caught
        return code
    except BAD_INPUT_ERRORS as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (``goose ... | head``): stop quietly, as other CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit-time flush cannot fail
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # a path the checks up front could not foresee (a full disk, /proc): one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def to_jsonable(value: Any) -> Any:
    """numpy scalars/arrays -> Python; NaN/inf -> None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(obj: Any) -> None:
    print(json.dumps(to_jsonable(obj), allow_nan=False))


def format_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A plain aligned text table (floats to 4 significant digits)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])
    def fmt(v: Any) -> str:
        if isinstance(v, (float, np.floating)):
            return f"{v:.4g}"
        return str(v)
    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)
