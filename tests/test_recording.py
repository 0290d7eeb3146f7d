"""record_traces (goose_runtime.recording): the sets' files written together, torch's threads put back."""
from __future__ import annotations

import os

import pytest
import torch

import goose_runtime.recording as recording
from goose_runtime.prompts import PromptError
from goose_runtime.recording import record_traces


def test_record_traces_writes_the_sets_together(tmp_path, tiny):
    """A set that fails after others were recorded leaves none of their files (each was written as
    soon as its set was done)."""
    out = tmp_path / "out"
    with pytest.raises(PromptError, match="nosuch"):
        record_traces(out_dir=str(out), limit=1, max_new_tokens=4, benches=("humaneval", "nosuch"), methods=("ar", "pld"))
    assert not out.exists()
    rows = record_traces(out_dir=str(out), limit=1, max_new_tokens=4, benches=("humaneval", "mtbench"), methods=("ar",))
    assert sorted(os.listdir(out)) == ["humaneval.parquet", "mtbench.parquet"]
    assert all(r["rows"] > 0 and r["MB"] > 0 for r in rows)


def test_record_traces_puts_torchs_thread_count_back(tmp_path, tiny, monkeypatch):
    # process-wide: a leaked 1 once ran every later real-model test of the suite on one thread
    seen = []
    real_run = recording.run_methods
    monkeypatch.setattr(recording, "run_methods", lambda *a, **k: seen.append(torch.get_num_threads()) or real_run(*a, **k))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        record_traces(out_dir=str(tmp_path / "a"), limit=1, max_new_tokens=2, benches=("mtbench",), methods=("ar",),
                      threads=1)
        assert seen == [1] and torch.get_num_threads() == 2
        with pytest.raises(PromptError):  # and when the recording fails
            record_traces(out_dir=str(tmp_path / "b"), limit=1, max_new_tokens=2, benches=("nosuch",), methods=("ar",),
                          threads=1)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
