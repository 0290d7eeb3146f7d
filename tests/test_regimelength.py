"""Matched trees by match length: each is the best tree for its length (brute force on tiny
trees), and the mixture over lengths is exactly the spare-slot price of a random length."""
from __future__ import annotations

import numba
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.regimelength import known_length, length_tau, length_tree, length_trees
from goose_theory.regimespare import SpineModel, spare_tau
from goose_theory.topology import Topology

ACC = Acceptance.parse([0.9] * 4, [0.3, 0.12, 0.05], "exclusive", p_t_spine=[0.2, 0.05], p_t_chain=[0.4, 0.1])
SPINE_MODEL = SpineModel(p_s=(0.85, 0.7, 0.95), avail=(1.0, 0.6, 0.5, 0.9), end=(0.55, 0.15, 0.05))
FULL = (1.0, 1.0, 1.0)


def _all_trees(size: int, top_k: int = 3):
    """Every tree of ``size`` non-root slots (spine child only under the root or a spine node,
    transition ranks consecutive), as sets of root paths of (kind, rank) steps."""
    level = {frozenset({()})}
    for _ in range(size):
        nxt = set()
        for tree in level:
            for path in tree:
                kinds = [p[-1][0] for p in [path] if p] or ["root"]
                kids = [p for p in tree if len(p) == len(path) + 1 and p[:-1] == path]
                ranks = sum(1 for p in kids if p[-1][0] == "transition")
                if ranks < top_k:
                    nxt.add(tree | {path + (("transition", ranks),)})
                if kinds[0] != "transition" and not any(p[-1][0] == "spine" for p in kids):
                    nxt.add(tree | {path + (("spine", 0),)})
        level = nxt
    return level


def _topology(tree) -> Topology:
    paths = sorted(tree, key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(paths)}
    return Topology.from_nodes([(-1, "root", 0)] + [(index[p[:-1]], p[-1][0], p[-1][1]) for p in paths[1:]])


@pytest.mark.parametrize("length", [1, 2, 3])
def test_each_length_tree_is_the_brute_force_optimum(length):
    budget = 4
    model = known_length(SPINE_MODEL, length)
    best = max(spare_tau(_topology(t), ACC, model, FULL, budget)[0] for t in _all_trees(budget))
    got = length_tree(ACC, SPINE_MODEL, FULL, budget=budget, length=length, top_k=3)
    assert spare_tau(got, ACC, model, FULL, budget)[0] == pytest.approx(best, abs=1e-12)
    assert got.spine_length <= length


def test_the_mixture_over_lengths_is_the_spare_price_of_a_random_length():
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0),
                                (2, "spine", 0), (2, "transition", 0), (1, "transition", 0)])
    fill = (0.9, 0.8, 0.7)
    mixed = length_tau([tree] * 3, ACC, SPINE_MODEL, fill, budget=5)
    assert mixed == pytest.approx(spare_tau(tree, ACC, SPINE_MODEL, fill, 5), rel=1e-12)


def test_length_trees_use_the_budget_and_one_tree_per_length():
    trees = length_trees(ACC, SPINE_MODEL, (0.9, 0.8, 0.7), budget=5, max_spine=4)
    assert len(trees) == 4  # L = 1..min(budget, max_spine)
    for length, tree in enumerate(trees, start=1):
        assert tree.spine_length <= length and 5 <= tree.budget <= 10
    full = length_trees(ACC, SPINE_MODEL, FULL, budget=5)
    assert [t.budget for t in full] == [5] * 5  # every slot has a candidate: no spare slots past the budget given
    lower = length_trees(ACC, SPINE_MODEL, FULL, budget=5, scale=0.2)
    assert sum(t.spine_length for t in lower) < sum(t.spine_length for t in full)
    with pytest.raises(ValueError, match="no match"):
        length_tau(trees, ACC, SpineModel((0.9,), (0.0,), (0.5,)), FULL, budget=5)


def test_length_trees_are_the_same_built_side_by_side_or_one_at_a_time():
    # length_trees builds the lengths on numba's thread count; each must still be its own
    # length_tree, in the order of L, whatever that count.
    fill = (0.9, 0.8, 0.7)
    one_by_one = tuple(length_tree(ACC, SPINE_MODEL, fill, budget=6, length=L) for L in range(1, 7))
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            assert length_trees(ACC, SPINE_MODEL, fill, budget=6) == one_by_one
    finally:
        numba.set_num_threads(before)
