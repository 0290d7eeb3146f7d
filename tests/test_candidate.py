"""Candidate tree: rank caps, keys, best-first / breadth-first growth, largest remainder."""
from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings, strategies as st

import goose_theory.candidate as candidate_module
from goose_theory.acceptance import Acceptance
from goose_theory.candidate import Candidate, TreeBuilder, best_first, breadth_first, largest_remainder
from goose_theory.topology import ROOT, SPINE, TRANSITION


def test_rank_cap_exclusive_feasible_prefix_and_depth_limit():
    cand = Candidate(Acceptance.parse(0.6, 0.15), max_depth=3, top_k=10)
    assert cand.rank_cap(ROOT, 0, True) == 2      # 0.6 + 0.15 * 2 <= 1 < 0.6 + 0.15 * 3
    assert cand.rank_cap(TRANSITION, 1, False) == 6
    assert cand.rank_cap(TRANSITION, 3, False) == 0   # children would pass max_depth
    assert "ranks 0..1 of top_k=10" in cand.truncation_note(ROOT, 0, True)
    assert Candidate(Acceptance.parse(0.6, 0.15, "independent")).rank_cap(ROOT, 0, True) == 10
    assert Candidate(Acceptance.parse(0.1, 0.01)).truncation_note(ROOT, 0, True) is None


def test_rank_set_first_fit_keeps_later_ranks_that_still_fit():
    cand = Candidate(Acceptance.parse(0.7, [0.36, 0.09, 0.05, 0.04, 0.2]), max_depth=3, top_k=6)
    assert cand.rank_set(ROOT, 0, True) == (1, 2, 3)   # 0.7 + 0.36 > 1; then 0.09 + 0.05 + 0.04 fit, 0.2 not
    assert cand.rank_cap(ROOT, 0, True) == 0              # the prefix rules keep none
    assert cand.rank_set(ROOT, 0, False) == (0, 1, 2, 3, 4, 5) and cand.rank_set(TRANSITION, 3, False) == ()
    flat = Candidate(Acceptance.parse(0.6, 0.15), top_k=10)
    assert flat.rank_set(ROOT, 0, True) == (0, 1)         # equal rates: first fit is the prefix
    assert Candidate(Acceptance.parse(0.7, 0.36, "independent")).rank_set(ROOT, 0, True) == tuple(range(10))
    assert cand.truncation_note(ROOT, 0, True, first_fit=True) == (
        "exclusive model: at the root ranks 1, 2, 3 of top_k=6 may be used (first fit in rank order: "
        "p_s(1) + p_t over the others would exceed 1)")
    assert "no transition rank fits" in cand.truncation_note(ROOT, 0, True)  # the prefix rules' note
    bare = Candidate(Acceptance.parse(0.0, 0.4), top_k=4)  # p_s = 0: no "p_s(1) +" in the note
    assert bare.truncation_note(ROOT, 0, True) == (
        "exclusive model: at the root only ranks 0..1 of top_k=4 may be used (p_t summed over more ranks would exceed 1)")


def test_independent_keys_discount_earlier_siblings_and_sort():
    cand = Candidate(Acceptance.parse(0.5, "0.1,0.3", "independent"), top_k=3)
    spine, ranks = cand.keys(ROOT, 0, True)
    assert spine == 0.5
    expected = {0: 0.1 * 0.5, 1: 0.3 * 0.5 * 0.9, 2: 0.3 * 0.5 * 0.9 * 0.7}
    assert [r for r, _ in ranks] == sorted(expected, key=lambda r: -expected[r])
    assert all(k == pytest.approx(expected[r]) for r, k in ranks)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 60), st.floats(0, 1), st.floats(0, 0.1), st.integers(1, 10))
def test_best_first_takes_candidates_in_non_increasing_probability(budget, p_s, p_t, top_k):
    b = TreeBuilder(Candidate(Acceptance.parse(p_s, p_t), top_k=top_k))
    placed = best_first(b, budget=budget, seeds=[0])
    assert placed == len(b) - 1 <= budget
    assert all(b.parent[i] < i for i in range(1, len(b)))
    assert all(x >= y - 1e-15 for x, y in zip(b.prob[1:], b.prob[2:]))
    b.topology()  # valid (raises otherwise)


def test_breadth_first_fills_level_by_level():
    b = TreeBuilder(Candidate(Acceptance.parse(0.5, 0.05)))
    placed = breadth_first(b, budget=7, seeds=[0], children=lambda v: [(TRANSITION, 0), (TRANSITION, 1)])
    assert placed == 7 and b.parent == [-1, 0, 0, 1, 1, 2, 2, 3]
    assert b.source[1:] == [TRANSITION] * 7 and SPINE not in b.source


@given(st.integers(0, 500), st.lists(st.floats(0.01, 10), min_size=1, max_size=25))
def test_largest_remainder_sums_and_stays_within_one(total, weights):
    shares = largest_remainder(total, weights)
    assert sum(shares) == total
    exact = [total * w / sum(weights) for w in weights]
    assert all(abs(s - e) < 1 for s, e in zip(shares, exact))


def test_docstring_examples():
    assert doctest.testmod(candidate_module).failed == 0
