"""Spine-allocation rules: a spine of length m plus a branch budget split over spine positions.

Spine position i is the root (i = 0) or the spine node at depth i; its branches are the
transition subtree hung on it (first-level ranks and deeper, transition depth <= max_depth,
which is absolute, so spine nodes at depth >= max_depth cannot hold branches).

* ``linear`` / ``harmonic``: for each m in 0..min(budget, max_spine), the R = budget - m
  remaining nodes are split over positions i = 0..m with weights (m + 1 - i) (linear) or
  1/(i + 1) (harmonic), integers by largest remainder. Each share is spent **best-first**
  inside that position's transition subtree. The m with the best exact E[tau] wins (the
  smallest such m on a tie); ``details["curve"]`` holds [m, E[tau]] for every m searched.
* ``paper``: BuildSpineTree at the paper's defaults. Spine ratio r from the tier of p_s(1)
  (standing in for the EMA): < 0.2 -> 0.15, < 0.4 -> 0.30, else 0.50; m = min(round(B r),
  max_spine); R = B - m; rho = 0.5: the spine nodes 1..m share round(rho R) with harmonic
  weights 1/i (largest remainder) and the root gets the rest (all of R when m = 0). Each
  share is grown **breadth-first** (level by level, ranks in order, up to top_k children).

Leftover: a share that does not fit in its position's subtree (deep spine nodes have little or
no room under max_depth) moves to the next shallower position, ending at the root, which has
the most room. Positions are therefore filled deepest first. If even the root's subtree is
full, the tree has fewer than ``budget`` nodes and ``details["unplaced"]`` says how many.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> from goose_theory.candidate import Candidate
    >>> b, d = paper_tree(Candidate(Acceptance.parse(0.5, 0.05)), budget=60)
    >>> d["spine_ratio"], d["spine_length"], d["shares"][:3]
    (0.5, 20, [20, 6, 3])
"""
from __future__ import annotations

from typing import Any, Callable

from .candidate import Candidate, TreeBuilder, best_first, breadth_first, largest_remainder
from .topology import ROOT, SPINE, TRANSITION
from .yields import exact_yield

PAPER_TIERS = ((0.2, 0.15), (0.4, 0.30))  # (p_s below this, spine ratio); else 0.50
PAPER_TOP_RATIO = 0.50
PAPER_RHO = 0.5

Grow = Callable[[TreeBuilder, int, int, bool], int]  # (builder, node, share, has_spine) -> placed


def _spine_with_branches(cand: Candidate, m: int, shares: list[int], grow: Grow) -> tuple[TreeBuilder, int]:
    """Chain of m spine nodes, then each position's share, deepest first, leftover moving up."""
    builder = TreeBuilder(cand)
    for i in range(m):
        # the path product, as best_first keys a subtree by it (a 0.0 made every key under a spine node
        # equal: its share grew first-in-first-out, not best-first)
        spine_key, _ = cand.keys(SPINE if i else ROOT, i, True)
        builder.add(i, SPINE, 0, builder.prob[i] * spine_key)
    placed_total, carry = m, 0
    for i in range(m, -1, -1):
        want = shares[i] + carry
        placed = grow(builder, i, want, i < m) if want > 0 else 0
        carry = want - placed
        placed_total += placed
    return builder, placed_total


def _grow_best_first(builder: TreeBuilder, node: int, share: int, has_spine: bool) -> int:
    spine_nodes = frozenset([node]) if has_spine else frozenset()
    return best_first(builder, budget=share, seeds=[node], grow_spine=False, spine_nodes=spine_nodes,
                      keys=builder.candidate.prefix_keys)  # ranks in order, as the paper's allocations fill them


def _grow_breadth_first(builder: TreeBuilder, node: int, share: int, has_spine: bool) -> int:
    cand = builder.candidate

    def children(v: int) -> list[tuple[int, int]]:
        kind, depth = builder.source[v], builder.depth[v]
        with_spine = has_spine and v == node
        builder.note(kind, depth, with_spine)
        return [(TRANSITION, r) for r in range(cand.rank_cap(kind, depth, with_spine))]

    return breadth_first(builder, budget=share, seeds=[node], children=children)


def _details(builder: TreeBuilder, budget: int, placed: int, m: int, shares: list[int]) -> dict[str, Any]:
    details: dict[str, Any] = {"truncated": builder.note_list(), "spine_length": m, "shares": shares}
    if placed < budget:
        details["unplaced"] = budget - placed
    return details


def weighted_tree(cand: Candidate, *, budget: int, weighting: str) -> tuple[TreeBuilder, dict[str, Any]]:
    """``linear`` or ``harmonic``: search m, keep the best exact E[tau]."""
    weight = {"linear": lambda i, m: m + 1 - i, "harmonic": lambda i, m: 1.0 / (i + 1)}[weighting]
    max_m = min(budget, cand.max_spine) if cand.spine else 0
    best: tuple[float, TreeBuilder, dict[str, Any]] | None = None
    curve = []
    for m in range(max_m + 1):
        shares = largest_remainder(budget - m, [weight(i, m) for i in range(m + 1)])
        builder, placed = _spine_with_branches(cand, m, shares, _grow_best_first)
        tau = exact_yield(builder.topology(), cand.acceptance).expected_tau
        curve.append([m, tau])
        if best is None or tau > best[0]:
            best = (tau, builder, _details(builder, budget, placed, m, shares))
    assert best is not None
    _, builder, details = best
    details["curve"] = curve
    return builder, details


PAPER_BYPASS_LEN = 8  # the paper's consensus bypass: a confident match this long is verified alone, as a chain


def paper_spine_ratio(p_s1: float) -> float:
    """The paper's confidence tier: spine ratio r for spine acceptance ``p_s1``."""
    for limit, ratio in PAPER_TIERS:
        if p_s1 < limit:
            return ratio
    return PAPER_TOP_RATIO


def paper_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, dict[str, Any]]:
    """BuildSpineTree at the paper's defaults (see the module docstring)."""
    ratio = paper_spine_ratio(cand.acceptance.spine_q(1))
    # rounded as the runtime's adaptive builder does (goose_runtime.goose), so this rule predicts
    # the tree goose actually builds at this budget
    m = min(max(1, round(budget * ratio)), budget, cand.max_spine) if cand.spine and budget > 0 else 0
    branch = budget - m
    to_spine = round(PAPER_RHO * branch) if m > 0 else 0
    shares = [branch - to_spine] + largest_remainder(to_spine, [1.0 / i for i in range(1, m + 1)])
    builder, placed = _spine_with_branches(cand, m, shares, _grow_breadth_first)
    details = _details(builder, budget, placed, m, shares)
    details.update(spine_ratio=ratio, rho=PAPER_RHO)
    return builder, details
