"""The fill order on arrays against a plain-Python breadth-first reference."""
from __future__ import annotations

import numpy as np

from goose_theory._fill_kernels import _fill_order
from goose_theory.topology import SPINE


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
