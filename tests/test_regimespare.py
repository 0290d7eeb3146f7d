"""Spare-slot pricing of matched trees: against the runtime's own builder (breadth-first fill up to
the budget, spine slots beyond the match dropped), against the exact yield where nothing is cut,
against a brute-force fill simulation; the greedy growth and the end-of-spine fit."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from goose_runtime.matcher import Match
from goose_runtime.trees import build_from_topology
from goose_theory.acceptance import Acceptance
from goose_theory.regimefill import bfs_order
from goose_theory.regimespare import PRIOR_N, SpineModel, end_rates, grow_spare, spare_tau
from goose_theory.topology import SPINE, TRANSITION, Topology
from goose_theory.yields import exact_yield

from conftest import random_topology

ACC = Acceptance.parse([0.7, 0.85], [0.15, 0.03, 0.01, 0.0], p_t_spine=[0.1, 0.03, 0.0],
                       p_t_chain=[0.4, 0.1, 0.02, 0.0])
FULL = (1.0, 1.0, 1.0)


class _Table:
    """Every context has ``k`` distinct successors, none equal to a spine token (>= 5000)."""

    def __init__(self, k: int = 16):
        self.k = k

    def lookup(self, prev: int, cur: int):
        return [(cur * 7 + r) % 4000 + 10_000 + 4000 * r for r in range(self.k)], [1.0] * self.k


def _runtime_tau(topology: Topology, spine: SpineModel, budget: int) -> tuple[float, float]:
    """E[tau] over the match length of the tree goose_runtime builds, with the model's q per node
    (end-of-spine rate under a spine node without a spine child in the built tree)."""
    tau_sum, nodes_sum = 0.0, 0.0
    for length, w in enumerate(spine.length_pmf()):
        if w <= 0:
            continue
        tree = build_from_topology(topology, Match(tuple(range(1, length + 1)), 3, 1, 1), _Table(), 0, 0,
                                   budget=budget)
        reach, tau = [1.0], 1.0
        for v in range(1, tree.n_nodes):
            p = tree.parent[v]
            if tree.source[v] == SPINE:
                q = spine.p_s[min(tree.depth[v], len(spine.p_s)) - 1]
            elif tree.source[p] == SPINE and not any(tree.source[c] == SPINE for c in tree.children[p]):
                q = spine.end[min(tree.rank[v], len(spine.end) - 1)]
            else:
                q = ACC.transition_q(tree.rank[v], tree.source[p])
            reach.append(reach[p] * q)
            tau += reach[-1]
        tau_sum += w * tau
        nodes_sum += w * (tree.n_nodes - 1)
    return tau_sum, nodes_sum


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 16), st.integers(1, 12),
       st.lists(st.floats(0.3, 1.0), min_size=6, max_size=6))
def test_spare_tau_is_the_runtime_fill(seed, n, budget, avail):
    """With every slot fillable, the kernel's tree is exactly build_from_topology's for each L."""
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    spine = SpineModel(p_s=(0.9, 0.6, 0.8), avail=(1.0, *avail), end=(0.7, 0.2, 0.0))
    tau, nodes = spare_tau(t, ACC, spine, FULL, budget)
    ref_tau, ref_nodes = _runtime_tau(t, spine, budget)
    assert tau == pytest.approx(ref_tau, rel=1e-12)
    assert nodes == pytest.approx(ref_nodes, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 14), st.lists(st.floats(0.2, 1.0), min_size=5, max_size=5))
def test_spare_tau_is_the_exact_yield_when_nothing_is_cut(seed, n, avail):
    """Budget >= the tree and end-of-spine rates equal to the mid-spine ones: the exact yield of
    the acceptance with a(d) folded into p_s (what regimefit fits for the exact-budget tree)."""
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    spine = SpineModel(p_s=(0.8, 0.6, 0.8), avail=(1.0, *avail, 0.0), end=ACC.transition_list(1))
    folded = Acceptance.parse(spine.effective(), ACC.p_t, p_t_spine=ACC.p_t_spine, p_t_chain=ACC.p_t_chain)
    assert spare_tau(t, ACC, spine, FULL, n)[0] == pytest.approx(exact_yield(t, folded).expected_tau, rel=1e-12)


def test_spare_tau_against_a_fill_simulation():
    """Root: spine (match always 1 long) then two transition slots; budget 2. The spine is always
    placed; the first existing transition slot takes the second place: E[tau] = 1 + s + f a + (1 - f) f b
    with the unfolded rates a, b (the fitted ones have fill f folded in)."""
    t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    f, s, a, b = 0.6, 0.5, 0.3, 0.2
    acc = Acceptance.parse(0.0, [a * f, b * f])
    spine = SpineModel(p_s=(s,), avail=(1.0, 0.0), end=(0.0,))
    tau, nodes = spare_tau(t, acc, spine, (f, f, f), 2, draws=20_000, seed=1)
    assert tau == pytest.approx(1 + s + f * a + (1 - f) * f * b, abs=0.005)
    assert nodes == pytest.approx(1 + 1 - (1 - f) ** 2, abs=0.01)


def test_bfs_order_is_breadth_first_spine_first():
    # root: t1 (rank 1), spine, t0; spine: spine child; t0: chain
    parent, kind, rank = [-1, 0, 0, 0, 2, 3], [0, 2, 1, 2, 1, 2], [0, 1, 0, 0, 0, 0]
    assert bfs_order(parent, kind, rank).tolist() == [2, 3, 1, 4, 5]


def test_grow_spare_places_the_end_of_a_short_match():
    """Matches are 2 tokens long; a 4-spine tree of budget 4 places 2 nodes. Growing adds slots
    that fill in (the end-of-spine transition first), never past max_slots, and raises the price."""
    base = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0), (3, "spine", 0)])
    spine = SpineModel(p_s=(0.9,), avail=(1.0, 1.0, 0.0), end=(0.8, 0.05, 0.0))
    grown = grow_spare(base, ACC, spine, FULL, 4, max_slots=7)
    assert 4 < grown.budget <= 7
    assert (grown.parent[5], grown.source[5], grown.rank[5]) == (2, TRANSITION, 0)
    assert spare_tau(grown, ACC, spine, FULL, 4)[0] > spare_tau(base, ACC, spine, FULL, 4)[0] + 0.5
    assert max(grown.depth) <= base.max_spine and grown.meta == base.meta


def test_grow_spare_leaves_a_tree_whose_budget_is_always_used():
    """Matches always longer than the spine and every slot filled: a spare could only displace."""
    base = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    spine = SpineModel(p_s=(0.9,), avail=(1.0,) * 20, end=(0.8,))
    assert grow_spare(base, ACC, spine, FULL, 3, max_slots=6).budget == 3


def test_end_rates_shrink_toward_the_prior():
    rows = pd.DataFrame({"reached": True, "node": 1, "regime": 1, "source": "transition", "parent_source": "spine",
                         "spine_sibling": False, "rank": [0] * 10 + [1] * 10, "match": [True] * 9 + [False] + [False] * 10})
    prior = [0.5, 0.1]
    end = end_rates(rows, prior)
    assert end[0] == pytest.approx((9 + PRIOR_N * 0.5) / (10 + PRIOR_N))
    assert end[1] == pytest.approx((0 + PRIOR_N * 0.1) / (10 + PRIOR_N))
    assert end[5] == pytest.approx(0.1)  # no data: the prior, its last value repeated
    mid = rows.assign(spine_sibling=True)  # beside a spine child: not the end of a spine
    assert end_rates(mid, prior)[0] == pytest.approx(0.5)


def test_grow_spare_refuses_a_tree_larger_than_max_slots():
    """The pricer's draws are sized for max_slots nodes: a bigger tree would be priced from
    memory past its arrays (numba does not check bounds), so it is refused."""
    base = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    spine = SpineModel(p_s=(0.9,), avail=(1.0,) * 20, end=(0.8,))
    with pytest.raises(ValueError, match="max_slots"):
        grow_spare(base, ACC, spine, FULL, 3, max_slots=2)


def test_grow_spare_is_the_same_when_growths_run_side_by_side_in_threads():
    # regimelength.length_trees runs whole growths in a thread pool (the kernels release the GIL):
    # each must come out as it does alone, whatever runs beside it
    from concurrent.futures import ThreadPoolExecutor
    spine = SpineModel(p_s=(0.9, 0.8), avail=(1.0, 0.9, 0.7, 0.5), end=(0.6, 0.2, 0.1))
    fill = (0.8, 0.7, 0.9)
    bases = [Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(m)], max_depth=4, max_spine=6)
             for m in range(4)] * 3

    def grow(base):
        return grow_spare(base, ACC, spine, fill, 10, max_slots=20, top_k=4)

    alone = [grow(b) for b in bases]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(grow, bases))
    assert all(t.budget > 10 for t in alone) and together == alone
