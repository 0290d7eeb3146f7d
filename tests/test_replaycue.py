"""The replay's text cue: the bigram flag, per-child outcomes read from a trace, multipliers with
shrinkage, and (on the shipped traces) the effect it exists for."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from goose_runtime.records import CycleRecord, PromptResult
from goose_runtime.replaycue import bigram_seen, child_outcomes, cue_multipliers, slot_kind
from goose_runtime.tracing import write_run_trace
from goose_theory.traceio import open_trace

NAN = float("nan")


def test_bigram_seen_against_a_direct_scan():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 6, 300).tolist()
    want = [i > 0 and any(tokens[j - 1] == tokens[i - 1] and tokens[j] == tokens[i] for j in range(1, i))
            for i in range(len(tokens))]
    assert bigram_seen(tokens).tolist() == want


def test_slot_kinds():
    assert slot_kind(True, False, True, False) == "chain"
    assert [slot_kind(False, True, u, False) for u in (True, False)] == ["root_u", "root_m"]
    assert [slot_kind(False, False, False, s) for s in (True, False)] == ["spine_m", "end"]


def _cycle(parent, source, rank, match, accepted, tau, avail):
    n = len(parent)
    return CycleRecord(parent=parent, source=source, rank=rank, token=list(range(50, 50 + n)), match=match,
                       accepted=accepted, score=[NAN] * n, spine_pos=[0] * n, tau=tau, verify_s=0.0, draft_s=0.0,
                       ngram=3, consensus=1, ema=NAN, bypass=False, spine_avail=avail, confident=0)


def test_child_outcomes_read_kind_cue_position_and_hit(tmp_path):
    # cycle 0 (unmatched): root -> transitions r0 (hit, accepted), r1; r0 -> chain child (miss); emits 2
    # cycle 1 (matched): root -> spine (miss) + transition r0 (miss); emits 1
    c0 = _cycle([-1, 0, 0, 1], ["root", "transition", "transition", "transition"], [0, 0, 1, 0],
                [True, True, False, False], [True, True, False, False], 2, 0)
    c1 = _cycle([-1, 0, 0], ["root", "spine", "transition"], [0, 0, 0], [True, False, False],
                [True, False, False], 1, 4)
    write_run_trace(tmp_path / "t.parquet", [PromptResult("topology:x", "p", "b", 3, [1, 2, 3], "", cycles=[c0, c1])],
                    run_id="r", model="m", device="cpu", dtype="float32", config={})
    frame = open_trace(tmp_path / "t.parquet").read().to_pandas()
    # prompt of 3 tokens: positions 3, 4 are cycle 0's, 5 is cycle 1's; flag only position 4 and 5
    cue = np.array([False, False, False, False, True, True])
    got = child_outcomes(frame, {("b", "p"): (cue, 3)})
    assert got.to_dict("list") == {"kind": ["root_u", "root_u", "chain", "root_m"], "cue": [False, False, True, True],
                                   "rank": [0, 1, 0, 0], "hit": [True, False, False, False]}
    # reached not recorded on some rows (null): derived from the parent's accepted, not "not reached"
    blank = frame.assign(reached=frame["reached"].astype(object).where(frame.index % 2 == 0, None))
    assert child_outcomes(blank, {("b", "p"): (cue, 3)}).equals(got)


def test_multipliers_shrink_toward_the_pooled_rate():
    d = pd.DataFrame({"kind": "root_u", "rank": 0, "cue": [True] * 10 + [False] * 10, "hit": [1] * 9 + [0] + [1] + [0] * 9})
    raw, shrunk = cue_multipliers(d, prior_n=0)["root_u"], cue_multipliers(d, prior_n=10)["root_u"]
    assert raw[True][0] == pytest.approx(0.9 / 0.5) and raw[False][0] == pytest.approx(0.1 / 0.5)
    assert 1 < shrunk[True][0] < raw[True][0] and raw[False][0] < shrunk[False][0] < 1
    assert cue_multipliers(d)["chain"] == {False: (1.0, 1.0, 1.0), True: (1.0, 1.0, 1.0)}  # never seen


@pytest.mark.slow  # the real model's tokenizer encodes the shipped stdlib prompts
def test_on_the_shipped_traces_a_seen_bigram_makes_the_top_transition_far_likelier():
    from goose_runtime.config import DecodeConfig  # noqa: F401  (the runtime's import order)
    from goose_runtime.model import load_model
    from goose_runtime.replayfit import fitted_cue, replay_items
    files = ["traces/stdlib-b8.parquet"]
    m = fitted_cue(files, replay_items(load_model("default"), files, "stdlib"))
    for kind in ("root_u", "chain"):
        assert m[kind][True][0] > 1.1 and m[kind][False][0] < 0.9
