"""Cycles counted twice: refused with the file they were first seen in, across batches, files and
a rolled-back copy; the sorted runs merge as a binary counter carries."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from goose_theory.seencycles import SeenCycles
from goose_theory.traceio import TraceFileError


def test_seen_cycles_names_the_file_a_repeat_was_first_in():
    seen = SeenCycles()
    seen.begin("a.parquet")
    seen.check(np.array([0, 0, 1]), np.array([0, 1, 0]), lambda i: f"#{i}")
    with pytest.raises(TraceFileError, match="^a.parquet: #2 appears twice in this file: its rows would count twice$"):
        seen.check(np.array([1, 1, 0]), np.array([1, 2, 1]), lambda i: f"#{i}")  # #2 in an earlier batch
    with pytest.raises(TraceFileError, match="^a.parquet: #1 appears twice in this file"):
        seen.check(np.array([5, 5]), np.array([3, 3]), lambda i: f"#{i}")  # twice in one batch
    saved = copy.deepcopy(seen)  # what count_files(on_bad=...) rolls back to
    seen.begin("b.parquet")
    seen.check(np.array([2]), np.array([0]), str)
    with pytest.raises(TraceFileError, match="^b.parquet: 0 is also in a.parquet: its rows would count twice$"):
        seen.check(np.array([0]), np.array([1]), str)
    saved.begin("c.parquet")
    saved.check(np.array([2]), np.array([0]), str)  # b's cycle was rolled back
    # only the low 32 bits of the cycle number count (the schema's int32): 2**32 is 0 again
    with pytest.raises(TraceFileError, match="^c.parquet: 0 appears twice in this file"):
        saved.check(np.array([2, 7]), np.array([2**32, 0]), str)


def test_seen_cycles_merges_its_runs():
    seen = SeenCycles()
    seen.begin("f")
    rng = np.random.default_rng(0)
    keys = rng.permutation(10_000)
    for part in np.array_split(keys, 100):
        seen.check(part // 100, part % 100, str)
    assert len(seen.runs) <= 8 and sum(run.size for run, _ in seen.runs) == 10_000
    with pytest.raises(TraceFileError, match="appears twice"):
        seen.check(np.array([42]), np.array([17]), str)
