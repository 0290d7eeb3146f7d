"""Every cycle a fit has counted so far, to refuse one counted twice.

A trace concatenated with itself, or fitted beside a re-compressed copy of itself (whose footer
differs, so a file hash would not tell), would double its prompts' weight in the fit.
:class:`SeenCycles` keeps one 64-bit key per counted cycle in sorted runs, merged as a binary
counter carries, and names the file where a repeated cycle was seen first.

Example:
    >>> seen = SeenCycles()
    >>> seen.begin("a.parquet")
    >>> seen.check(np.array([0, 0]), np.array([0, 1]), str)   # two cycles of one decode
    >>> try:
    ...     seen.check(np.array([0]), np.array([1]), lambda i: "cycle 1")
    ... except TraceFileError as exc:
    ...     print(exc)
    a.parquet: cycle 1 appears twice in this file: its rows would count twice
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .traceio import TraceFileError


class SeenCycles:
    """Every cycle counted so far, to refuse one counted twice (a trace concatenated with itself,
    or fitted beside a re-compressed copy, whose footer differs): the per-cycle keys (an id of
    (run_id, benchmark, prompt_id, method) << 32 | the cycle number's low 32 bits: exact for the
    schema's int32 ``cycle``) in sorted runs, with the number of the file each came from. Runs
    are merged as a binary counter carries, so n cycles cost O(n log n) time and 12 bytes each
    (36 MB at 3 million cycles)."""

    def __init__(self) -> None:
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted keys, file numbers), never changed in place
        self.files: list[str] = []  # the files begun, by number

    def __deepcopy__(self, memo: dict) -> "SeenCycles":
        copy = SeenCycles()  # the rollback copy of count_files(on_bad=...): the runs are immutable
        copy.runs, copy.files = list(self.runs), list(self.files)
        return copy

    def begin(self, file: str) -> None:
        """The next keys come from ``file``."""
        self.files.append(file)

    def check(self, key: np.ndarray, cycle: np.ndarray, describe: Callable[[int], str]) -> None:
        """Adds the cycles of a batch of the current file (``key``: the id of each one's run_id,
        benchmark, prompt_id and method; ``describe(i)``: the i-th, for the line); one seen
        before is refused, naming the file it was seen in first."""
        low = (cycle.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
        repeat = self._add((key.astype(np.uint64) << np.uint64(32)) | low)
        if repeat is not None:
            i, first = repeat
            where = "appears twice in this file" if first == len(self.files) - 1 else f"is also in {self.files[first]}"
            raise TraceFileError(f"{self.files[-1]}: {describe(i)} {where}: its rows would count twice")

    def _add(self, keys: np.ndarray) -> tuple[int, int] | None:
        """A key seen before: (its index in ``keys``, the number of the file it was first seen in),
        and nothing is added; else None."""
        if not keys.size:
            return None
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        if twice.size:
            return int(order[twice[0] + 1]), len(self.files) - 1
        for run, files in self.runs:
            at = np.minimum(np.searchsorted(run, ordered), run.size - 1)
            hit = np.flatnonzero(run[at] == ordered)
            if hit.size:
                return int(order[hit[0]]), int(files[at[hit[0]]])
        self.runs.append((ordered, np.full(ordered.size, len(self.files) - 1, np.int32)))
        while len(self.runs) > 1 and self.runs[-2][0].size <= 2 * self.runs[-1][0].size:
            (b, fb), (a, fa) = self.runs.pop(), self.runs.pop()
            merged = np.concatenate([a, b])
            o = np.argsort(merged, kind="stable")  # two sorted runs: a merge
            self.runs.append((merged[o], np.concatenate([fa, fb])[o]))
        return None
