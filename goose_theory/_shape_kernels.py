"""Numba kernels over many recorded tree shapes stored back to back (CSR-style arrays).

Shape s owns nodes ``node_at[s]:node_at[s + 1]`` of the flat parent/source/rank/depth arrays
(parents local to the shape), ``node_at[s] + s`` .. ``node_at[s + 1] + s`` of ``child_start``
(n + 1 entries, local offsets) and ``child_at[s]:child_at[s + 1]`` of ``child_index`` (n - 1
entries). Each shape is evaluated by the very kernels that evaluate one
:class:`goose_theory.topology.Topology` (:mod:`goose_theory.yields`, :mod:`goose_theory.bound`),
so the batched numbers equal the per-tree ones to the last bit.
"""
from __future__ import annotations

import numpy as np

from ._numba import jit
from .bound import LBAR_TOPOLOGY, _bound_terms
from .topology import MAX_RANK, ROOT, SPINE, TRANSITION
from .yields import _effective_q, _node_q, _reach_and_pmf, _variance


@jit
def _child_key(source, rank, c):
    """Priority order of siblings: the spine child first, then transition children by rank."""
    return (0 if source[c] == SPINE else MAX_RANK + 1) + rank[c]


@jit
def _prepare_one(parent, source, rank, depth, child_start, child_index):
    """Depths and children (priority order) of one shape; False where the shape breaks the
    topology contract (:func:`goose_theory.topology._validate` with max_depth = max_spine = its
    own depth, which no node can exceed)."""
    n = parent.shape[0]
    if n == 0 or parent[0] != -1 or source[0] != ROOT:
        return False
    depth[0] = 0
    for i in range(1, n):
        p, s, r = parent[i], source[i], rank[i]
        if p < 0 or p >= i or (s != SPINE and s != TRANSITION) or r < 0 or r > MAX_RANK:
            return False
        if s == SPINE and (r != 0 or (p != 0 and source[p] != SPINE)):
            return False
        depth[i] = depth[p] + 1
    child_start[:] = 0
    for i in range(1, n):
        child_start[parent[i] + 1] += 1
    for v in range(n):
        child_start[v + 1] += child_start[v]
    fill = child_start[:n].copy()
    for i in range(1, n):  # ascending, so equal keys keep index order (as a stable sort)
        child_index[fill[parent[i]]] = i
        fill[parent[i]] += 1
    for v in range(n):
        for k in range(child_start[v] + 1, child_start[v + 1]):  # insertion sort: a few children
            c, j = child_index[k], k
            while j > child_start[v] and _child_key(source, rank, child_index[j - 1]) > _child_key(source, rank, c):
                child_index[j] = child_index[j - 1]
                j -= 1
            child_index[j] = c
        for k in range(child_start[v] + 1, child_start[v + 1]):  # a second spine child, a repeated rank
            if _child_key(source, rank, child_index[k]) == _child_key(source, rank, child_index[k - 1]):
                return False
    return True


@jit
def _prepare(node_at, child_at, parent, source, rank, depth, child_start, child_index, valid):
    for s in range(node_at.shape[0] - 1):
        a, b = node_at[s], node_at[s + 1]
        valid[s] = _prepare_one(parent[a:b], source[a:b], rank[a:b], depth[a:b], child_start[a + s:b + s + 1],
                                child_index[child_at[s]:child_at[s + 1]])


@jit
def _evaluate(node_at, child_at, parent, source, rank, depth, child_start, child_index, valid,
              p_s, p_t, independent, tolerance, expected, variance, bound, fell_back):
    """E[tau], Var[tau] and the paper's bound (lbar from the topology) of every valid shape;
    where the exclusive model is infeasible on a shape (child q sum > 1 + tolerance), that shape
    is evaluated under the independent model and flagged (the per-tree fallback rule)."""
    for s in range(node_at.shape[0] - 1):
        if not valid[s]:
            expected[s] = variance[s] = bound[s] = np.nan
            fell_back[s] = False
            continue
        a, b = node_at[s], node_at[s + 1]
        n = b - a
        par, src, dep = parent[a:b], source[a:b], depth[a:b]
        start, index = child_start[a + s:b + s + 1], child_index[child_at[s]:child_at[s + 1]]
        q, qeff, reach = np.empty(n), np.empty(n), np.empty(n)
        pmf = np.zeros(dep.max() + 2)
        _node_q(par, src, rank[a:b], dep, p_s, p_t, q)
        _, total = _effective_q(q, start, index, independent, qeff)
        fell_back[s] = not independent and total > 1.0 + tolerance
        if fell_back[s]:
            _effective_q(q, start, index, True, qeff)
        expected[s] = _reach_and_pmf(par, dep, qeff, start, index, reach, pmf)
        variance[s] = _variance(pmf, expected[s])
        bound[s] = _bound_terms(par, src, q, qeff, start, index, LBAR_TOPOLOGY, 0.0, np.zeros(n), np.zeros(n))[0]
