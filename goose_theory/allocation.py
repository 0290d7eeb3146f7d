"""Spine-allocation rules: a spine of length m plus a branch budget split over spine positions.

Spine position i is the root (i = 0) or the spine node at depth i; its branches are the
transition subtree hung on it (first-level ranks and deeper, transition depth <= max_depth,
which is absolute, so spine nodes at depth >= max_depth cannot hold branches).

* ``linear`` / ``harmonic``: for each m in 0..min(budget, max_spine), the R = budget - m
  remaining nodes are split over positions i = 0..m with weights (m + 1 - i) (linear) or
  1/(i + 1) (harmonic), integers by largest remainder. Each share is spent **best-first**
  inside that position's transition subtree. The m with the best exact E[tau] wins (the
  smallest such m on a tie); ``details["curve"]`` holds [m, E[tau]] for every m searched.
  Leftover: a share that does not fit in its position's subtree (deep spine nodes have little
  or no room under max_depth) moves to the next shallower position, ending at the root, which
  has the most room. Positions are therefore filled deepest first.
* ``paper``: BuildSpineTree at the paper's defaults, the tree ``goose_runtime.goose`` builds when
  every node finds its candidates (the runtime calls :func:`paper_branch_shares` and
  :func:`branch_width`; ``tests/test_goose.py`` compares the two node for node) -- unless the
  exclusive model caps a node's ranks (p_s plus the p_t of top-K ranks above 1), where this tree
  holds fewer children than goose drafts. Spine ratio r from the tier of p_s(1) (standing in for the EMA):
  < 0.2 -> 0.15, < 0.4 -> 0.30, else 0.50; m = min(max(1, round(B r)), max_spine); R = B - m;
  rho = 0.5: the spine nodes that can hold branches (depth < max_depth) share round(rho R) with
  harmonic weights 1/i (largest remainder) and the root gets the rest (all of R when none can).
  Each share grows **recursively**: half of it (at most the node's ranks) becomes direct
  children, best rank first, the rest is split over them harmonically and grown the same way;
  what a child cannot use passes to its next sibling, and what a position cannot use to the next
  deeper one (the root first, as the runtime goes).

If no position can take what is left, the tree has fewer than ``budget`` nodes and
``details["unplaced"]`` says how many (the paper shape at B = 60 and p_s >= 0.4: 59 nodes, as goose's).

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> from goose_theory.candidate import Candidate
    >>> b, d = paper_tree(Candidate(Acceptance.parse(0.5, 0.05)), budget=60)
    >>> d["spine_ratio"], d["spine_length"], d["shares"][:6], d["unplaced"]
    (0.5, 20, [20, 9, 4, 3, 2, 2], 1)
"""
from __future__ import annotations

import functools
import math
from typing import Any

from .candidate import Candidate, TreeBuilder, best_first, largest_remainder
from .topology import ROOT, SPINE, TRANSITION
from .yields import exact_yield

PAPER_TIERS = ((0.2, 0.15), (0.4, 0.30))  # (p_s below this, spine ratio); else 0.50
PAPER_TOP_RATIO = 0.50
PAPER_RHO = 0.5

def _spine_with_branches(cand: Candidate, m: int, shares: list[int]) -> tuple[TreeBuilder, int]:
    """Chain of m spine nodes, then each position's share, deepest first, leftover moving up."""
    builder = _spine(cand, m)
    placed_total, carry = m, 0
    for i in range(m, -1, -1):
        want = shares[i] + carry
        placed = _grow_best_first(builder, i, want, i < m) if want > 0 else 0
        carry = want - placed
        placed_total += placed
    return builder, placed_total


def _spine(cand: Candidate, m: int) -> TreeBuilder:
    """A builder holding the root and a chain of m spine nodes (nodes 1..m)."""
    builder = TreeBuilder(cand)
    for i in range(m):
        # the path product, as best_first keys a subtree by it (a 0.0 made every key under a spine node
        # equal: its share grew first-in-first-out, not best-first)
        spine_key, _ = cand.keys(SPINE if i else ROOT, i, True)
        builder.add(i, SPINE, 0, builder.prob[i] * spine_key)
    return builder


def _grow_best_first(builder: TreeBuilder, node: int, share: int, has_spine: bool) -> int:
    spine_nodes = frozenset([node]) if has_spine else frozenset()
    return best_first(builder, budget=share, seeds=[node], grow_spine=False, spine_nodes=spine_nodes,
                      keys=builder.candidate.prefix_keys)  # ranks in order, as the paper's allocations fill them


def _grow_recursive(builder: TreeBuilder, node: int, share: int, has_spine: bool) -> int:
    """goose_runtime.goose.grow_branches on a candidate tree whose every node has its ranks."""
    kind, depth = builder.source[node], builder.depth[node]
    builder.note(kind, depth, has_spine)
    cap = builder.candidate.rank_cap(kind, depth, has_spine)
    if share <= 0 or cap == 0:
        return 0
    width = branch_width(share, cap)
    kids = [builder.add(node, TRANSITION, r) for r in range(width)]
    used, carry = width, 0
    for kid, kid_share in zip(kids, harmonic_split(share - width, width)):
        if kid_share + carry > 0:
            placed = _grow_recursive(builder, kid, kid_share + carry, False)
            carry = kid_share + carry - placed
            used += placed
    return used


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
        builder, placed = _spine_with_branches(cand, m, shares)
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


def harmonic_split(total: int, n: int, power: float = 1.0) -> list[int]:
    """Split ``total`` into ``n`` integer shares with weights 1/(i+1)**power (largest remainder).

    Example:
        >>> harmonic_split(10, 3)
        [5, 3, 2]
    """
    return list(_harmonic_shares(total, n, power))


@functools.lru_cache(maxsize=4096)
def _harmonic_shares(total: int, n: int, power: float) -> tuple[int, ...]:
    # memoised: goose's builder asks for the same few (total, n) splits thousands of times a prompt
    if n <= 0 or total <= 0:
        return (0,) * max(n, 0)
    return tuple(largest_remainder(total, [1.0 / (i + 1) ** power for i in range(n)]))


def branch_width(share: int, ranks: int) -> int:
    """How many direct children a node gets from a branch share: half of it, at least 1, at most ``ranks``."""
    return min(ranks, max(1, math.ceil(share / 2)))


def paper_branch_shares(branch: int, n_spine_holders: int, rho: float = PAPER_RHO) -> list[int]:
    """The paper's split of the branch budget: [root, spine holder 1, 2, ...]. ``rho`` of it goes to the
    spine nodes that can hold branches, harmonically (wider near the root); the root keeps the rest.

    Example:
        >>> paper_branch_shares(40, 5)
        [20, 9, 4, 3, 2, 2]
    """
    to_spine = round(branch * rho) if n_spine_holders > 0 else 0
    return [branch - to_spine] + harmonic_split(to_spine, n_spine_holders)


def paper_tree(cand: Candidate, *, budget: int) -> tuple[TreeBuilder, dict[str, Any]]:
    """BuildSpineTree at the paper's defaults (see the module docstring): the root's share first, then
    the spine nodes shallow to deep, each position's leftover passing to the next, as the runtime goes."""
    ratio = paper_spine_ratio(cand.acceptance.spine_q(1))
    m = min(max(1, round(budget * ratio)), budget, cand.max_spine) if cand.spine and budget > 0 else 0
    builder = _spine(cand, m)
    holders = [0] + [i for i in range(1, m + 1) if i < cand.max_depth]  # spine node i sits at depth i
    shares = paper_branch_shares(budget - m, len(holders) - 1)
    placed, carry = m, 0
    for node, share in zip(holders, shares):
        got = _grow_recursive(builder, node, share + carry, node < m)
        carry = share + carry - got
        placed += got
    shares += [0] * (m + 1 - len(holders))  # by spine position: the deep ones hold nothing
    details = _details(builder, budget, placed, m, shares)
    details.update(spine_ratio=ratio, rho=PAPER_RHO)
    return builder, details
