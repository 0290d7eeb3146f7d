"""The fill order of a tree on arrays, for the regime pricers' numba kernels.

The runtime fills a file's slots breadth-first, each node's children spine first, then by rank
(ties in index order), up to the budget; :func:`_fill_order` is that order
(:func:`goose_theory.regimefill.bfs_order` on arrays). The spare-slot growth
(:mod:`goose_theory._spare_kernels`) prices a new transition leaf from the current tree's
recorded fills, which needs where the leaf falls in that order: :func:`_blocks` gives where each
node's block of children starts, :func:`_leaf_position` the leaf's place inside its parent's block
(also between two siblings, where the parent holds ranks on both sides of a gap).
"""
from __future__ import annotations

import numpy as np

from ._numba import jit
from .topology import SPINE


@jit
def _fill_order(parent, kind, rank):
    """:func:`goose_theory.regimefill.bfs_order` on arrays (every simulated price starts from it):
    breadth-first, each node's children spine first, then by rank, ties in index order."""
    n = parent.shape[0]
    start = np.zeros(n + 1, dtype=np.int64)
    for v in range(1, n):
        start[parent[v] + 1] += 1
    for v in range(n):
        start[v + 1] += start[v]
    kids = np.empty(max(n - 1, 0), dtype=np.int64)
    filled = start[:n].copy()
    for v in range(1, n):  # in index order, so an insertion sort below keeps ties in index order
        kids[filled[parent[v]]] = v
        filled[parent[v]] += 1
    for v in range(n):
        for i in range(start[v] + 1, start[v + 1]):
            c = kids[i]
            key = (0 if kind[c] == SPINE else 1, rank[c])
            j = i - 1
            while j >= start[v] and (0 if kind[kids[j]] == SPINE else 1, rank[kids[j]]) > key:
                kids[j + 1] = kids[j]
                j -= 1
            kids[j + 1] = c
    out = np.empty(max(n - 1, 0), dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    queue[0], head, tail, m = 0, 0, 1, 0
    while head < tail:
        v = queue[head]
        head += 1
        for i in range(start[v], start[v + 1]):
            out[m] = kids[i]
            queue[tail] = kids[i]
            m += 1
            tail += 1
    return out


@jit
def _blocks(n, tree, order):
    """Per node, the fill-order position where its block of children starts (breadth-first:
    the root's children first, then each node's in the order the nodes were filled)."""
    parent = tree[0]
    kids = np.zeros(n, dtype=np.int64)
    for c in range(1, n):
        kids[parent[c]] += 1
    block = np.zeros(n, dtype=np.int64)
    start = kids[0]
    for j in range(order.shape[0]):
        block[order[j]] = start
        start += kids[order[j]]
    return block


@jit
def _leaf_position(v, r, n, tree, block):
    """Where a new transition of rank ``r`` under ``v`` (node ``n``) falls in the fill order of
    ``tree``'s first ``n`` nodes plus it: after ``v``'s children that precede it (spine first,
    then ranks up to ``r``; it has the highest index), inside ``v``'s block of children, which
    starts at ``block[v]`` (:func:`_blocks`)."""
    parent, kind, rank = tree[0], tree[1], tree[2]
    before = 0
    for c in range(1, n):
        if parent[c] == v and (kind[c] == SPINE or rank[c] <= r):
            before += 1
    return block[v] + before
