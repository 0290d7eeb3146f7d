"""The numba kernels of :mod:`goose_theory.regimespare`: the breadth-first fill a matched tree's
price simulates, and the greedy growth of spare slots (one kernel per tree).

A tree is eight arrays (``tree``: parent, kind, rank, depth, and per node the mid-spine and
end-of-spine transition rates, the spine rate and the fill rate), of room for the most slots a
growth may add; ``model`` is (p_t by parent kind and rank, p_s by depth, end-of-spine rates by rank,
fill by parent kind); ``draws`` is (match lengths, their weights, uniform fill draws per node).

The growth prices every trial slot of a step. A transition leaf changes nothing before it in the
fill order and nothing after it but the budget's cut, so :func:`_leaf_tau` prices it from the
current tree's recorded fills with the same sums in the same order as a new simulation, bit for
bit (``tests/test__spare_kernels.py`` checks it); a spine trial changes the rates of its parent's
later transitions and is simulated anew; the first of equal prices wins.

The growth is serial: a step's trials were once priced in a ``prange``, but one growth makes
hundreds of small parallel regions, and with another process on the 2 cores every region waits
for a descheduled thread. The callers run whole growths side by side instead
(:func:`goose_theory.regimelength.length_trees`), which the ``nogil`` kernels allow: the regime
export of ``traces/*.parquet`` took 8.3-8.5 s against 11.6-12.8 s quiet, and 10.3 s against 25.7 s
beside one busy loop (``docs/bench-theory.md``, "Step 2 undone").
"""
from __future__ import annotations

import numpy as np

from ._fill_kernels import _blocks, _fill_order, _leaf_position
from ._numba import jit
from .topology import SPINE, TRANSITION


@jit
def _kernel(order, parent, kind, depth, q_mid, q_end, q_spine, exist, lengths, weights, u, budget, record=None):
    """sum_L w(L) mean_draws (E[tau], nodes placed) of the breadth-first fill (module docstring).
    ``record`` (from :func:`_record`), if given, keeps each (L, draw)'s fill: what
    :func:`_leaf_tau` prices a new transition leaf from without a simulation."""
    n = parent.shape[0]
    placed = np.zeros(n, dtype=np.bool_)
    spined = np.zeros(n, dtype=np.bool_)  # the node got a placed spine child
    reach = np.zeros(n)
    tau_sum, node_sum = 0.0, 0.0
    for i in range(lengths.shape[0]):
        for s in range(u.shape[0]):
            tau, count = _fill_draw(order, parent, kind, depth, q_mid, q_end, q_spine, exist, lengths[i], u[s], budget,
                                    placed, spined, reach, record, i * u.shape[0] + s)
            tau_sum += weights[i] * tau / u.shape[0]
            node_sum += weights[i] * count / u.shape[0]
    return tau_sum, node_sum


@jit
def _fill_draw(order, parent, kind, depth, q_mid, q_end, q_spine, exist, L, u_row, budget, placed, spined, reach,
               record, d):
    """One (spine length ``L``, draw ``u_row``) fill in ``order`` up to ``budget`` nodes: (tau, nodes
    placed); ``placed``, ``spined`` and ``reach`` are scratch arrays it resets; draw ``d`` of
    ``record``, if given, keeps the fill."""
    m = order.shape[0]
    placed[:] = False
    spined[:] = False
    placed[0] = True
    reach[0] = 1.0
    count, tau, j = 0, 1.0, 0
    while j < m:
        if record is not None:
            record[0][d, j] = count  # nodes placed before order position j
        if count >= budget:
            break
        v = order[j]
        j += 1
        p = parent[v]
        if not placed[p]:
            continue
        if kind[v] == SPINE:
            if depth[v] > L:
                continue
            q = q_spine[v]
            spined[p] = True
        else:
            if u_row[v] >= exist[v]:
                continue
            q = q_end[v] if (kind[p] == SPINE and not spined[p]) else q_mid[v]
        placed[v] = True
        reach[v] = reach[p] * q
        if record is not None:
            record[1][d, count] = reach[v]  # the reach of the count-th node placed
        count += 1
        tau += reach[v]
        if record is not None:
            record[2][d, count] = tau  # tau after count nodes
    if record is not None:
        n = parent.shape[0]
        record[0][d, j:m + 1] = count
        record[2][d, 0] = 1.0
        record[3][d, :n] = placed
        record[4][d, :n] = spined
        record[5][d, :n] = reach
        record[6][d] = count
    return tau, count


@jit
def _record(n_draws, size):
    """Arrays for :func:`_kernel`'s record of trees of up to ``size`` nodes: per (L, draw) the
    nodes placed before each order position, the placed nodes' reaches in order, tau after each,
    every node's placed / got-a-spine-child / reach, and the count placed."""
    return (np.zeros((n_draws, size + 1), dtype=np.int64), np.zeros((n_draws, size + 1)),
            np.zeros((n_draws, size + 1)), np.zeros((n_draws, size), dtype=np.bool_),
            np.zeros((n_draws, size), dtype=np.bool_), np.zeros((n_draws, size)),
            np.zeros(n_draws, dtype=np.int64))


@jit
def _leaf_tau(pos, v, rates, parent_kind, record, weights, u, c, budget):
    """E[tau] of the recorded tree plus a transition leaf ``c`` under ``v`` at fill-order position
    ``pos``, bit for bit what :func:`_kernel` gives it: in each (L, draw) the leaf is placed if
    ``v`` was, it exists and the budget is not used up before it; then tau is the recorded tau
    before it, plus its reach, plus the later nodes' recorded reaches (the same sums in the same
    order) up to the budget; else the recorded tau."""
    before, later, after, placed, spined, reach, count = record
    q_mid, q_end, exist = rates
    tau_sum = 0.0
    for i in range(weights.shape[0]):
        for s in range(u.shape[0]):
            d = i * u.shape[0] + s
            k = before[d, pos]
            if placed[d, v] and u[s, c] < exist and k < budget:
                q = q_end if (parent_kind == SPINE and not spined[d, v]) else q_mid
                tau = after[d, k] + reach[d, v] * q
                placed_now, nxt = k + 1, k
                while placed_now < budget and nxt < count[d]:
                    tau += later[d, nxt]
                    nxt += 1
                    placed_now += 1
            else:
                tau = after[d, count[d]]
            tau_sum += weights[i] * tau / u.shape[0]
    return tau_sum


@jit
def _leaf_rates(p, r, tree, model):
    """(q_mid, q_end, exist) of a transition of rank ``r`` under node ``p`` (module docstring)."""
    kind = tree[1]
    q_t, _, end, fill = model
    f = fill[kind[p]]
    q_mid = min(q_t[kind[p], r] / f, 1.0) if f > 0 else 0.0
    q_end = min(end[min(r, end.shape[0] - 1)] / fill[SPINE], 1.0) if fill[SPINE] > 0 else 0.0
    return q_mid, q_end, f


@jit
def _set_slot(v, p, k, r, tree, model):
    """Node ``v`` (parent ``p``, kind ``k``, rank ``r``) of ``tree``; its entries depend only on
    those and its parent's, so a trial slot is one more entry (module docstring's rates)."""
    parent, kind, rank, depth, q_mid, q_end, q_spine, exist = tree
    p_s = model[1]
    parent[v], kind[v], rank[v] = p, k, r
    depth[v] = depth[p] + 1
    q_mid[v], q_end[v], q_spine[v], exist[v] = 1.0, 1.0, 1.0, 1.0
    if k == SPINE:
        q_spine[v] = p_s[min(depth[v], p_s.shape[0]) - 1]
        return
    q_mid[v], q_end[v], exist[v] = _leaf_rates(p, r, tree, model)


@jit
def _price(n, tree, draws, budget, record=None, order=None):
    """(E[tau], nodes placed) of ``tree``'s first ``n`` nodes (their fills kept in ``record``;
    ``order``: their fill order, if the caller has it)."""
    parent, kind, rank, depth, q_mid, q_end, q_spine, exist = tree
    lengths, weights, u = draws
    if order is None:
        order = _fill_order(parent[:n], kind[:n], rank[:n])
    return _kernel(order, parent[:n], kind[:n], depth[:n], q_mid[:n], q_end[:n], q_spine[:n], exist[:n],
                   lengths, weights, u[:, :n], budget, record)


@jit
def _trial_tau(n, tree, v, k, r, model, draws, budget):
    """E[tau] of ``tree``'s first ``n`` nodes plus the slot (parent ``v``, kind ``k``, rank ``r``),
    priced on copies of the arrays, so the current tree and its recorded fills stay as they are."""
    m = n + 1
    trial = (tree[0][:m].copy(), tree[1][:m].copy(), tree[2][:m].copy(), tree[3][:m].copy(),
             tree[4][:m].copy(), tree[5][:m].copy(), tree[6][:m].copy(), tree[7][:m].copy())
    _set_slot(n, v, k, r, trial, model)
    return _price(m, trial, draws, budget)[0]


@jit
def _lowest_free(taken, v, top_k):
    """The lowest rank below ``top_k`` that no transition child of ``v`` holds; ``top_k`` if none."""
    r = 0
    while r < top_k and taken[v, r]:
        r += 1
    return r


@jit
def _occupancy(n, tree, top_k):
    """Which slots of the first ``n`` nodes are filled: taken[v, r] (v has a transition child of
    rank r; ranks past ``top_k`` share the last column) and spined[v] (v has a spine child)."""
    parent, kind, rank = tree[0], tree[1], tree[2]
    size = parent.shape[0]
    taken = np.zeros((size, top_k + 1), dtype=np.bool_)
    spined = np.zeros(size, dtype=np.bool_)
    for v in range(1, n):
        if kind[v] == TRANSITION:
            taken[parent[v], min(rank[v], top_k)] = True
        else:
            spined[parent[v]] = True
    return taken, spined


@jit
def _list_trials(n, tree, taken, spined, max_depth, max_spine, top_k, slot_v, slot_k, slot_r):
    """One growth step's trials into the slot arrays, in node order: each node's lowest free rank
    (within ``max_depth``), then its spine child (within ``max_spine``); returns how many."""
    kind, depth = tree[1], tree[3]
    t = 0
    for v in range(n):
        free = _lowest_free(taken, v, top_k) if depth[v] < max_depth else top_k
        if free < top_k:
            slot_v[t], slot_k[t], slot_r[t] = v, TRANSITION, free
            t += 1
        if kind[v] != TRANSITION and depth[v] < max_spine and not spined[v]:
            slot_v[t], slot_k[t], slot_r[t] = v, SPINE, 0
            t += 1
    return t


@jit
def _grow(n, tree, model, draws, budget, max_depth, max_spine, top_k, tol):
    """:func:`grow_spare` on ``tree``'s first ``n`` nodes (its arrays have room for the most
    slots); returns the grown tree's node count. Trials in node order, each node's lowest free
    rank below ``top_k`` (the optimum may leave a rank out between two it keeps) before its spine
    child; the first of equal prices wins. A
    transition trial is priced from the current tree's recorded fills (:func:`_leaf_tau`), a
    spine trial, which changes the rates of its later siblings' subtrees, by a new simulation."""
    parent, kind, rank = tree[0], tree[1], tree[2]
    size = parent.shape[0]
    lengths, weights, u = draws
    taken, spined = _occupancy(n, tree, top_k)
    slot_v = np.zeros(2 * size, dtype=np.int64)  # one step's trials: parent, kind, rank, fill position
    slot_k = np.zeros(2 * size, dtype=np.int64)
    slot_r = np.zeros(2 * size, dtype=np.int64)
    slot_pos = np.zeros(2 * size, dtype=np.int64)
    record = _record(lengths.shape[0] * u.shape[0], size)
    order = _fill_order(parent[:n], kind[:n], rank[:n])
    best = _price(n, tree, draws, budget, record, order)[0]
    while n < size:
        t = _list_trials(n, tree, taken, spined, max_depth, max_spine, top_k, slot_v, slot_k, slot_r)
        if t == 0:
            break
        block = _blocks(n, tree, order)
        taus = np.empty(t)
        for i in range(t):
            if slot_k[i] == TRANSITION:
                slot_pos[i] = _leaf_position(slot_v[i], slot_r[i], n, tree, block)
                rates = _leaf_rates(slot_v[i], slot_r[i], tree, model)
                taus[i] = _leaf_tau(slot_pos[i], slot_v[i], rates, kind[slot_v[i]], record, weights, u, n, budget)
            else:
                taus[i] = _trial_tau(n, tree, slot_v[i], slot_k[i], slot_r[i], model, draws, budget)
        i = np.argmax(taus)  # the first of equal prices
        if taus[i] <= best + tol:
            break
        best = taus[i]
        _set_slot(n, slot_v[i], slot_k[i], slot_r[i], tree, model)
        if slot_k[i] == TRANSITION:
            taken[slot_v[i], slot_r[i]] = True
        else:
            spined[slot_v[i]] = True
        n += 1
        order = _fill_order(parent[:n], kind[:n], rank[:n])
        _price(n, tree, draws, budget, record, order)  # the new tree's fills, for the next step's trials
    return n
