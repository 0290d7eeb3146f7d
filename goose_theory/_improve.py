"""Local improvement of a tree by leaf moves (numba): the second stage of ``optimal`` under the
independent model.

Under the independent model a node's effective probability depends on which earlier siblings
exist (qeff(c) = q(c) * prod over earlier siblings (1 - q)), so the best B-node tree is not
simply the B best candidates. Starting from the best-first tree, each round tries every move
"take leaf L out, put a node in frontier slot F" (F's parent in the tree, F not in it, F a
spine child or a transition rank up to one past the largest present rank) and applies the one
that raises the exact E[tau] most; it stops when no move gains more than a relative 1e-12.

Each move is scored exactly, without rebuilding the tree: with L removed, one forward pass gives
reach(v) and qeff(v), one backward pass gives C(v) = 1 + sum_c qeff(c) C(c) (the expected
number of accepted nodes in v's subtree once v is accepted), and inserting F under P changes
E[tau] by reach(P) * q(F) * (prod_{earlier siblings} (1 - q) - sum_{later siblings} qeff C),
since F's later siblings (and their subtrees) are scaled by 1 - q(F). Cost per round:
O(leaves * n * top_k).
"""
from __future__ import annotations

import numpy as np

from ._numba import jit


@jit
def _bfs_order(spc, trc, order):
    """Nodes reachable from the root in BFS and priority order; returns their count."""
    order[0] = 0
    head, tail = 0, 1
    while head < tail:
        v = order[head]; head += 1
        if spc[v] >= 0:
            order[tail] = spc[v]; tail += 1
        for r in range(trc.shape[1]):
            if trc[v, r] >= 0:
                order[tail] = trc[v, r]; tail += 1
    return tail


@jit
def _evaluate(order, cnt, spc, trc, qn, removed, independent, reach, qe, cont):
    """E[tau] of the tree without leaf ``removed``; fills reach, qe (qeff) and cont (C)."""
    reach[0] = 1.0
    expected = 1.0
    for h in range(cnt):
        v = order[h]
        if v == removed:
            continue
        survive = 1.0
        for j in range(-1, trc.shape[1]):
            c = spc[v] if j < 0 else trc[v, j]
            if c < 0 or c == removed:
                continue
            qe[c] = qn[c] * survive if independent else qn[c]
            if independent:
                survive *= 1.0 - qn[c]
            reach[c] = reach[v] * qe[c]
            expected += reach[c]
    for h in range(cnt - 1, -1, -1):
        v = order[h]
        total = 1.0
        for j in range(-1, trc.shape[1]):
            c = spc[v] if j < 0 else trc[v, j]
            if c >= 0 and c != removed:
                total += qe[c] * cont[c]
        cont[v] = total
    return expected


@jit
def _best_slot(order, cnt, kind, dep, spc, trc, qn, p_s, p_t, limits, independent, removed,
               reach, qe, cont):
    """The frontier slot whose insertion gains most; returns (gain, parent, source, rank)."""
    max_depth, max_spine, grow_spine = limits[0], limits[1], limits[2]
    best, best_p, best_s, best_r = -1.0, -1, 0, 0
    for h in range(cnt):
        p = order[h]
        if p == removed:
            continue
        d = dep[p]
        spine_ok = grow_spine == 1 and kind[p] != 2 and d + 1 <= max_spine
        ncap = trc.shape[1] if d + 1 <= max_depth else 0
        total, qsum, maxr = 0.0, 0.0, -1
        for j in range(-1, ncap):
            c = spc[p] if j < 0 else trc[p, j]
            if c >= 0 and c != removed:
                total += qe[c] * cont[c]
                qsum += qn[c]
                if j >= 0:
                    maxr = j
        survive, consumed = 1.0, 0.0
        for j in range(-1, min(maxr + 2, ncap)):
            c = spc[p] if j < 0 else trc[p, j]
            if c >= 0 and c != removed:
                survive *= 1.0 - qn[c]
                consumed += qe[c] * cont[c]
                continue
            if j < 0 and not spine_ok:
                continue
            q = p_s[min(d + 1, p_s.shape[0]) - 1] if j < 0 else p_t[min(j, p_t.shape[0] - 1)]
            if independent:
                gain = reach[p] * q * (survive - (total - consumed))
            elif qsum + q <= 1.0 + 1e-9:
                gain = reach[p] * q
            else:
                continue
            if gain > best:
                best, best_p, best_s, best_r = gain, p, 1 if j < 0 else 2, max(j, 0)
    return best, best_p, best_s, best_r


@jit
def _is_leaf(v, spc, trc):
    if spc[v] >= 0:
        return False
    for r in range(trc.shape[1]):
        if trc[v, r] >= 0:
            return False
    return True


@jit
def improve_kernel(par, kind, rank, dep, qn, spc, trc, p_s, p_t, limits, independent, max_moves, tol):
    """Apply best leaf moves in place until none gains > ``tol`` (relative); returns the
    number of moves. ``limits`` = (max_depth, max_spine, grow_spine as 0/1)."""
    n = par.shape[0]
    order = np.empty(n, np.int64)
    reach, qe, cont = np.zeros(n), np.zeros(n), np.zeros(n)
    moves = 0
    while moves < max_moves:
        cnt = _bfs_order(spc, trc, order)
        base = _evaluate(order, cnt, spc, trc, qn, -1, independent, reach, qe, cont)
        best, best_l, best_p, best_s, best_r = base * (1.0 + tol), -1, -1, 0, 0
        for leaf in range(1, n):
            if not _is_leaf(leaf, spc, trc):
                continue
            without = _evaluate(order, cnt, spc, trc, qn, leaf, independent, reach, qe, cont)
            gain, p, s, r = _best_slot(order, cnt, kind, dep, spc, trc, qn, p_s, p_t, limits,
                                       independent, leaf, reach, qe, cont)
            if p >= 0 and without + gain > best:
                best, best_l, best_p, best_s, best_r = without + gain, leaf, p, s, r
        if best_l < 0:
            break
        old = par[best_l]
        if kind[best_l] == 1:
            spc[old] = -1
        else:
            trc[old, rank[best_l]] = -1
        par[best_l], kind[best_l], rank[best_l] = best_p, best_s, best_r
        dep[best_l] = dep[best_p] + 1
        if best_s == 1:
            spc[best_p] = best_l
            qn[best_l] = p_s[min(dep[best_l], p_s.shape[0]) - 1]
        else:
            trc[best_p, best_r] = best_l
            qn[best_l] = p_t[min(best_r, p_t.shape[0] - 1)]
        moves += 1
    return moves


def improve_tree(builder, *, grow_spine: bool = True, max_moves: int | None = None):
    """Run :func:`improve_kernel` on a :class:`~goose_theory.candidate.TreeBuilder`'s tree;
    returns ``(new builder with nodes in BFS/priority order, moves applied)``."""
    from .candidate import TreeBuilder  # local import: candidate does not need this module

    cand = builder.candidate
    acc = cand.acceptance
    n = len(builder)
    par = np.asarray(builder.parent, np.int64)
    kind = np.asarray(builder.source, np.int64)
    rank = np.asarray(builder.rank, np.int64)
    dep = np.asarray(builder.depth, np.int64)
    width = max(cand.top_k, int(rank.max()) + 1 if n > 1 else 1)
    spc = np.full(n, -1, np.int64)
    trc = np.full((n, width), -1, np.int64)
    qn = np.ones(n)
    for v in range(1, n):
        if kind[v] == 1:
            spc[par[v]] = v; qn[v] = acc.spine_q(int(dep[v]))
        else:
            trc[par[v], rank[v]] = v; qn[v] = acc.transition_q(int(rank[v]))
    limits = np.array([cand.max_depth, cand.max_spine, int(grow_spine and cand.spine)], np.int64)
    moves = improve_kernel(par, kind, rank, dep, qn, spc, trc, acc.p_s_array, acc.p_t_array, limits,
                           acc.independent, 10 * n if max_moves is None else max_moves, 1e-12)
    order = np.empty(n, np.int64)
    _bfs_order(spc, trc, order)
    new_index = {int(v): i for i, v in enumerate(order)}
    out = TreeBuilder(cand)
    for v in order[1:]:
        out.add(new_index[int(par[v])], int(kind[v]), int(rank[v]))
    out.notes = dict(builder.notes)
    return out, int(moves)
