"""Exact best tree by dynamic programming over the candidate tree's node *types* (numba).

In the candidate tree a node's subtree depends only on its type: the root / a spine node at
depth d, or a transition node at depth d. Given v is reached, the expected number of accepted
nodes below v, with children c_1, c_2, ... in priority order, is

    independent:  q_1 C_1 + (1 - q_1) (q_2 C_2 + (1 - q_2) (...))
    exclusive:    q_1 C_1 + q_2 C_2 + ...

where C_c = 1 + (the same quantity for c's subtree). So a suffix recursion over the children,
with a budget, is exact (a knapsack over the children, one table per type):

    G_j[b] = max( G_{j+1}[b],  max_{1<=s<=b} q_j (1 + F_{c_j}[s-1]) + f_j G_{j+1}[b-s] )

with f_j = 1 - q_j (independent) or 1 (exclusive), F_type[b] = G_1[b] the best value with
exactly b nodes below a node of that type (-inf if impossible) and G_end = [0, -inf, ...].
Cost O(types * children * B^2) with B capped by each type's candidate subtree size.
This is how ``optimal`` is exact under the independent model, where best-first is not, and under
the exclusive model where a node cannot hold all its candidate children: each maximal child set
that fits (:mod:`goose_theory.childsets`) is a variant type, and a node's table is the best of its
variants' (variants add to the types, not to the cost per type).
"""
from __future__ import annotations

import numpy as np

from ._numba import jit
from .childsets import child_sets, set_note
from .topology import ROOT, SPINE, TRANSITION

NEG = -1e300
TIE_TOL = 1e-12  # relative: values this close count as equal (see dp_tables)


@jit
def dp_tables(order, n_child, child_q, child_type, capacity, variant, budget, independent):
    """Fill F[type, b], choice[type, j, b] (nodes given to child j; 0 = left out) and
    alt[type, b] (1: the variant chained from the type, ``variant[type]``, filled earlier in
    ``order``, is better by more than TIE_TOL: on a tie the earlier set in the chain, the first
    fit at its head, keeps the cell)."""
    n_types, width = child_q.shape
    F = np.full((n_types, budget + 1), NEG)
    choice = np.zeros((n_types, width, budget + 1), np.int32)
    alt = np.zeros((n_types, budget + 1), np.int8)
    G = np.empty(budget + 1)
    H = np.empty(budget + 1)
    for t in order:
        top = min(budget, capacity[t])
        G[:] = NEG
        G[0] = 0.0
        for j in range(n_child[t] - 1, -1, -1):
            q, c = child_q[t, j], child_type[t, j]
            keep = 1.0 - q if independent else 1.0
            child_top = min(top, capacity[c] + 1)
            for b in range(top + 1):
                # Ties (to a relative TIE_TOL) go to *including* child j, with the most nodes:
                # children come in priority order (spine, then ranks 0, 1, ...), and where the
                # model rates ranks equally (ranks past the given p_t list share its last rate)
                # the runtime still finds lower ranks likelier, so the earlier rank must win. One
                # pass from the most nodes down to none (s = 0: child j left out); a later option
                # replaces the chosen one only if better by more than TIE_TOL, so each cell is
                # within TIE_TOL of its best (compared with the chosen one, no drift along s); the
                # cells' losses add up over children and depth, a few 1e-12 at most in practice.
                chosen, arg, bar = NEG, -1, NEG  # bar: what a later option must exceed
                for s in range(min(b, child_top), 0, -1):
                    rest, sub = G[b - s], F[c, s - 1]
                    if rest <= NEG or sub <= NEG:
                        continue
                    value = q * (1.0 + sub) + keep * rest
                    if value > bar:
                        chosen, arg, bar = value, s, value + TIE_TOL * abs(value)
                if arg < 0 or G[b] > bar:
                    chosen, arg = G[b], 0
                H[b] = chosen
                choice[t, j, b] = arg
            G[: top + 1] = H[: top + 1]
        F[t, : top + 1] = G[: top + 1]
        v = variant[t]
        if v >= 0:
            for b in range(budget + 1):
                if F[v, b] > F[t, b] + TIE_TOL * abs(F[t, b]):
                    F[t, b] = F[v, b]
                    alt[t, b] = 1
    return F, choice, alt


def _filled(candidate, budget: int):
    """The node types of ``candidate`` (:func:`_types`) and their tables (:func:`dp_tables`)."""
    spec = _types(candidate, budget)
    order, n_child, child_q, child_type, _, _, capacity, variant, _ = spec
    return spec, dp_tables(order, n_child, child_q, child_type, capacity, variant, budget,
                           candidate.acceptance.independent)


def best_values(candidate, *, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The best expected accepted nodes (bonus excluded) with at most b nodes, for every b in
    0..``budget``, from the one table :func:`solve` fills for ``budget`` (a type's row does not
    depend on the budget it was filled for, only how far it goes); and the node count of the tree
    :func:`solve` builds at each b (the largest size within 1e-12 of the best, as :func:`_reconstruct`
    takes it, up to the candidate tree's capacity)."""
    spec, (F, _, _) = _filled(candidate, budget)
    _, _, _, _, _, _, capacity, _, _ = spec
    values = F[0]
    best = np.maximum.accumulate(values)  # at most b: a smaller tree may be best (independent model)
    sizes = np.zeros(budget + 1, np.int64)
    top = min(budget, int(capacity[0]))
    for b in range(1, budget + 1):  # b is the tree's size where its own value ties the best so far
        ties = b <= top and values[b] >= best[b] - 1e-12 * abs(best[b])
        sizes[b] = b if ties else sizes[b - 1]
    return best, sizes


@jit
def _reconstruct(values, choice, alt, variant, n_child, child_type, child_kind, child_rank):
    """The best tree from the tables, breadth first: per node its parent, kind, rank and depth,
    and its type resolved through the variant chain (the child set it was given). Among budgets
    with the same best value (to a relative 1e-12) the largest is taken."""
    best = values.max()
    b = 0
    for i in range(values.shape[0]):
        if values[i] >= best - 1e-12 * abs(best):
            b = i
    n = b + 1
    parent, kind, rank = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    depth, node_type, below = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    resolved = np.empty(n, np.int64)
    parent[0], kind[0], rank[0], depth[0], node_type[0], below[0] = -1, ROOT, 0, 0, 0, b
    size = 1
    for v in range(n):
        if v >= size:
            break
        t, remaining = node_type[v], below[v]
        while alt[t, below[v]]:
            t = variant[t]
        resolved[v] = t
        for j in range(n_child[t]):  # choice tables are per suffix of the children
            s = choice[t, j, remaining]
            if s:
                parent[size], kind[size], rank[size] = v, child_kind[t, j], child_rank[t, j]
                depth[size] = depth[v] + 1
                node_type[size], below[size] = child_type[t, j], s - 1
                size += 1
                remaining -= s
    return parent[:size], kind[:size], rank[:size], depth[:size], resolved[:size]


def solve(candidate, *, budget: int):
    """Exact best tree with at most ``budget`` nodes; returns a TreeBuilder (BFS order).

    Among budgets with the same best value (to a relative 1e-12) the largest is taken, so the
    tree has exactly ``budget`` nodes unless the candidate tree is smaller or (independent
    model only) every further node would lower E[tau] by demoting later siblings. So where a
    larger child set only equals a smaller one (exclusive model), the larger is drafted: p_s 0.4,
    p_t 0.6, 0.15, top_k 5, max_depth 1, max_spine 1, budget 5 gives the spine child and ranks 1-4
    (E 2.0 less an ulp), not the spine child and rank 0 (E 2.0).
    """
    from .candidate import TreeBuilder  # local import: candidate does not depend on this module

    spec, (F, choice, alt) = _filled(candidate, budget)
    _, n_child, _, child_type, child_kind, child_rank, capacity, variant, types = spec
    top = min(budget, int(capacity[0]))
    parent, kind, rank, depth, resolved = _reconstruct(F[0, : top + 1], choice, alt, variant, n_child,
                                                       child_type, child_kind, child_rank)
    builder = TreeBuilder.from_lists(candidate, parent.tolist(), kind.tolist(), rank.tolist(), depth.tolist())
    for text in tree_notes(candidate, [types[t] for t in resolved[np.unique(parent[1:])]]):
        builder.notes[text] = None
    return builder


def tree_notes(candidate, used) -> list[str]:
    """One note per child set that leaves ranks out, from ``used``: (kind, depth, (with_spine,
    ranks)) of each node that has children, in BFS order (a leaf's set is never drafted, so it
    gets no note). Where transition nodes do not all get the same note (none included), each
    names their depth, and "some" where nodes of one depth differ (the DP gives each node the set
    its subtree's budget favours)."""
    used = list(dict.fromkeys(used))  # each child set once, in the order first met
    plain = [set_note(candidate, kind, d, *sets) for kind, d, sets in used]
    moves = [d for (kind, d, _) in used if kind == TRANSITION]
    mixed = len({text for (kind, _, _), text in zip(used, plain) if kind == TRANSITION}) > 1
    notes = []
    for (kind, d, sets), text in zip(used, plain):
        if kind == TRANSITION and mixed:
            some = "some " if moves.count(d) > 1 else ""
            text = set_note(candidate, kind, d, *sets, where=f"{some}transition nodes of depth {d}")
        if text is not None and text not in notes:
            notes.append(text)
    return notes


def _types(cand, budget: int):
    """Per node type (spine depth d -> d; transition depth d -> max_spine + d): its children
    in priority order (q, type, kind, rank) and its capacity (candidate subtree size, <= budget).

    Exclusive model: where a node cannot hold all its candidate children (q over 1), each of its
    maximal feasible child sets (:func:`goose_theory.childsets.child_sets`) is a variant type,
    chained from the base type (the first fit) through ``variant``; the node takes the best, so
    the optimum covers the pure transition tree and every trade of ranks too.
    """
    acc = cand.acceptance
    ms, md = (cand.max_spine if cand.spine else 0), cand.max_depth
    base = [(ROOT if d == 0 else SPINE, d) for d in range(ms + 1)] + [(TRANSITION, d) for d in range(1, md + 1)]
    sets = [child_sets(cand, kind, d) for kind, d in base]
    types = [(kind, d, s[0]) for (kind, d), s in zip(base, sets)]
    variant = [-1] * len(types)
    for t, (kind, d) in enumerate(base):
        last = t
        for extra in sets[t][1:]:  # chained: base -> 1st variant -> 2nd -> ...
            variant[last] = last = len(types)
            types.append((kind, d, extra)); variant.append(-1)
    n_types, width = len(types), cand.top_k + 1
    n_child = np.zeros(n_types, np.int64)
    child_q = np.zeros((n_types, width)); child_type = np.zeros((n_types, width), np.int64)
    child_kind = np.zeros((n_types, width), np.int64); child_rank = np.zeros((n_types, width), np.int64)
    for t, (kind, d, (with_spine, ranks)) in enumerate(types):
        kids = [(acc.spine_q(d + 1), d + 1, SPINE, 0)] if with_spine else []
        kids += [(acc.transition_q(r, kind), ms + d + 1, TRANSITION, r) for r in ranks]
        n_child[t] = len(kids)
        for j, (q, ct, ck, cr) in enumerate(kids):
            child_q[t, j], child_type[t, j], child_kind[t, j], child_rank[t, j] = q, ct, ck, cr
    # deepest first; a variant (index > its base's) before its base at the same depth
    order = np.array(sorted(range(n_types), key=lambda t: (-types[t][1], -t)), np.int64)
    capacity = np.zeros(n_types, np.int64)
    for t in order:  # children (and the variant chained from t) are done
        total = sum(1 + int(capacity[child_type[t, j]]) for j in range(n_child[t]))
        capacity[t] = min(total, budget)
        if variant[t] >= 0:
            capacity[t] = max(capacity[t], capacity[variant[t]])
    return (order, n_child, child_q, child_type, child_kind, child_rank, capacity,
            np.asarray(variant, np.int64), types)


def has_variants(cand) -> bool:
    """True when some node type has more than one maximal feasible child set (exclusive model
    only): then best-first is not exact and :func:`solve` is used."""
    ms = cand.max_spine if cand.spine else 0
    base = [(ROOT if d == 0 else SPINE, d) for d in range(ms + 1)]
    base += [(TRANSITION, d) for d in range(1, cand.max_depth + 1)]
    return any(len(child_sets(cand, kind, d)) > 1 for kind, d in base)
