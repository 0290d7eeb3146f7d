"""The paper's adaptive Goose tree and the static shapes of the baselines.

:class:`GoosePolicy` holds the EMA (0.3) of observed spine acceptance and picks the spine ratio
tier (EMA < 0.2 -> 0.15, < 0.4 -> 0.30, else 0.50). :func:`build_goose`:

1. no match -> the whole budget grows a transition tree from the root (``+store``: all but one node
   of it, the last going to the retrieval store's guess as one more root child, unless the table
   already drafts that token under the root; budget the table could not place grows under the guess);
2. consensus bypass: a high-confidence match (>= 2 n-gram lengths agree) of >= 8 tokens is
   verified alone, as a linear chain;
3. otherwise a spine of ``round(B * ratio)`` nodes (all of a high-confidence match), then the
   branch budget ``W = B - m``: ``(1 - rho) W`` to the root, ``rho W`` over spine nodes 1..m with
   harmonic weights 1/i (wider near the root); every branch grows recursively
   (:func:`grow_branches`), breadth limited to ``top_k`` and depth to ``max_depth``.

Reading of the paper's rho (the review leaves it undefined): the share of the branch budget that
goes to spine nodes rather than the root. Branch depth is absolute (as in ``goose_theory``'s
Topology), so only spine nodes shallower than ``max_depth`` carry branches.
"""
from __future__ import annotations

from dataclasses import dataclass

from goose_theory.allocation import (PAPER_BYPASS_LEN, PAPER_RHO, branch_width, harmonic_split, paper_branch_shares,
                                     paper_spine_ratio)
from goose_theory.topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, TRANSITION, Topology

from .adjacency import AdjacencyTable
from .matcher import Match
from .trees import DraftTree, build_chain, candidates, new_tree


@dataclass
class GoosePolicy:
    """Adaptive state carried across cycles of one prompt."""

    ema: float = 0.3          # start in the middle tier
    alpha: float = 0.3        # EMA smoothing (paper)
    rho: float = PAPER_RHO    # share of the branch budget on spine nodes
    bypass_len: int = PAPER_BYPASS_LEN  # consensus bypass threshold (tokens)
    min_score: float = 0.0    # drop transition candidates harvested below this probability (paper: 0.01)
    branch_power: float = 1.0  # siblings' shares of a branch budget ~ 1/rank**power (2: Token Recycling's)

    @property
    def spine_ratio(self) -> float:
        return paper_spine_ratio(self.ema)  # the paper's tiers, one table shared with goose_theory

    def observe(self, n_spine: int, n_accepted_spine: int) -> None:
        """Fold one cycle's spine acceptance into the EMA: accepted / reached spine nodes."""
        if n_spine <= 0:
            return
        reached = n_accepted_spine + (1 if n_accepted_spine < n_spine else 0)
        self.ema = (1 - self.alpha) * self.ema + self.alpha * (n_accepted_spine / reached)


def grow_branches(tree: DraftTree, node: int, budget: int, adj: AdjacencyTable | None, before_anchor: int,
                  *, top_k: int, max_depth: int, exclude: set[int] | None = None, power: float = 1.0,
                  min_score: float = 0.0) -> int:
    """Hang up to ``budget`` transition nodes under ``node``; returns how many were placed.

    Half the budget (at most ``top_k``) becomes direct children, best rank first; the rest is
    split over them harmonically and each grows recursively. Budget a child cannot use passes to
    its next sibling. When ``min_score > 0``, candidates scored below it are not drafted (meaningful
    when the table holds probabilities).
    """
    if budget <= 0 or tree.depth[node] >= max_depth or adj is None:
        return 0
    cands = candidates(adj, tree, node, before_anchor, exclude, limit=branch_width(budget, top_k), min_score=min_score)
    width = len(cands)
    if width == 0:
        return 0
    kids = tree.add_transitions(node, cands)
    used, carry = width, 0
    for kid, share in zip(kids, harmonic_split(budget - width, width, power)):
        if share + carry <= 0:  # nothing to hang here (most leaves): skip the call
            continue
        placed = grow_branches(tree, kid, share + carry, adj, before_anchor, top_k=top_k,
                               max_depth=max_depth, power=power, min_score=min_score)
        carry = share + carry - placed
        used += placed
    return used


def build_goose(policy: GoosePolicy, match: Match, adj: AdjacencyTable | None, before_anchor: int, anchor: int,
                *, budget: int, top_k: int = PAPER_TOP_K, max_depth: int = PAPER_MAX_DEPTH,
                max_spine: int = PAPER_MAX_SPINE,
                store_token: int = -1) -> DraftTree:
    """One cycle's adaptive tree (spine nodes are tree nodes 1..m, so a spine-only path needs no
    KV-cache copy). ``store_token`` (>= 0): the retrieval store's guess, drafted in an unmatched
    cycle as a root child of rank ``top_k`` (one past the table's ranks; score NaN)."""
    chain = match.tokens[:min(max_spine, budget)]
    if chain and match.high_confidence and len(chain) >= policy.bypass_len:
        tree = build_chain(anchor, match, len(chain))
        tree.bypass = True
        return tree
    if not chain:
        return _unmatched_tree(policy, match, adj, before_anchor, anchor, budget=budget, top_k=top_k,
                               max_depth=max_depth, store_token=store_token)
    m = len(chain) if match.high_confidence else min(len(chain), max(1, round(budget * policy.spine_ratio)))
    tree = build_chain(anchor, match, m)
    spine_nodes = [0] + [i for i in range(1, m + 1) if tree.depth[i] < max_depth]
    shares = paper_branch_shares(budget - m, len(spine_nodes) - 1, policy.rho)  # goose_theory's paper rule too
    carry = 0
    for node, share in zip(spine_nodes, shares):
        next_spine = chain[node] if node < m else None  # the spine child's token: not a branch
        placed = grow_branches(tree, node, share + carry, adj, before_anchor, top_k=top_k, max_depth=max_depth,
                               exclude={next_spine} if next_spine is not None else None,
                               min_score=policy.min_score, power=policy.branch_power)
        carry = share + carry - placed
    return tree


def _unmatched_tree(policy: GoosePolicy, match: Match, adj: AdjacencyTable | None, before_anchor: int,
                    anchor: int, *, budget: int, top_k: int, max_depth: int, store_token: int) -> DraftTree:
    tree = new_tree(anchor, match)
    kw = dict(top_k=top_k, max_depth=max_depth, min_score=policy.min_score, power=policy.branch_power)
    if store_token < 0:
        grow_branches(tree, 0, budget, adj, before_anchor, **kw)
        return tree
    # the root children grow_branches would draft at budget - 1 (its first step): if the guess is
    # among them the table drafts it itself, and the tree is the table's at the full budget
    roots = (candidates(adj, tree, 0, before_anchor, limit=branch_width(budget - 1, top_k), min_score=policy.min_score)
             if budget > 1 and max_depth > 0 else [])
    if any(token == store_token for _, token, _ in roots):
        grow_branches(tree, 0, budget, adj, before_anchor, **kw)
        return tree
    placed = grow_branches(tree, 0, budget - 1, adj, before_anchor, **kw)
    guess = tree.add(0, TRANSITION, top_k, store_token)
    # budget the table could not place under the root (no row for the anchor: a third of the
    # unmatched cycles) passes to the guess, as a sibling's unused budget does in grow_branches
    grow_branches(tree, guess, budget - 1 - placed, adj, before_anchor, **kw)
    return tree


def iso_topology(k: int, budget: int, max_depth: int = PAPER_MAX_DEPTH) -> Topology:
    """The K-ary adjacency-only tree, filled breadth-first up to ``budget`` nodes (``iso:K``)."""
    nodes, depth, head = [(-1, "root", 0)], [0], 0
    while len(nodes) - 1 < budget and head < len(nodes):
        if depth[head] < max_depth:
            for r in range(k):
                if len(nodes) - 1 >= budget:
                    break
                nodes.append((head, "transition", r)); depth.append(depth[head] + 1)
        head += 1
    return Topology.from_nodes(nodes, max_depth=max_depth, meta={"name": f"iso:{k}"})


def tr_topology(budget: int = 80, max_depth: int = PAPER_MAX_DEPTH, top_k: int = PAPER_TOP_K) -> Topology:
    """Token Recycling's kind of static tree: wide at the top, narrow deep (about 80 nodes, depth 6).

    Built by :func:`grow_branches`' rule on a dummy table whose every row is ranks 0..K-1, with
    weights 1/(i+1)**2 so the rank-0 line runs deep.
    """
    class _Full:
        def lookup(self, prev: int, cur: int):
            return list(range(top_k)), [1.0] * top_k
    tree = new_tree(0)
    grow_branches(tree, 0, budget, _Full(), -1, top_k=top_k, max_depth=max_depth, power=2.0)
    nodes = [(-1, "root", 0)] + [(tree.parent[i], "transition", tree.rank[i]) for i in range(1, tree.n_nodes)]
    return Topology.from_nodes(nodes, max_depth=max_depth, meta={"name": "tr"})
