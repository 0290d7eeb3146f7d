"""The regime-pricing kernels: the fill order against the reference, a leaf priced from the
recorded fills against a new simulation (bit for bit), and the numba growth against the Python
growth it replaced."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from goose_theory._spare_kernels import (_blocks, _fill_order, _kernel, _leaf_position, _leaf_rates, _leaf_tau,
                                         _price, _record, _trial_tau)
from goose_theory.acceptance import Acceptance
from goose_theory.regimespare import SpineModel, _arrays, grow_spare
from goose_theory.topology import SPINE, TRANSITION, Topology

from conftest import random_topology

ACC = Acceptance.parse([0.7, 0.85], [0.15, 0.03, 0.01, 0.0], p_t_spine=[0.1, 0.03, 0.0],
                       p_t_chain=[0.4, 0.1, 0.02, 0.0])


def bfs_order(parent, kind, rank):
    """The reference fill order: breadth-first, each node's children spine first, then by rank,
    ties in index order (Python's sort is stable)."""
    kids = [[] for _ in parent]
    for v in range(1, len(parent)):
        kids[parent[v]].append(v)
    out, queue, head = [], [0], 0
    while head < len(queue):
        v = queue[head]; head += 1
        for c in sorted(kids[v], key=lambda c: (kind[c] != SPINE, rank[c])):
            out.append(c); queue.append(c)
    return np.asarray(out, dtype=np.int64)


def test_the_pricers_fill_order_is_bfs_order():
    # the pricer's array version against the reference, on random trees with repeated ranks
    rng = np.random.default_rng(3)
    for n in [1, 2, 3, 10, 40, 160] * 5:
        parent = [-1] + [int(rng.integers(0, v)) for v in range(1, n)]
        kind = [0] + [int(k) for k in rng.integers(1, 3, n - 1)]
        rank = [0] + [int(r) for r in rng.integers(0, 4, n - 1)]
        got = _fill_order(np.asarray(parent, np.int64), np.asarray(kind, np.int64), np.asarray(rank, np.int64))
        assert got.tolist() == bfs_order(parent, kind, rank).tolist()


def _reference_grow(topology, acc, spine, fill, budget, max_slots, top_k, draws=64, seed=0, tol=1e-4):
    """grow_spare as first written (1 Dec): every trial tree's arrays rebuilt in Python and priced
    by the same kernel; the numba growth must pick the same slots."""
    pmf = spine.length_pmf()
    keep = np.flatnonzero(pmf > 1e-9)
    lengths, weights = keep.astype(np.int64), pmf[keep] / pmf[keep].sum()
    u = np.random.default_rng(seed).random((1 if all(f >= 1.0 for f in fill) else draws, max_slots + 1))

    def price(parent, kind, rank):
        n = len(parent)
        depth = np.zeros(n, dtype=np.int64)
        q_mid, q_end, q_spine, exist = np.ones(n), np.ones(n), np.ones(n), np.ones(n)
        for v in range(1, n):
            p = parent[v]
            depth[v] = depth[p] + 1
            if kind[v] == SPINE:
                q_spine[v] = spine.p_s[min(depth[v], len(spine.p_s)) - 1]
                continue
            f = fill[kind[p]]
            exist[v] = f
            q_mid[v] = min(acc.transition_q(rank[v], kind[p]) / f, 1.0) if f > 0 else 0.0
            q_end[v] = min(spine.end[min(rank[v], len(spine.end) - 1)] / fill[SPINE], 1.0) if fill[SPINE] > 0 else 0.0
        return _kernel(bfs_order(parent, kind, rank), np.asarray(parent, np.int64), np.asarray(kind, np.int64), depth,
                       q_mid, q_end, q_spine, exist, lengths, weights, u[:, :n], budget)[0]

    parent, kind, rank = list(topology.parent), list(topology.source), list(topology.rank)
    best = price(parent, kind, rank)
    while len(parent) - 1 < max_slots:
        depth = [0] * len(parent)
        for v in range(1, len(parent)):
            depth[v] = depth[parent[v]] + 1
        trials = []
        for v in range(len(parent)):
            ranks = [rank[c] for c in range(1, len(parent)) if parent[c] == v and kind[c] == TRANSITION]
            if depth[v] < topology.max_depth and len(ranks) < top_k:
                trials.append((v, TRANSITION, len(ranks)))
            if kind[v] != TRANSITION and depth[v] < topology.max_spine and not any(
                    parent[c] == v and kind[c] == SPINE for c in range(1, len(parent))):
                trials.append((v, SPINE, 0))
        scored = [(price(parent + [v], kind + [k], rank + [r]), (v, k, r)) for v, k, r in trials]
        if not scored:
            break
        tau, (v, k, r) = max(scored, key=lambda x: x[0])
        if tau <= best + tol:
            break
        best = tau
        parent.append(v); kind.append(k); rank.append(r)
    return parent, kind, rank


_rate = st.floats(0.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(p_s=st.lists(_rate, min_size=1, max_size=3), avail=st.lists(_rate, min_size=1, max_size=4),
       end=st.lists(_rate, min_size=1, max_size=3), p_t=st.lists(st.floats(0.0, 0.3), min_size=1, max_size=3),
       fill=st.tuples(st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.floats(0.3, 1.0)),
       budget=st.integers(1, 6), top_k=st.integers(1, 4), max_depth=st.integers(1, 4), max_spine=st.integers(1, 4),
       chain=st.integers(0, 3), seed=st.integers(0, 3))
def test_grow_spare_picks_the_slots_of_the_python_reference(p_s, avail, end, p_t, fill, budget, top_k, max_depth,
                                                            max_spine, chain, seed):
    acc = Acceptance.parse(0.5, p_t)
    spine = SpineModel(tuple(p_s), (1.0, *avail), tuple(end))
    chain = min(chain, max_spine, 2 * budget)
    base = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(chain)],
                               max_depth=max_depth, max_spine=max_spine)
    grown = grow_spare(base, acc, spine, fill, budget, max_slots=2 * budget, top_k=top_k, draws=16, seed=seed)
    want = _reference_grow(base, acc, spine, fill, budget, 2 * budget, top_k, draws=16, seed=seed)
    assert (list(grown.parent), list(grown.source), list(grown.rank)) == want


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), budget=st.integers(1, 12), full=st.booleans(),
       lengths=st.integers(1, 4))
def test_a_leaf_priced_from_the_record_is_the_simulated_price_bit_for_bit(seed, n, budget, full, lengths):
    # grow_spare prices a transition trial from the current tree's recorded fills; it must be the
    # number a new simulation of the tree with the leaf gives, exactly (the pick compares them)
    rng = np.random.default_rng(seed)
    topo = random_topology(rng, n, max_depth=20)
    parent, kind = topo.parent, topo.source
    spine = SpineModel(tuple(rng.uniform(0.2, 1.0, 2)), (1.0, *rng.uniform(0.2, 1.0, lengths)), tuple(rng.uniform(0, 1, 3)))
    fill = (1.0, 1.0, 1.0) if full else tuple(rng.uniform(0.3, 1.0, 3))
    tree, model, draws = _arrays(topo, ACC, spine, fill, n + 1, 10, 16, seed)
    record = _record(draws[0].shape[0] * draws[2].shape[0], n + 1)
    _price(n, tree, draws, budget, record)
    for v in range(n):
        r = sum(1 for c in range(1, n) if parent[c] == v and kind[c] == TRANSITION)
        tree[0][n], tree[1][n], tree[2][n] = v, TRANSITION, r
        pos = int(np.flatnonzero(_fill_order(tree[0], tree[1], tree[2]) == n)[0])
        block = _blocks(n, tree, _fill_order(tree[0][:n], tree[1][:n], tree[2][:n]))
        assert _leaf_position(v, r, n, tree, block) == pos
        for other in range(r):  # a rank below a sibling's (a hand-made file's gaps): among them
            tree[2][n] = other
            at = int(np.flatnonzero(_fill_order(tree[0], tree[1], tree[2]) == n)[0])
            assert _leaf_position(v, other, n, tree, block) == at
        tree[2][n] = r
        rates = _leaf_rates(v, r, tree, model)
        fast = _leaf_tau(pos, v, rates, tree[1][v], record, draws[1], draws[2], n, budget)
        assert fast == _trial_tau(n, tree, v, TRANSITION, r, model, draws, budget)
