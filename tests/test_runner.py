"""The run-all-methods helper: labels, summaries against ar, prompt length checks."""
from __future__ import annotations

import pytest

from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.prompts import Prompt
from goose_runtime.records import CycleRecord, PromptResult
from goose_runtime.runner import (PromptLengthError, common_prefix, encode_all, method_label, parse_labeled,
                                  summarize)


@pytest.mark.parametrize("spec, budget, label", [
    ("goose", None, "goose"), ("goose", 60, "goose"), ("goose", 16, "goose@16"), ("iso:3", None, "iso:3"),
    ("iso:3", 8, "iso:3@8"), ("tr", None, "tr"), ("ar", None, "ar"), ("pld", None, "pld"), ("pld", 5, "pld@5"),
])
def test_labels_round_trip(spec, budget, label):
    s = parse_method(spec, budget=budget)
    assert method_label(s) == label
    again = parse_labeled(label)
    assert (again.name, again.budget) == (s.name, s.budget)


def _result(method, tokens, taus, seconds):
    cycles = [CycleRecord(parent=[-1], source=["root"], rank=[0], token=[0], match=[True], accepted=[True],
                          score=[float("nan")], spine_pos=[0], tau=t, verify_s=0.01, draft_s=0.001) for t in taus]
    return PromptResult(method, "p", "b", 3, tokens, "", cycles=cycles, decode_s=seconds)


def test_summarize_pools_cycles_and_compares_with_ar():
    results = {"ar": [_result("ar", [1, 2, 3, 4], [1, 1, 1, 1], 4.0), _result("ar", [5, 6], [1, 1], 2.0)],
               "x": [_result("x", [1, 2, 3, 4], [3, 1], 1.0), _result("x", [5, 9], [2], 1.0)]}
    s = summarize(results)
    assert s["ar"].tau == 1.0 and s["ar"].speedup_vs_ar == pytest.approx(1.0) and s["ar"].matches_ar
    assert s["x"].tau == pytest.approx(6 / 3) and s["x"].tokens_per_s == pytest.approx(3.0)
    assert s["x"].speedup_vs_ar == pytest.approx(3.0) and not s["x"].matches_ar
    assert s["x"].agree_with_ar == pytest.approx(5 / 6) and s["x"].draft_ms == pytest.approx(1.0)


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2 and common_prefix([], [1]) == 0 and common_prefix([1], [1]) == 1


def test_encode_all_rejects_empty_and_over_long():
    bundle = tiny_random_bundle()
    assert encode_all(bundle, [Prompt("a", "hi", "b")], max_new_tokens=4) == [[107, 108]]
    with pytest.raises(PromptLengthError, match="'e' is empty"):
        encode_all(bundle, [Prompt("e", "  ", "b")], max_new_tokens=4)
    with pytest.raises(PromptLengthError, match="context of 2048"):
        encode_all(bundle, [Prompt("long", "x" * 2000, "b")], max_new_tokens=100)
