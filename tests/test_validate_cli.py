"""``goose loop`` / ``goose validate`` bad input: one line, exit code 2 (the full loop runs in `make run`)."""
from __future__ import annotations

import pytest

from goose_runtime.cli import main
from tests.conftest import thresholded_trace_copy

pytestmark = pytest.mark.slow  # the loop loads the real default model before it fits


def test_loop_refuses_traces_recorded_with_min_score(capsys, tmp_path):
    for bench in ("humaneval", "mtbench", "stdlib"):
        thresholded_trace_copy(f"traces/{bench}-b8.parquet", tmp_path / f"{bench}.parquet")
    code = main(["loop", "--traces", str(tmp_path / "*.parquet"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: two-regime fit") and "recorded with --min-score" in err[-1]


def test_loop_without_traces(capsys, tmp_path):
    assert main(["loop", "--traces", str(tmp_path / "none-*.parquet"), "--out", str(tmp_path / "out")]) == 2
    assert "no parquet files" in capsys.readouterr().err
