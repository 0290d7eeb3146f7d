"""Tree builders in goose_runtime.trees: topology filling, chains, the harmonic split.
(The adaptive Goose tree and the static shapes: tests/test_goose.py.)"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goose_theory.topology import SPINE, Topology
from goose_runtime.adjacency import AdjacencyTable
from goose_runtime.goose import iso_topology
from goose_runtime.matcher import Match
from goose_runtime.trees import build_chain, build_from_topology, without
from tests.conftest import V, check_tree, full_table, random_topology


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 70), st.integers(0, 10**6), st.integers(0, 20))
def test_topology_fill_keeps_shape_when_everything_exists(n, seed, spine_len):
    topo = random_topology(np.random.default_rng(seed), n)
    chain = tuple(range(40, 40 + spine_len))
    tree = build_from_topology(topo, Match(chain, 3, 1, 1), full_table(seed), 1, 2)
    check_tree(tree)
    # every spine slot within the chain is kept with the chain's token at its depth
    for i in range(1, tree.n_nodes):
        if tree.source[i] == SPINE:
            assert tree.token[i] == chain[tree.depth[i] - 1] and tree.spine_pos[i] == tree.depth[i]
    if spine_len >= topo.spine_length:
        assert tree.n_spine == topo.spine_length
    assert tree.n_nodes <= topo.n_nodes


def test_transition_slot_takes_rank_and_drops_missing_or_duplicate():
    table = AdjacencyTable(V, top_k=3)
    table.update(np.array([1]), np.array([2]), np.array([[7, 8, 9]]), np.array([[3., 2., 1.]]))
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 2),
                                (0, "transition", 5), (2, "transition", 0)])
    tree = build_from_topology(topo, Match((7,), 3, 1, 1), table, 1, 2)
    # spine 7 placed; transition rank 0 is 7 too -> dropped with its child; rank 2 -> 9; rank 5 missing
    assert tree.token == [2, 7, 9] and tree.rank == [0, 0, 2]


def test_mixed_iso_puts_spine_at_rank0():
    table = full_table()
    topo = iso_topology(3, 20)
    chain = (50, 51, 52)
    tree = build_from_topology(topo, Match(chain, 3, 1, 1), table, 1, 2, mixed=True)
    check_tree(tree)
    spine = [tree.token[i] for i in range(tree.n_nodes) if tree.source[i] == SPINE]
    assert spine == list(chain)
    # the spine token takes rank 0 and the table's candidates (minus it) the other ranks, in order
    table_first = [t for t in table.lookup(1, 2)[0] if t != chain[0]][:2]
    assert [tree.token[v] for v in range(tree.n_nodes) if tree.parent[v] == 0] == [chain[0], *table_first]
    plain = build_from_topology(topo, Match(), table, 1, 2, mixed=True)
    assert plain.n_spine == 0 and plain.n_nodes == topo.n_nodes  # no match: same as iso


def test_build_chain_is_the_match_prefix_as_a_spine():
    # the direct test of build_chain (test_goose's bypass test reaches it only through build_goose)
    tokens = (10, 11, 12, 13)
    m = Match(tokens, 3, 1, 1)
    for length, n in ((None, 4), (2, 2), (0, 0), (9, 4)):
        tree = build_chain(5, m, length)
        check_tree(tree)
        assert tree.token == [5, *tokens[:n]] and tree.parent == list(range(-1, n)), length
        assert tree.n_spine == n and tree.spine_pos == tree.depth == list(range(n + 1))
        assert all(math.isnan(s) for s in tree.score) and tree.match is m and not tree.bypass


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10**6), st.lists(st.integers(1, 39), max_size=4))
def test_without_drops_the_nodes_and_their_subtrees_and_keeps_the_rest_in_order(n, seed, drop):
    tree = build_from_topology(random_topology(np.random.default_rng(seed), n), Match(tuple(range(40, 60)), 3, 1, 1),
                               full_table(seed), 1, 2)
    drop = [d for d in drop if d < tree.n_nodes]
    small, kept = without(tree, drop)
    check_tree(small)

    def gone(node):  # the node or an ancestor was dropped
        return node > 0 and (node in drop or gone(tree.parent[node]))
    assert kept == [v for v in range(tree.n_nodes) if not gone(v)]
    for new, old in enumerate(kept):
        assert (small.token[new], small.source[new], small.rank[new], small.spine_pos[new], small.depth[new]) == \
               (tree.token[old], tree.source[old], tree.rank[old], tree.spine_pos[old], tree.depth[old])
        assert new == 0 or kept[small.parent[new]] == tree.parent[old]
    assert small.match == tree.match


def test_without_keeps_the_root():
    with pytest.raises(ValueError, match="cannot drop node 0 of a 3-node tree"):
        without(build_chain(5, Match((6, 7), 3, 1, 1)), [0])
