"""CycleRecord / PromptResult: node counts, mean tau and throughput on hand-made records,
including the empty cases (no cycles, no decode time) where both averages are undefined."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from goose_runtime.records import CycleRecord, PromptResult


def _cycle(parents: list[int], tau: int) -> CycleRecord:
    """A cycle over the tree ``parents`` (node 0 the root) whose accepted path is the spine prefix."""
    n = len(parents)
    source = ["root"] + ["spine"] * (n - 1)
    return CycleRecord(parent=parents, source=source, rank=[0] * n, token=list(range(100, 100 + n)),
                       match=[True] * n, accepted=[i < tau for i in range(n)], score=[math.nan] * n,
                       spine_pos=list(range(n)), tau=tau, verify_s=0.01, draft_s=0.002)


def _result(cycles: list[CycleRecord], n_tokens: int, decode_s: float, prefill_s: float = 0.0) -> PromptResult:
    return PromptResult(method="goose", prompt_id="p0", benchmark="b", prompt_tokens=7,
                        token_ids=list(range(n_tokens)), text="x" * n_tokens, cycles=cycles,
                        prefill_s=prefill_s, decode_s=decode_s)


def test_n_nodes_counts_the_root_and_every_drafted_node():
    assert _cycle([-1], 1).n_nodes == 1  # the root alone: an autoregressive step
    assert _cycle([-1, 0, 1, 0, 3], 2).n_nodes == 5
    wide = CycleRecord(parent=[-1, 0, 0, 0], source=["root", "transition", "transition", "transition"],
                       rank=[0, 0, 1, 2], token=[5, 6, 7, 8], match=[True, False, True, False],
                       accepted=[True, False, True, False], score=[math.nan, 0.5, 0.3, 0.1],
                       spine_pos=[0, 0, 0, 0], tau=2, verify_s=0.0, draft_s=0.0)
    assert wide.n_nodes == 4


def test_optional_cycle_fields_default_to_not_recorded():
    c = _cycle([-1, 0], 1)
    assert c.ngram == 0 and c.consensus == 0 and not c.bypass and c.spine_avail == -1 and math.isnan(c.ema)


def test_mean_tau_averages_over_cycles():
    # three verification calls producing 1, 3 and 5 tokens: 9 tokens in 3 calls
    r = _result([_cycle([-1], 1), _cycle([-1, 0, 1], 3), _cycle([-1, 0, 1, 2, 3], 5)], n_tokens=9, decode_s=1.0)
    assert r.mean_tau == pytest.approx(3.0)
    one = _result([_cycle([-1, 0, 1], 2)], n_tokens=2, decode_s=1.0)
    assert one.mean_tau == 2.0


@settings(max_examples=100)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=40))
def test_mean_tau_is_total_tokens_over_calls(taus):
    r = _result([_cycle([-1], t) for t in taus], n_tokens=sum(taus), decode_s=1.0)
    assert r.mean_tau == pytest.approx(sum(taus) / len(taus))
    assert min(taus) <= r.mean_tau <= max(taus)


def test_no_cycles_gives_nan_mean_tau_not_an_error():
    r = _result([], n_tokens=0, decode_s=0.0)
    assert math.isnan(r.mean_tau)


def test_tokens_per_s_uses_decode_time_only():
    r = _result([_cycle([-1, 0], 2)] * 3, n_tokens=6, decode_s=2.0, prefill_s=5.0)
    assert r.tokens_per_s == pytest.approx(3.0)  # 6 tokens / 2 s; the 5 s prefill is not counted
    assert _result([], n_tokens=10, decode_s=0.5).tokens_per_s == pytest.approx(20.0)


@pytest.mark.parametrize("decode_s", [0.0, -1.0])
def test_no_decode_time_gives_nan_rate_not_an_error(decode_s):
    assert math.isnan(_result([_cycle([-1], 1)], n_tokens=4, decode_s=decode_s).tokens_per_s)


def test_each_result_gets_its_own_cycle_list():
    a = PromptResult(method="ar", prompt_id="a", benchmark="b", prompt_tokens=1, token_ids=[], text="")
    b = PromptResult(method="ar", prompt_id="b", benchmark="b", prompt_tokens=1, token_ids=[], text="")
    a.cycles.append(_cycle([-1], 1))
    assert b.cycles == [] and a.mean_tau == 1.0 and math.isnan(b.mean_tau)
    assert a.prefill_s == b.decode_s == 0.0
