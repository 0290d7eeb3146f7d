"""The optimizer: the paper's claims, ties, every rule's contract (exactness: test_optimize_exact.py)."""
from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import goose_theory.optimize as optimize_module
from goose_theory._dp import solve
from goose_theory.acceptance import Acceptance
from goose_theory.candidate import Candidate
from goose_theory.optimize import (DEFAULT_COMPARE, OptimizeError, build_topology, compare_rules)
from goose_theory.topology import TRANSITION, load_topology, save_topology
from goose_theory.yields import exact_yield

ALL_RULES = ("optimal", "linear", "harmonic", "paper", "source-blind", "isotropic:1", "isotropic:3",
             "mixed-isotropic:2", "mixed-isotropic:5", "spine-only", "transition-only", "uniform-levels")


def _transition_ranks_by_parent(topology) -> dict[int, list[int]]:
    ranks: dict[int, list[int]] = {}
    for parent, source, rank in zip(topology.parent[1:], topology.source[1:], topology.rank[1:]):
        if source == TRANSITION:
            ranks.setdefault(parent, []).append(rank)
    return ranks


@pytest.mark.parametrize("model,p_s,p_t", [
    ("exclusive", 0.6, 0.05),         # truncated at the root: the dynamic programme
    ("exclusive", 0.5, 0.03),         # no truncation: best-first
    ("exclusive", 0.3, [0.2, 0.05]),  # ranks past the list share 0.05
    ("independent", 0.6, 0.05),
    ("independent", 0.6, [0.2, 0.05]),
])
@pytest.mark.parametrize("budget", [3, 8, 16, 31, 60])
def test_equal_rank_rates_tie_to_the_lowest_ranks(model, p_s, p_t, budget):
    # The model rates these ranks equally, but at run time lower ranks are likelier: on a tie
    # the optimal tree must take ranks 0..n-1 at every node (it took 5, 6, 7 at the root).
    acc = Acceptance.parse(p_s, p_t, model)
    trees = [build_topology("optimal", acc, budget=budget).topology]
    cand = Candidate(acc, max_depth=6, max_spine=20, top_k=10)
    trees.append(solve(cand, budget=budget).topology())  # the dynamic programme on every case
    for topology in trees:
        for parent, ranks in _transition_ranks_by_parent(topology).items():
            assert sorted(ranks) == list(range(len(ranks))), (parent, ranks)
    # and still exact: the same E[tau] as the untied optimum
    taus = [exact_yield(t, acc).expected_tau for t in trees]
    assert taus[0] == pytest.approx(taus[1], rel=1e-12)


def test_tied_ranks_on_the_fuzzers_cases():
    root = lambda res: _transition_ranks_by_parent(res.topology)[0]
    assert root(build_topology("optimal", Acceptance.parse(0.6, 0.05), budget=8)) == [0, 1, 2]
    res = build_topology("optimal", Acceptance.parse(0.6, 0.05), budget=16)
    assert _transition_ranks_by_parent(res.topology)[1] == [0, 1]
    res = build_topology("optimal", Acceptance.parse(0.6, [0.2, 0.05], "independent"), budget=16)
    assert root(res) == [0, 1, 2, 3]


def test_exclusive_optimum_may_drop_the_spine_to_fit_more_ranks():
    # 0.125 + 4 * 0.25 > 1: with the spine child the root holds 3 ranks, without it 4 (tau 2.0)
    acc = Acceptance.parse(0.125, 0.25, "exclusive")
    res = build_topology("optimal", acc, budget=4, top_k=4)
    assert res.predicted_tau == pytest.approx(2.0) and res.topology.spine_length == 0


def test_first_level_widths_fall_linearly_with_the_predicted_slope():
    # independent model; K cap not binding (top_k = 200); max_depth 20 so that every spine
    # position may hold branches (transition depth is absolute)
    p_s, p_t = 0.9, 0.05
    res = build_topology("optimal", Acceptance.parse(p_s, p_t, "independent"), budget=150,
                         max_depth=20, top_k=200)
    widths = np.asarray(res.details["first_level_widths"][:-1], dtype=float)  # last: no spine child
    positions = np.flatnonzero(widths > 0)
    assert len(positions) >= 6
    assert max(widths) < 200
    slope = np.polyfit(positions, widths[positions], 1)[0]
    predicted = math.log(p_s) / math.log(1 - p_t)  # widths fall by this much per position (> 0)
    assert -slope == pytest.approx(predicted, rel=0.15)


@settings(max_examples=80, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 0.3), st.integers(0, 70),
       st.sampled_from(["exclusive", "independent"]), st.integers(1, 10))
def test_optimal_never_below_pure_spine_or_pure_transition(p_s, p_t, budget, model, top_k):
    acc = Acceptance.parse(p_s, p_t, model)
    opt = build_topology("optimal", acc, budget=budget, top_k=top_k).predicted_tau
    for ref in ("spine-only", "transition-only"):
        assert opt >= build_topology(ref, acc, budget=budget, top_k=top_k).predicted_tau - 1e-12


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_anisotropic_dominance_over_every_isotropic_tree(model):
    top_k = 10
    for p_s in (0.1, 0.3, 0.6, 0.9):
        for p_t in (0.02, 0.05, 0.09):
            if not p_s > p_t:
                continue
            acc = Acceptance.parse(p_s, p_t, model)
            for budget in (2, 5, 20, 60):
                opt = build_topology("optimal", acc, budget=budget, top_k=top_k).predicted_tau
                iso = max(build_topology(f"isotropic:{k}", acc, budget=budget, top_k=top_k).predicted_tau
                          for k in range(1, top_k + 1))
                assert opt > iso + 1e-9, (p_s, p_t, budget)


@pytest.mark.parametrize("model", ["exclusive", "independent"])
@pytest.mark.parametrize("rule", ALL_RULES)
def test_every_rule_gives_a_valid_tree_of_the_budget_scored_exactly(rule, model):
    acc = Acceptance.parse("0.7,0.6,0.5", "0.06,0.04,0.03", model)
    for budget in (0, 1, 7, 60):
        res = build_topology(rule, acc, budget=budget)
        # capacity of the shape itself: a chain of max_spine = 20 or of max_depth = 6 nodes; at 60 the paper's
        # 20-node spine leaves one node (as goose does) that its depth-5 spine node cannot hang
        expected = min(budget, {"spine-only": 20, "isotropic:1": 6, "paper": 59}.get(rule, budget))
        assert res.topology.budget == expected
        assert res.details.get("unplaced", 0) == budget - expected
        assert res.predicted_tau == exact_yield(res.topology, acc).expected_tau
        assert res.topology.meta["predicted_tau"] == res.predicted_tau
        assert res.topology.meta["rule"] == rule == res.rule and res.budget == budget
        assert res.details["spine_length"] == res.topology.spine_length
        depth, source = res.topology.depth, res.topology.source_array
        assert np.all(depth[source == TRANSITION] <= 6) and res.topology.spine_length <= 20


def test_small_candidate_tree_reports_unplaced_nodes():
    acc = Acceptance.parse(0.5, 0.05)
    res = build_topology("optimal", acc, budget=50, max_depth=1, max_spine=2, top_k=3)
    # candidate: 2 spine nodes + 3 ranks at the root and at spine depth... none past depth 1
    assert res.topology.budget == 2 + 3 and res.details["unplaced"] == 45


def test_exclusive_infeasible_ranks_are_dropped_and_reported():
    acc = Acceptance.parse(0.6, 0.15, "exclusive")  # 0.6 + 3 * 0.15 > 1
    res = build_topology("optimal", acc, budget=40)
    assert res.details["truncated"] and "exclusive model" in res.details["truncated"][0]
    start, index = res.topology.children
    q = {1: 0.6, 2: 0.15}
    for v in range(res.topology.n_nodes):
        kids = index[start[v]:start[v + 1]]
        assert sum(q[res.topology.source[c]] for c in kids) <= 1 + 1e-9
    assert res.topology.meta["truncated"] == res.details["truncated"]


@pytest.mark.parametrize("budget", [0, 1])
def test_no_cap_is_reported_on_a_tree_too_small_for_one(budget):
    # one child fits at any node, so at 0 or 1 nodes no rule's cap binds (budget 0 had said
    # "at the root only ranks 0..2 ... are used" of a root with no children)
    acc = Acceptance.parse(0.9, 0.3, "exclusive")
    for res in compare_rules(acc, budget=budget):
        assert res.details["truncated"] == [] and "truncated" not in res.topology.meta
    assert build_topology("uniform-levels", acc, budget=2).details["truncated"]


@pytest.mark.parametrize("rule,kwargs,needle", [
    ("best", {}, "'best'"), ("harmonc", {}, "; did you mean 'harmonic'?"), ("isotropic:0", {}, "K=0"),
    ("isotropic:x", {}, "'isotropic:x'"), ("isotropic:11", {}, "top_k=10"), ("optimal:3", {}, "'optimal:3'"),
    ("optimal", {"budget": -1}, "-1"), ("optimal", {"top_k": 0}, "top_k"), ("optimal", {"max_depth": 2.5}, "2.5")])
def test_bad_input_is_one_clear_line(rule, kwargs, needle):
    kwargs = {"budget": 10, **kwargs}
    with pytest.raises(OptimizeError) as err:
        build_topology(rule, Acceptance.parse(0.5, 0.05), **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("acc,kwargs,needle", [
    (Acceptance.parse(0.5, 0.05), {"budget": -1}, "-1"), (Acceptance.parse(0.5, 0.05), {"top_k": 0}, "top_k"),
    ((0.5, 0.05), {}, "must be an Acceptance, got tuple")])
def test_the_tau_curve_refuses_what_build_topology_refuses(acc, kwargs, needle):
    with pytest.raises(OptimizeError, match=needle):
        optimize_module.optimal_tau_curve(acc, **{"budget": 10, **kwargs})


def test_compare_rules_default_list_and_small_top_k():
    acc = Acceptance.parse(0.5, 0.05)
    assert [r.rule for r in compare_rules(acc, budget=12)] == list(DEFAULT_COMPARE)
    names = [r.rule for r in compare_rules(acc, budget=12, top_k=4)]
    assert "isotropic:5" not in names and "isotropic:3" in names
    assert [r.rule for r in compare_rules(acc, budget=3, rules=["paper"])] == ["paper"]


def test_saved_topology_keeps_what_it_was_optimised_for(tmp_path):
    acc = Acceptance.parse(0.4, 0.05, "independent")
    res = build_topology("harmonic", acc, budget=30)
    save_topology(res.topology, tmp_path / "t.json")
    back = load_topology(tmp_path / "t.json")
    assert back.meta["acceptance"] == acc.to_dict() and back.meta["rule"] == "harmonic"
    assert exact_yield(back, acc).expected_tau == pytest.approx(res.predicted_tau, rel=1e-12)


def test_docstring_examples():
    assert doctest.testmod(optimize_module).failed == 0
