"""Spine-allocation rules: linear / harmonic m search and the paper's BuildSpineTree."""
from __future__ import annotations

import doctest

import pytest

import goose_theory.allocation as allocation_module
from goose_theory.acceptance import Acceptance
from goose_theory.allocation import harmonic_split, paper_branch_shares, paper_spine_ratio, paper_tree, weighted_tree
from goose_theory.candidate import Candidate
from goose_theory.optimize import build_topology
from goose_theory.topology import TRANSITION


@pytest.mark.parametrize("rule", ["linear", "harmonic"])
@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_m_search_keeps_the_best_of_its_curve(rule, model):
    acc = Acceptance.parse(0.6, 0.05, model)
    res = build_topology(rule, acc, budget=40, max_depth=12)
    curve = res.details["curve"]
    assert [m for m, _ in curve] == list(range(21))
    best_m, best_tau = max(curve, key=lambda item: item[1])
    assert res.details["spine_length"] == best_m and res.predicted_tau == pytest.approx(best_tau, rel=1e-12)
    assert res.predicted_tau >= build_topology("spine-only", acc, budget=40).predicted_tau - 1e-12


def test_weights_fall_along_the_spine():
    cand = Candidate(Acceptance.parse(0.6, 0.05), max_depth=12)
    _, lin = weighted_tree(cand, budget=40, weighting="linear")
    _, har = weighted_tree(cand, budget=40, weighting="harmonic")
    for details in (lin, har):
        shares = details["shares"]
        assert sum(shares) + details["spine_length"] == 40
        assert all(a >= b for a, b in zip(shares, shares[1:]))
    m = lin["spine_length"]
    assert lin["shares"][0] == pytest.approx((40 - m) * (m + 1) / ((m + 1) * (m + 2) / 2), abs=1)


def test_paper_tiers_and_shares():
    assert [paper_spine_ratio(p) for p in (0.1, 0.2, 0.39, 0.4, 0.9)] == [0.15, 0.30, 0.30, 0.50, 0.50]
    _, d = paper_tree(Candidate(Acceptance.parse(0.3, 0.05)), budget=60)
    assert d["spine_length"] == 18 and d["spine_ratio"] == 0.30  # floor(60 * 0.3)
    assert d["shares"][0] == 21 and sum(d["shares"][1:]) == 21  # R = 42, rho = 0.5
    assert d["shares"][1] >= d["shares"][2] >= d["shares"][-1]


def test_paper_leftover_moves_deeper_as_goose_does():
    # spine nodes at depth >= max_depth cannot hold branches: rho R goes to spine nodes 1..5 alone, the
    # root's share first, and what the depth-5 node cannot hang (its children are leaves) is left over
    res = build_topology("paper", Acceptance.parse(0.6, 0.02), budget=60)  # 0.6 + 10 * 0.02 <= 1: all ten root ranks
    assert res.details["spine_length"] == 20 and res.details["shares"][:7] == [20, 9, 4, 3, 2, 2, 0]
    assert res.topology.budget == 59 and res.details["unplaced"] == 1
    widths = res.details["first_level_widths"]
    assert widths[:6] == [10, 5, 2, 2, 1, 1] and all(w == 0 for w in widths[6:])
    depth = res.topology.depth
    assert all(depth[v] <= 6 for v in range(res.topology.n_nodes) if res.topology.source[v] == TRANSITION)


def test_paper_spine_rounds_like_the_runtime():
    # the runtime's goose builds max(1, round(B r)) spine nodes when the matcher offers a spine:
    # 3 * 0.15 = 0.45 -> 1, and the branch budget 2 splits round(0.5 * 2) = 1 to the spine node
    res = build_topology("paper", Acceptance.parse(0.1, 0.05), budget=3)
    assert res.details["spine_length"] == 1 and res.details["shares"] == [1, 1]
    res = build_topology("paper", Acceptance.parse(0.3, 0.05), budget=16)  # 16 * 0.30 = 4.8 -> 5
    assert res.details["spine_length"] == 5 and sum(res.details["shares"]) == 11


def test_paper_without_spine_budget_goes_to_the_root():
    res = build_topology("paper", Acceptance.parse(0.1, 0.05), budget=0)
    assert res.details["spine_length"] == 0 and res.details["shares"] == [0]
    res = build_topology("paper", Acceptance.parse(0.1, 0.05), budget=3, max_spine=0)
    assert res.details["spine_length"] == 0 and res.details["first_level_widths"] == [2]  # half, then a grandchild
    assert res.topology.budget == 3


def test_docstring_examples():
    assert doctest.testmod(allocation_module).failed == 0


def test_paper_notes_run_from_the_root_down():
    # the paper's allocations grow the deepest spine node's branches first; their notes listed that way
    # read "depth 5, 4, ..., the root" (a nit left in stop 47's note)
    notes = build_topology("paper", Acceptance.parse(0.9, "0.3,0.3,0.3,0.3"), budget=60).details["truncated"]
    assert notes[0].startswith("exclusive model: at the root") and len(notes) > 2
    assert [int(n.split("spine depth ")[1].split()[0]) for n in notes[1:]] == list(range(1, len(notes)))


@pytest.mark.parametrize("rule", ["linear", "harmonic"])
def test_spine_position_shares_grow_best_first(rule):
    # a chain child after rank 0 (0.8 * 0.1 * 0.9) beats rank 1 (0.8 * 0.05): best-first takes it; the spine
    # node once carried path probability 0, which made every key under it equal and the growth first-in-first-out
    acc = Acceptance.parse(0.8, [0.1, 0.05], p_t_chain=[0.9, 0.05])
    res = build_topology(rule, acc, budget=7, max_spine=1, max_depth=3, top_k=2)
    topo = res.topology
    assert res.details["spine_length"] == 1
    under_spine = [v for v in range(len(topo.parent)) if topo.parent[v] == 1]
    assert [topo.rank[v] for v in under_spine] == [0]
    assert [topo.rank[v] for v in range(len(topo.parent)) if topo.parent[v] == under_spine[0]] == [0]
    assert res.predicted_tau == pytest.approx(2.273, abs=5e-4)  # 2.241 first-in-first-out


def test_harmonic_split_sums_and_decreases():
    for total in range(0, 40):
        for n in range(1, 8):
            s = harmonic_split(total, n)
            assert sum(s) == total and all(a >= b for a, b in zip(s, s[1:]))
    assert harmonic_split(10, 3, power=2.0) == [7, 2, 1]  # 1, 1/4, 1/9 of 10: 7.35, 1.84, 0.82


def test_paper_branch_shares():
    assert paper_branch_shares(40, 5) == [20, 9, 4, 3, 2, 2]
    assert paper_branch_shares(7, 0) == [7]  # no spine node can hold branches: all to the root
    assert paper_branch_shares(3, 1, rho=1.0) == [0, 3]
