"""Shapes of the non-allocation rules: isotropic, mixed, source-blind, spine-only, transition-only."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

import goose_theory.shapes as shapes_module
from goose_theory.acceptance import Acceptance
from goose_theory.candidate import Candidate
from goose_theory.optimize import build_topology
from goose_theory.shapes import isotropic_tree, source_blind_tree, spine_chain_tree
from goose_theory.topology import SPINE, TRANSITION
from goose_theory.yields import exact_yield


def kids(topo, v):
    start, index = topo.children
    return [(topo.source[c], topo.rank[c]) for c in index[start[v]:start[v + 1]]]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_isotropic_is_breadth_first_with_k_children(k):
    topo = build_topology(f"isotropic:{k}", Acceptance.parse(0.5, 0.05), budget=40).topology
    assert topo.spine_length == 0
    full = [v for v in range(topo.n_nodes) if kids(topo, v)]
    # breadth-first: every node but the last parent has all K children, and parents come in order
    for v in full[:-1]:
        assert kids(topo, v) == [(TRANSITION, r) for r in range(k)]
    assert full == list(range(len(full)))
    assert np.all(np.diff(topo.depth) >= 0)


def test_mixed_isotropic_puts_the_spine_token_at_rank_zero():
    topo = build_topology("mixed-isotropic:3", Acceptance.parse(0.5, 0.05), budget=30).topology
    for v in range(topo.n_nodes):
        children = kids(topo, v)
        if not children or v == max(range(topo.n_nodes), key=lambda u: (bool(kids(topo, u)), u)):
            continue
        if topo.source[v] == TRANSITION:
            assert children == [(TRANSITION, r) for r in range(3)]
        else:
            assert children == [(SPINE, 0), (TRANSITION, 0), (TRANSITION, 1)]
    assert topo.spine_length >= 2


def test_mixed_isotropic_past_max_spine_uses_k_transition_ranks():
    b, _ = isotropic_tree(Candidate(Acceptance.parse(0.5, 0.05), max_spine=1), budget=8, k=2, mixed=True)
    topo = b.topology()
    assert kids(topo, 0) == [(SPINE, 0), (TRANSITION, 0)]
    assert kids(topo, 1) == [(TRANSITION, 0), (TRANSITION, 1)]  # depth 1 = max_spine


def test_spine_only_is_a_chain():
    b, d = spine_chain_tree(Candidate(Acceptance.parse(0.5, 0.05), max_spine=5), budget=9)
    topo = b.topology()
    assert topo.spine_length == 5 and topo.budget == 5 and d["unplaced"] == 4
    assert build_topology("spine-only", Acceptance.parse(0.5, 0.05), budget=3).predicted_tau == 1.875


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_transition_only_has_no_spine_and_beats_isotropic(model):
    acc = Acceptance.parse(0.5, 0.05, model)
    res = build_topology("transition-only", acc, budget=30)
    assert res.topology.spine_length == 0 and res.topology.budget == 30
    assert res.predicted_tau >= build_topology("isotropic:3", acc, budget=30).predicted_tau


def test_source_blind_maps_positions_to_sources():
    # p_s high: the blind model thinks positional rank 0 is good everywhere, so it builds deep
    # chains of *transition* rank 0 below transition nodes too
    acc = Acceptance.parse(0.8, "0.1,0.05")
    b, d = source_blind_tree(Candidate(acc, top_k=3), budget=30)
    topo = b.topology()
    assert d["positional_vector"] == [0.8, 0.1, 0.05, 0.05]
    assert kids(topo, 0)[0] == (SPINE, 0)
    deep_transition = [v for v in range(topo.n_nodes)
                       if topo.source[v] == TRANSITION and topo.parent[v] != 0
                       and topo.source[topo.parent[v]] == TRANSITION]
    assert deep_transition  # a source-aware optimum would spend nothing there (0.1^2 < 0.8^k)
    opt = build_topology("optimal", acc, budget=30, top_k=3).predicted_tau
    blind = build_topology("source-blind", acc, budget=30, top_k=3).predicted_tau
    assert blind < opt


def test_source_blind_equals_optimal_when_sources_look_alike():
    acc = Acceptance.parse(0.05, 0.05)  # v is constant: the blind tree is the optimal one
    for budget in (5, 25):
        assert build_topology("source-blind", acc, budget=budget).predicted_tau == pytest.approx(
            build_topology("optimal", acc, budget=budget).predicted_tau, rel=1e-12)


@pytest.mark.parametrize("p_s", [0.0, 0.5])
def test_source_blind_without_a_spine_is_the_transition_optimum(p_s):
    # practitioner review, 6 Dec: with no spine (EAGLE / Medusa trees) v[0] was still p_s, so rank 0 rated as p_s:
    # at p_s = 0 trees had rank 1 without rank 0 (1.459 against 2.144), and p_s changed a tree that drafts no spine
    acc = Acceptance.parse(p_s, "0.37,0.09,0.05,0.04")
    blind = build_topology("source-blind", acc, budget=20, max_depth=4, max_spine=0)
    assert blind.details["positional_vector"] == [0.37, 0.09, 0.05, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04]
    best = build_topology("transition-only", acc, budget=20, max_depth=4).predicted_tau
    assert blind.predicted_tau == pytest.approx(best, rel=1e-12) and blind.predicted_tau == pytest.approx(2.144, abs=5e-4)


def test_docstring_examples():
    assert doctest.testmod(shapes_module).failed == 0


@pytest.mark.parametrize("acc", [
    Acceptance.parse(0.6, 0.1),                                          # exclusive: best-first
    Acceptance.parse("0.9,0.8,0.5,0.3", "0.3,0.2,0.1,0.05"),             # depth- and rank-dependent
    Acceptance.parse(0.7, "0.2,0.1", model="independent"),                # the dynamic programme
    Acceptance.parse(0.5, "0.3,0.3,0.2"),                                 # truncation: competing child sets
])
def test_optimal_taus_equal_one_tree_per_budget(acc):
    # the cost-aware scan reads every budget's E[tau] from one optimisation; the reference is the
    # optimal tree built and scored exactly at each budget, as the scan did before
    cand = Candidate(acc, max_depth=4, max_spine=6, top_k=4)
    taus, _ = shapes_module.optimal_curve(cand, budget=70)
    want = [build_topology("optimal", acc, budget=b, max_depth=4, max_spine=6, top_k=4).predicted_tau
            for b in range(71)]
    np.testing.assert_allclose(taus, want, rtol=1e-12, atol=0)
    assert np.all(np.diff(taus) >= 0)


@pytest.mark.parametrize("p_s, p_t, shape", [
    (0.6, "0.4,0.2,0.2", dict(max_depth=3, max_spine=4, top_k=3)),   # dynamic programme: sizes not monotone
    (1.0, "0.2,0.4,0.4", dict(max_depth=5, max_spine=4, top_k=4)),   # ... and flat runs of one size
    (0.0, "0.5,0", dict(max_depth=2, max_spine=0, top_k=2)),          # best-first pads with zero-chance nodes
    (0.9, "0.3", dict(max_depth=6, max_spine=20, top_k=10)),          # the exclusive cap ends the candidate
    (0.7, "0.2,0.1", dict(max_depth=3, max_spine=3, top_k=2, model="independent")),
])
def test_optimal_curve_nodes_are_the_built_trees_sizes(p_s, p_t, shape):
    shape = dict(shape)
    acc = Acceptance.parse(p_s, p_t, shape.pop("model", "exclusive"))
    taus, nodes = shapes_module.optimal_curve(Candidate(acc, **shape), budget=45)
    built = [build_topology("optimal", acc, budget=b, **shape) for b in range(46)]
    assert nodes.tolist() == [r.topology.budget for r in built]
    np.testing.assert_allclose(taus, [r.predicted_tau for r in built], rtol=1e-12, atol=0)


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_optimal_taus_stay_flat_once_the_candidate_tree_runs_out(model):
    acc = Acceptance.parse(0.6, "0.2,0.1", model=model)
    cand = Candidate(acc, max_depth=2, max_spine=2, top_k=2)
    taus, _ = shapes_module.optimal_curve(cand, budget=40)
    full = build_topology("optimal", acc, budget=40, max_depth=2, max_spine=2, top_k=2)
    assert full.topology.budget < 20  # the whole candidate tree
    np.testing.assert_allclose(taus[full.topology.budget:], full.predicted_tau, rtol=1e-12)


def _uniform_tree(widths):
    """The tree of level widths (c_1, c_2, ...), built directly from its definition."""
    from goose_theory.topology import Topology
    nodes, level = [(-1, "root", 0)], [0]
    for c in widths:
        new = []
        for v in level:
            for r in range(c):
                nodes.append((v, "transition", r)); new.append(len(nodes) - 1)
        level = new
    return Topology.from_nodes(nodes)


def _all_widths(budget, max_depth, top_k):
    """Every sequence of level widths whose tree has at most ``budget`` nodes (brute force)."""
    out, stack = [()], [((), 0, 1)]
    while stack:
        widths, nodes, last = stack.pop()
        if len(widths) == max_depth:
            continue
        for c in range(1, top_k + 1):
            if nodes + last * c <= budget:
                out.append(widths + (c,)); stack.append((widths + (c,), nodes + last * c, last * c))
    return out


@pytest.mark.parametrize("model", ["exclusive", "independent"])
@pytest.mark.parametrize("seed", range(4))
def test_uniform_levels_is_the_best_of_every_uniform_tree(model, seed):
    rng = np.random.default_rng(seed)
    p_t = sorted(rng.uniform(0.0, 0.3, size=3), reverse=True)
    acc = Acceptance.parse(0.7, list(p_t), model, p_t_chain=list(rng.uniform(0.0, 0.3, size=3)))
    budget, max_depth, top_k = int(rng.integers(1, 40)), 4, 4
    res = build_topology("uniform-levels", acc, budget=budget, max_depth=max_depth, top_k=top_k)
    taus = {w: exact_yield(_uniform_tree(w), acc).expected_tau for w in _all_widths(budget, max_depth, top_k)}
    assert res.predicted_tau == pytest.approx(max(taus.values()), rel=1e-12)
    assert res.topology.spine_length == 0 and res.topology.budget <= budget
    direct = _uniform_tree(tuple(res.details["level_widths"]))
    assert (res.topology.parent, res.topology.source, res.topology.rank) == (direct.parent, direct.source, direct.rank)
    assert res.predicted_tau <= build_topology("transition-only", acc, budget=budget, max_depth=max_depth,
                                               top_k=top_k).predicted_tau + 1e-12


def test_uniform_levels_exports_as_a_tree_vllm_takes():
    from goose_theory.choices import choices_from_topology, portability_notes
    acc = Acceptance.parse(0.0, [0.37, 0.09, 0.05, 0.04, 0.03, 0.014, 0.011, 0.010, 0.012, 0.006],
                           p_t_chain=[0.57, 0.09, 0.05, 0.02, 0.03, 0.01, 0.011, 0.008, 0.016, 0.007])
    res = build_topology("uniform-levels", acc, budget=63)
    assert portability_notes(choices_from_topology(res.topology)) == []  # no rank gap, same children per level
    assert res.details["level_widths"][0] > 1 and res.topology.budget <= 63


def test_uniform_levels_notes_the_ranks_the_exclusive_model_drops():
    # p_t 0.3 per rank: only ranks 0..2 fit under one parent (a fourth would sum past 1)
    res = build_topology("uniform-levels", Acceptance.parse(0.0, 0.3), budget=30, max_depth=3, top_k=10)
    assert res.details["truncated"][0].startswith("exclusive model: at the root only ranks 0..2 of top_k=10")
    assert max(res.details["level_widths"]) <= 3
    assert build_topology("uniform-levels", Acceptance.parse(0.0, 0.05), budget=30).details["truncated"] == []


def test_uniform_levels_says_what_the_limits_left_unplaced():
    # found in review (stop 47): a budget past the largest uniform tree the limits allow gave no word
    acc = Acceptance.parse(0.5, 0.05)
    full = build_topology("uniform-levels", acc, budget=200, max_depth=3, top_k=3)
    assert full.topology.budget == 3 + 9 + 27 and full.details["unplaced"] == 200 - 39
    # below that a uniform tree may stop short of its budget (its shape), and nothing is unplaced
    assert "unplaced" not in build_topology("uniform-levels", acc, budget=38, max_depth=3, top_k=3).details
