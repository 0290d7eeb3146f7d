"""The best single tree for both regimes: the blend's additivity (a one-value p_s included), and the
search between grid weights against an exhaustive search on a case the grid alone missed."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goose_theory.acceptance import Acceptance
from goose_theory.regime import regime_tau
from goose_theory.regimesingle import WEIGHTS, best_single, blend, blended_optima
from goose_theory.topology import SOURCE_NAMES, Topology
from goose_theory.yields import exact_yield

from conftest import random_topology
from test_optimize_exact import candidate_nodes, subtrees

# ranks past the list repeat its last value, so the lists end in 0 to keep random trees feasible
M = Acceptance.parse([0.7, 0.85], [0.15, 0.03, 0.01, 0.0], p_t_spine=[0.1, 0.03, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])
M_FLAT = Acceptance.parse(0.8, [0.15, 0.03, 0.01, 0.0], p_t_spine=[0.1, 0.03, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])
U = Acceptance.parse(0.0, [0.35, 0.08, 0.02, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 14), st.floats(0.0, 1.0), st.sampled_from([M, M_FLAT]))
def test_blend_is_the_weighted_sum_of_the_regimes(seed, n, w, matched):
    # M_FLAT: one p_s value for every depth; the blend had scaled every depth's q by w (audit, 7 Dec)
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    lhs = exact_yield(t, blend(matched, U, w)).expected_tau - 1
    rhs = w * (exact_yield(t, matched).expected_tau - 1) + (1 - w) * (exact_yield(t, U).expected_tau - 1)
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-12)


def _all_trees(budget: int, max_depth: int, max_spine: int, top_k: int) -> list[Topology]:
    """Every valid tree of at most ``budget`` nodes: test_optimize_exact's exhaustive enumeration, as topologies."""
    nodes = candidate_nodes(max_depth, max_spine, top_k, budget)
    trees = []
    for members in subtrees(nodes, budget):
        index = {v: i for i, v in enumerate(members)}
        trees.append(Topology.from_nodes([(-1, "root", 0)] + [(index[nodes[v][0]], SOURCE_NAMES[nodes[v][1]], nodes[v][2])
                                                               for v in members[1:]], max_depth=max_depth, max_spine=max_spine))
    return trees


def test_the_search_between_weights_finds_the_tree_the_grid_missed():
    """A realistic case of the audit (same chain rates, exclusive-feasible): the grid's best tree
    was 3.9% below the exhaustive optimum, which the tie-weight search finds."""
    m = Acceptance.parse([0.925735] * 3, [0.018875, 0.007426], p_t_spine=[0.021423, 0.007426],
                         p_t_chain=[0.594940, 0.104000])
    u = Acceptance.parse(0.0, [0.437601, 0.147654], p_t_spine=[0.1], p_t_chain=[0.594940, 0.104000])
    psi, limits = 0.134269, dict(max_depth=3, max_spine=3, top_k=2)
    exhaustive = max(regime_tau(t, m, u, psi).tau for t in _all_trees(4, **limits))
    grid_only = max(regime_tau(t, m, u, psi).tau for _, t in blended_optima(m, u, budget=4, depth=0, **limits))
    assert grid_only < exhaustive * 0.97
    assert best_single(m, u, psi, budget=4, **limits).prediction.tau == pytest.approx(exhaustive, rel=1e-12)


def test_blended_optima_are_distinct_and_include_every_grid_tree():
    trees = blended_optima(M, U, budget=8)
    keys = [(tuple(t.parent), tuple(t.source), tuple(t.rank)) for _, t in trees]
    assert len(set(keys)) == len(keys) and [w for w, _ in trees] == sorted(w for w, _ in trees)
    grid = {(tuple(t.parent), tuple(t.source), tuple(t.rank)) for _, t in blended_optima(M, U, budget=8, depth=0)}
    assert grid <= set(keys) and len(grid) <= len(WEIGHTS)
    assert trees[0][0] == 0.0
