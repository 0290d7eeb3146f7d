"""Shared CLI plumbing: one-line errors with exit code 2, JSON output, list parsing, text tables.

Every command is ``main(argv) -> int``. Bad input raises :class:`UsageError` (or one of the
library's validation errors); :func:`run_command` turns it into ``error: <one line>`` on
stderr and exit code 2, never a traceback, and nothing is written.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from typing import Any, Callable

import numpy as np

from .errors import InputError


EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


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


def count(text: str) -> int:
    """An argparse type for a count that may be written as a float: ``1e6`` is 1000000 (``int`` refused
    it while the error for a count out of range printed ``1e+11``); 2.5 and nan are refused.

    Example:
        >>> count("1e6"), count("250"), count("1_000")
        (1000000, 250, 1000)
    """
    try:
        return int(text)
    except ValueError:
        value = float(text) if re.fullmatch(r"\s*[0-9.]+[eE][+]?[0-9]+\s*", text) else math.nan
        if not value.is_integer():
            raise argparse.ArgumentTypeError(f"invalid count {text!r} (a whole number: 250, 1e6)") from None
        return int(value)


def check_output_file(path: str | None, flag: str) -> None:
    """Refuse an output file path that could not be written, before any work (None: not asked for)."""
    from .fileio import output_file_problem
    _refuse(path, flag, output_file_problem)


FILE_SUFFIXES = (".json", ".md", ".html", ".parquet", ".csv", ".txt")  # what no output folder is called


def check_output_dir(path: str | None, flag: str) -> None:
    """Refuse an output folder that could not be made or written, before any work; and one that
    does not exist yet but is named like a file (``--out fit.json``), which would have become a
    folder of that name holding the files. An existing folder of any name is the user's choice."""
    from .fileio import output_dir_problem

    _refuse(path, flag, output_dir_problem)
    if path and not os.path.exists(path) and path.lower().endswith(FILE_SUFFIXES):
        raise UsageError(f"{flag}: {path} is named like a file, but {flag} is a folder (the command writes "
                         f"several files into it); give a folder name")


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
    if path == "-":  # the Unix spelling of standard output, which would have become a file named '-'
        raise UsageError(f"{flag}: '-' (standard output) is not written to here; give a file or folder name")
    problem = None if path is None else problem_of(path)
    if problem:
        raise UsageError(f"{flag}: {path if path.strip() else repr(path)} {problem}")


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line with exit code 2 (argparse's own convention)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # a value that starts '-digit' is a value, lists too (--sizes -1,2 was "expected one argument",
        # so the option's own check never said what was wrong): Python 3.13's rule, on 3.11
        self._negative_number_matcher = re.compile(r"-\.?\d")

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
    except KeyboardInterrupt:  # Ctrl-C: atomic writers leave nothing half written, so no traceback to read
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
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
    """A plain aligned text table. Numbers sit right-aligned under right-aligned headers, each float
    column with one number of decimals (enough for every value's 4 significant digits, at least 1 and at
    most :data:`MAX_DECIMALS`; in scientific notation where a value needs it), so decimal points line up;
    text sits left-aligned. A NaN shows as ``nan``, never as a blank or a number.

    Example:
        >>> print(format_table([{"rule": "optimal", "budget": 16, "tau": 2.897},
        ...                     {"rule": "spine-only", "budget": 16, "tau": 2.5}]))
        rule        budget    tau
        ----------  ------  -----
        optimal         16  2.897
        spine-only      16  2.500
    """
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])
    cols = [_format_column([r.get(c, "") for r in rows]) for c in columns]
    widths = [max(len(c), *(len(v) for v in cells)) for c, (cells, _) in zip(columns, cols)]
    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if right else v.ljust(w)
                         for v, w, (_, right) in zip(values, widths, cols)).rstrip()
    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line([cells[i] for cells, _ in cols]) for i in range(len(rows))]
    return "\n".join(out)


MAX_DECIMALS = 6
# a cell that reads as a number, a unit or an interval after it allowed: "1.40x", "-2.3%", "+-64%", "1.76 [1.6, 1.9]";
# not a list ("8,2,0") or a name ("iso:3")
_NUMBER_TEXT = re.compile(r"(\+-|[-+])?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(x|%| ?ms| ?s)?( |$)")
_NEUTRAL = {"", "nan", "n/a", "inf", "-inf"}  # cells that say nothing about a column's kind


def _format_column(values: list[Any]) -> tuple[list[str], bool]:
    """(cells, right-aligned?) of one column: see :func:`format_table`."""
    floats = [float(v) for v in values if _is_float(v) and math.isfinite(v)]
    decimals = None
    if floats:
        shown = [f"{v:.4g}" for v in floats]
        if not any("e" in s for s in shown):
            decimals = min(MAX_DECIMALS, max(1, *(len(s.partition(".")[2]) for s in shown)))
    def fmt(v: Any) -> str:
        if v is None:  # no value (speedup_vs_ar without a measured size 1): not Python's "None"
            return "n/a"
        if _is_float(v) or (decimals is not None and _is_int(v)):
            if not math.isfinite(v):
                return str(float(v))
            return f"{v:.{decimals}f}" if decimals is not None else f"{v:.4g}"
        return str(v)
    cells = [fmt(v) for v in values]
    decided = [c for c in cells if c not in _NEUTRAL]
    # a column of missing numbers only (nan, n/a) sits on the numbers' side, as one such cell does
    right = all(_NUMBER_TEXT.match(c) for c in decided) if decided else any(c.strip() for c in cells)
    return cells, right


def _is_float(v: Any) -> bool:
    return isinstance(v, (float, np.floating))


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def load_latency_option(path: str | os.PathLike, flag: str = "--latency") -> Any:
    """Load the latency profile a flag names; a bad one is a UsageError naming the flag, so every
    command says ``error: --latency: FILE: no such file`` alike."""
    from .latency import LatencyError, load_latency

    try:
        return load_latency(path)
    except LatencyError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def latency_table_lines(table: list[dict], *, chosen: int) -> list[str]:
    """A cost-aware scan's rows at budgets 0-4, then about 1.5x apart, the ``chosen`` one (marked)
    and the last: one row per budget made a table of 65 lines at --budget 64. --json has every row."""
    shown = [dict(row, chosen="*" if row["budget"] == chosen else "") for row in table
             if row["budget"] == chosen or row is table[-1] or row["budget"] in LATENCY_GRID]
    lines = [format_table(shown)]
    if any(row["nodes"] != row["budget"] for row in table):
        lines.append("nodes: what the rule's tree at that budget holds; each row is priced at its nodes")
    if len(shown) < len(table):
        lines.append(f"({len(shown)} of the {len(table)} priced budgets shown; --json lists every one)")
    return lines


def unpriced_note(most: int, budget: int) -> str:
    """The end of a note on the budgets a latency profile of trees up to ``most`` tokens cannot
    price, up to ``budget`` (no extrapolation: budgets ``most``.. need more tokens than it measured).

    Example:
        >>> unpriced_note(64, 200), unpriced_note(1, 1)
        ('measures trees of at most 64 tokens, so budgets 64..200 were not priced', 'measures trees of at most 1 token, so budget 1 was not priced')
    """
    which = f"budget {budget} was" if most == budget else f"budgets {most}..{budget} were"
    return f"measures trees of at most {most} token{'s' * (most != 1)}, so {which} not priced"


LATENCY_GRID = frozenset((0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
                          2048, 3072, 4096, 6144, 8192))


def regime_note(topology: Any, path: str, verb: str) -> None:
    """A two-regime export (its top-level tree the matched one; --regimes' single tree runs in both regimes)
    carries the matched regime's rates but predicts a blend: a one-model score reads high."""
    if topology.meta.get("regimes") or topology.meta.get("regime_fit"):
        tree = "top-level (matched) tree" if topology.meta.get("regimes") else "one tree (run in both regimes)"
        tau = topology.meta.get("predicted_tau")  # the number: the one-model headline reads up to twice as high
        print(f"note: {path} is a two-regime export; this {verb} its {tree} under the given rates alone; its two-regime "
              f"prediction is {'the predicted_tau in its metadata' if tau is None else f'{tau:.3f}'}", file=sys.stderr)


def file_scored(path: str, score: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``score(*args, **kwargs)`` on a topology file's tree; a tree the acceptance cannot score (the
    exclusive model's children summing past 1) is one line naming the file (yield, simulate, compare)."""
    from .yields import ExclusiveModelError  # the numba kernels: only where a tree is scored
    try:
        return score(*args, **kwargs)
    except ExclusiveModelError as exc:
        raise UsageError(f"--topology {path}: {exc}") from None
