"""The run-all-methods helper: labels, summaries against ar, prompt length checks."""
from __future__ import annotations

import pytest

from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.prompts import Prompt
from goose_runtime.records import CycleRecord, PromptResult
from goose_runtime.methods import MethodError
from goose_runtime.runner import (PromptLengthError, common_prefix, distinct_methods, encode_all, method_label,
                                  parse_labeled, summarize)


@pytest.mark.parametrize("spec, budget, label", [
    ("goose", None, "goose"), ("goose", 60, "goose"), ("goose", 16, "goose@16"), ("iso:3", None, "iso:3"),
    ("iso:3", 8, "iso:3@8"), ("tr", None, "tr"), ("ar", None, "ar"), ("pld", None, "pld"), ("pld", 5, "pld@5"),
])
def test_labels_round_trip(spec, budget, label):
    s = parse_method(spec, budget=budget)
    assert method_label(s) == label
    again = parse_labeled(label)
    assert (again.name, again.budget) == (s.name, s.budget)


@pytest.mark.parametrize("spec", ["goose@\u00b2", "goose@\u00b9\u2070", "goose@\u0663", "goose@+3", "goose@-3",
                                  "goose@2.5", "ar@\u00b2", "goose@x", "goose@"])
def test_a_budget_after_at_is_ascii_digits_only(spec):
    # '²' passes str.isdigit and int() then raised a ValueError traceback; '٣' was read as 3
    with pytest.raises(MethodError, match="the budget after '@' must be a positive integer"):
        parse_labeled(spec)


def test_one_budget_after_one_at():
    with pytest.raises(MethodError, match="^'goose@8@9': one budget, after one '@'"):
        parse_labeled("goose@8@9")  # was "unknown method 'goose@8'"


def test_a_topology_files_name_may_hold_an_at(tmp_path):
    from goose_theory.topology import Topology, save_topology
    path = tmp_path / "tree@v2.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]), path)
    assert parse_labeled(f"topology:{path}").topology.budget == 1
    assert parse_labeled(f"topology:{path}@1").budget == 1


def test_distinct_methods_merges_one_method_and_refuses_two_under_one_label(tmp_path):
    from goose_theory.topology import Topology, save_topology
    paths = []
    for folder, nodes in (("a", [(-1, "root", 0), (0, "spine", 0)]), ("b", [(-1, "root", 0), (0, "transition", 0)])):
        (tmp_path / folder).mkdir()
        paths.append(tmp_path / folder / "tree.json")
        save_topology(Topology.from_nodes(nodes), paths[-1])
    same = [parse_method("goose"), parse_labeled("goose@60"), parse_method(f"topology:{paths[0]}"),
            parse_method(f"topology:{paths[0]}"), parse_method("goose", budget=16)]
    assert list(distinct_methods(same)) == ["goose", "topology:tree", "goose@16"]
    with pytest.raises(MethodError, match="both labelled 'topology:tree'"):
        distinct_methods([parse_method(f"topology:{paths[0]}"), parse_method(f"topology:{paths[1]}")])


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
    with pytest.raises(PromptLengthError, match="prompt 'e' of b is empty"):
        encode_all(bundle, [Prompt("e", "  ", "b")], max_new_tokens=4)
    with pytest.raises(PromptLengthError, match="context of 2048"):
        encode_all(bundle, [Prompt("long", "x" * 2000, "b")], max_new_tokens=100)
    # past context x the longest token in characters: refused before tokenizing (10M characters took
    # 22 s and 4.5 GB to tokenize, a 210 MB prompt ran out of memory)
    longest = max(len(t) for t in bundle.tokenizer.get_vocab())
    calls = []
    encode = bundle.tokenizer.encode
    bundle.tokenizer.encode = lambda text, **kw: calls.append(len(text)) or encode(text, **kw)
    with pytest.raises(PromptLengthError, match=f"prompt 'huge' of b has {2048 * longest + 1000} characters, and its "
                                                f"first {2048 * longest} alone make {2048 * longest} tokens: more than"):
        encode_all(bundle, [Prompt("huge", "x" * (2048 * longest + 1000), "b")], max_new_tokens=4)
    assert calls == [2048 * longest]  # the prefix alone was tokenized
    bundle.tokenizer.encode = lambda text, **kw: [5, 6]  # review: a fused <unk> makes any run of unknowns one token
    assert encode_all(bundle, [Prompt("unk", "中" * (2048 * longest + 1), "b")], max_new_tokens=4) == [[5, 6]]


def test_run_methods_keeps_a_deep_topology_file_inside_the_context(tmp_path):
    # a drafted node sits at position past + depth: a file's 40-deep spine needs room that the
    # builders' max_spine (20) did not leave (review, 3 Dec: positions past the context)
    from goose_runtime.config import DecodeConfig
    from goose_runtime.runner import deepest_tree, run_methods
    from goose_theory.topology import Topology, save_topology

    save_topology(Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(40)], max_spine=40),
                  tmp_path / "deep.json")
    deep = parse_method(f"topology:{tmp_path / 'deep.json'}")
    assert deepest_tree([parse_method("ar"), deep]) == 40 and deepest_tree([parse_method("goose")]) == 0
    bundle, config = tiny_random_bundle(), DecodeConfig(max_new_tokens=8)
    prompt = [Prompt("p", "x" * (2048 - 8 - 30), "b")]  # room for depth 28, not for 40
    assert set(run_methods(bundle, [parse_method("ar")], prompt, config=config, warmup=False)) == {"ar"}
    with pytest.raises(PromptLengthError, match="context of 2048"):
        run_methods(bundle, [parse_method("ar"), deep], prompt, config=config, warmup=False)
