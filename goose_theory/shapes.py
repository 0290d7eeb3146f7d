"""Rule constructors: each builds one tree shape inside the candidate tree of
:mod:`goose_theory.candidate` and returns ``(TreeBuilder, details)``.

* ``optimal``: best-first on path probability (exact under the exclusive model when p_t is
  sorted best-first, which :meth:`Candidate.keys` does); under the independent model, and where
  a node cannot hold all its candidate children under the exclusive model (it must choose among
  :func:`goose_theory.childsets.child_sets`), the exact dynamic programme over node types of
  :mod:`goose_theory._dp`.
* ``spine-only``: the pure spine chain of ``min(budget, max_spine)`` nodes.
* ``transition-only``: ``optimal`` in the candidate tree with the spine disabled.
* ``isotropic:K`` / ``mixed-isotropic:K``: breadth-first, K children per node (mixed: the rank-0
  child of a spine-eligible node is the spine token, then transition ranks 0..K-2).
* ``source-blind``: Sequoia's positional vector v = (p_s(1), p_t(0), p_t(1), ...) used at every
  node; best-first on v, then positional rank 0 -> spine token at spine-eligible nodes.
* ``uniform-levels``: no spine, and every node of a level has the same children, ranks 0..c_d-1
  (the only trees vLLM's ``speculative_token_tree`` drafts as given): the best (c_1, c_2, ...)
  within the budget, by exhaustive search (:func:`uniform_levels_tree`).

The spine-allocation rules (``linear``, ``harmonic``, ``paper``) are in
:mod:`goose_theory.allocation`.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> from goose_theory.candidate import Candidate
    >>> b, details = isotropic_tree(Candidate(Acceptance.parse(0.5, 0.1)), budget=4, k=2, mixed=True)
    >>> [(b.parent[i], b.source[i], b.rank[i]) for i in range(1, 5)]
    [(0, 1, 0), (0, 2, 0), (1, 1, 0), (1, 2, 0)]
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ._dp import best_values, has_variants, solve
from .candidate import Candidate, TreeBuilder, best_first, breadth_first
from .topology import ROOT, SPINE, TRANSITION

Details = dict[str, Any]


def _base_details(builder: TreeBuilder, budget: int, placed: int) -> Details:
    details: Details = {"truncated": builder.note_list()}
    if placed < budget:
        details["unplaced"] = budget - placed
    return details


def _needs_dp(cand: Candidate) -> bool:
    """Independent model, or an exclusive model where some node cannot hold all its candidate
    children: best-first is not exact there (a node's qeff, or which children fit beside which,
    depends on its other children), the dynamic programme of :mod:`goose_theory._dp` is."""
    return cand.acceptance.independent or has_variants(cand)


def optimal_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, Details]:
    """Exclusive model: best-first (exact); where :func:`_needs_dp`, the exact dynamic programme."""
    if _needs_dp(cand):
        builder = solve(cand, budget=budget)
        details = _base_details(builder, budget, len(builder) - 1)
        details["method"] = "dynamic programme over node types"
        return builder, details
    builder = TreeBuilder(cand)
    placed = best_first(builder, budget=budget, seeds=[0], grow_spine=cand.spine)
    details = _base_details(builder, budget, placed)
    details["method"] = "best-first"
    return builder, details


def optimal_curve(cand: Candidate, *, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """E[tau] of the ``optimal`` tree at every budget 0..``budget`` from one optimisation, and the
    nodes that tree holds, for a cost-aware scan (one tree per budget made a profile up to 4096
    nodes a minute's work). Best-first trees are nested: the tree at b is the first b nodes placed,
    so E[tau] is 1 plus the running sum of their path probabilities; the dynamic programme's table
    holds every smaller budget. A tree holds fewer nodes than b only where the candidate tree ran
    out, or (dynamic programme) where no larger tree ties the best.

    Example:
        >>> from goose_theory.acceptance import Acceptance
        >>> cand = Candidate(Acceptance.parse(0.5, 0.1), max_depth=1, max_spine=1, top_k=1)
        >>> taus, nodes = optimal_curve(cand, budget=3)  # the candidate tree holds 2 nodes
        >>> [round(float(t), 4) for t in taus], nodes.tolist()
        ([1.0, 1.5, 1.6, 1.6], [0, 1, 2, 2])
    """
    if _needs_dp(cand):
        values, nodes = best_values(cand, budget=budget)
        return 1.0 + values, nodes
    builder = TreeBuilder(cand)
    placed = best_first(builder, budget=budget, seeds=[0], grow_spine=cand.spine)
    taus = np.empty(budget + 1)
    taus[: placed + 1] = np.cumsum(builder.prob)  # the root's 1.0 first: the bonus token
    taus[placed + 1:] = taus[placed]  # the candidate tree ran out: more budget adds nothing
    return taus, np.minimum(np.arange(budget + 1), placed)


def transition_only_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, Details]:
    """The optimal tree of the candidate tree without a spine (pure transition tree)."""
    return optimal_tree(replace(cand, spine=False, _cache={}), budget=budget)


def spine_chain_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, Details]:
    """The pure spine chain: ``min(budget, max_spine)`` spine nodes and nothing else."""
    builder = TreeBuilder(cand)
    length = min(budget, cand.max_spine) if cand.spine else 0
    for i in range(length):
        builder.add(i, SPINE, 0)
    return builder, _base_details(builder, budget, length)


def isotropic_tree(cand: Candidate, *, budget: int, k: int, mixed: bool = False) -> tuple[TreeBuilder, Details]:
    """K children per node, filled breadth-first to ``budget`` (transition depth <= max_depth).

    ``mixed``: at the root and spine-eligible spine nodes the rank-0 child is the spine token
    and the others are transition ranks 0..K-2; elsewhere K transition ranks 0..K-1.
    """
    builder = TreeBuilder(cand)

    def children(v: int) -> list[tuple[int, int]]:
        kind, depth = builder.source[v], builder.depth[v]
        spine = mixed and cand.spine_eligible(kind, depth)
        want = k - 1 if spine else k
        cap = cand.rank_cap(kind, depth, spine)
        if cap < want:
            builder.note(kind, depth, spine)
        kids = [(SPINE, 0)] if spine else []
        return kids + [(TRANSITION, r) for r in range(min(want, cap))]

    placed = breadth_first(builder, budget=budget, seeds=[0], children=children)
    details = _base_details(builder, budget, placed)
    details["k"] = k
    return builder, details


def source_blind_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, Details]:
    """Sequoia's source-blind tree: one positional vector v = (p_s(1), p_t(0), p_t(1), ...)
    at every node. Best-first on v; at a spine-eligible node positional rank 0 is the spine
    token and positional rank k the transition rank k-1, elsewhere positional rank k is the
    transition rank k. With no spine (``max_spine`` 0), v = (p_t(0), p_t(1), ...). The true model
    scores the result (in :mod:`goose_theory.optimize`)."""
    acc = cand.acceptance
    # without a spine anywhere, positional rank 0 is transition rank 0 at every node: a p_s (which no node
    # drafts) in the vector made rank 0 rate as p_s, so p_s = 0 gave trees without rank 0 (EAGLE/Medusa's case)
    spine = cand.spine and cand.max_spine > 0
    vector = ([acc.spine_q(1)] if spine else []) + [acc.transition_q(r) for r in range(cand.top_k + 1)]

    def keys(kind: int, depth: int, with_spine: bool) -> tuple[float | None, list[tuple[int, float]]]:
        offset = 1 if with_spine else 0
        survive = 1.0 - vector[0] if (with_spine and acc.independent) else 1.0
        ranks = []
        for r in range(cand.rank_cap(kind, depth, with_spine)):
            q = vector[r + offset]
            ranks.append((r, q * survive))
            if acc.independent:
                survive *= 1.0 - q
        ranks.sort(key=lambda item: -item[1])
        return (vector[0] if with_spine else None), ranks

    builder = TreeBuilder(cand)
    placed = best_first(builder, budget=budget, seeds=[0], grow_spine=cand.spine, keys=keys)
    details = _base_details(builder, budget, placed)
    details["positional_vector"] = vector[: cand.top_k + spine]
    return builder, details


def _level_gain(cand: Candidate, kind: int, depth: int) -> list[float]:
    """gain[c]: the summed effective acceptance of ranks 0..c-1 under a node of ``kind`` at
    ``depth`` (qeff as in :mod:`goose_theory.yields`: the exclusive model's q, the independent
    model's q times the earlier siblings' misses), for c up to the node's rank cap."""
    gain, survive = [0.0], 1.0
    for r in range(cand.rank_cap(kind, depth, False)):
        q = cand.acceptance.transition_q(r, kind)
        gain.append(gain[-1] + q * survive)
        if cand.acceptance.independent:
            survive *= 1.0 - q
    return gain


def best_level_widths(cand: Candidate, *, budget: int) -> tuple[int, ...]:
    """The children per node of each level, (c_1, c_2, ...), of the best uniform-levels tree of at
    most ``budget`` nodes. Every node of level d reaches level d + 1 alike, so E[tau] = 1 +
    sum over d of prod over j <= d of gain_j(c_j), and a depth-first search over the widths is
    exact. Ties go to the smaller tree, then to the earlier widths.

    Example:
        >>> from goose_theory.acceptance import Acceptance
        >>> best_level_widths(Candidate(Acceptance.parse(0.0, [0.5, 0.2, 0.1])), budget=6)  # 2 + 2 + 2 nodes
        (2, 1, 1)
    """
    gains = [_level_gain(cand, ROOT if d == 0 else TRANSITION, d) for d in range(cand.max_depth)]
    best: tuple[float, int, tuple[int, ...]] = (1.0, 0, ())

    def search(widths: tuple[int, ...], nodes: int, level_nodes: int, reach: float, tau: float) -> None:
        nonlocal best
        if (tau > best[0] + 1e-12) or (abs(tau - best[0]) <= 1e-12 and nodes < best[1]):
            best = (tau, nodes, widths)
        d = len(widths)
        if d == cand.max_depth:
            return
        for c in range(1, len(gains[d])):
            more = level_nodes * c
            if nodes + more > budget:
                break
            level_reach = reach * gains[d][c]
            search(widths + (c,), nodes + more, more, level_reach, tau + level_reach)

    search((), 0, 1, 1.0, 1.0)
    return best[2]


def uniform_levels_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, Details]:
    """The best tree without a spine whose nodes of each level all have children ranks 0..c_d-1."""
    builder = TreeBuilder(cand)
    widths = best_level_widths(cand, budget=budget)
    level = [0]
    for width in widths:
        level = [builder.add(v, TRANSITION, r) for v in level for r in range(width)]
    for d in range(min(len(widths) + 1, cand.max_depth)):  # the levels the search chose widths for
        builder.note(ROOT if d == 0 else TRANSITION, d, False)
    details: Details = {"truncated": builder.note_list(), "level_widths": list(widths)}
    # a uniform tree rarely fills the budget exactly, and that is its shape, not a shortfall; but a
    # budget above the largest uniform tree the limits allow could not be placed by any widths
    capacity = _largest_uniform_tree(cand)
    if budget > capacity:
        details["unplaced"] = budget - capacity
    return builder, details


def _largest_uniform_tree(cand: Candidate) -> int:
    """Nodes of the uniform-levels tree with every level as wide as the candidate tree allows."""
    nodes, level = 0, 1
    for d in range(cand.max_depth):
        level *= cand.rank_cap(ROOT if d == 0 else TRANSITION, d, False)  # the widest a level's search may go
        nodes += level
    return nodes

