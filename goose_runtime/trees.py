"""The concrete draft tree of one cycle: token ids on a shape, from the spine and the adjacency table.

Node 0 is the root (the anchor: the last accepted token, not yet in the KV cache). Nodes are
stored parents-first. Every builder skips a transition candidate equal to a token already placed
under the same parent, so siblings are distinct and at most one child can equal the target's
argmax (the walk is then unambiguous; the spine child is still listed first).

Builders:
* :func:`build_from_topology` -- any static ``goose_theory`` Topology (``tr``, ``iso:K``,
  ``topology:FILE``), and with ``mixed=True`` the ``mixed-iso:K`` rule;
* :func:`build_chain` -- ``pld`` and the consensus bypass: the matched spine alone;
* :func:`goose.build_goose` -- the paper's adaptive builder (in :mod:`goose_runtime.goose`).

Example:
    >>> from goose_theory.topology import Topology
    >>> from goose_runtime.adjacency import AdjacencyTable
    >>> from goose_runtime.matcher import Match
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    >>> tree = build_from_topology(t, Match((7,), 3, 1, 1), AdjacencyTable(16, top_k=2), 4, 5)
    >>> tree.token   # the transition slot has no candidate yet, so it is dropped
    [5, 7]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from goose_theory.topology import ROOT, SPINE, TRANSITION, Topology

from .adjacency import AdjacencyTable
from .matcher import NO_MATCH, Match

NAN = float("nan")


@dataclass
class DraftTree:
    """Parallel per-node lists (node 0 = root) plus the match that fed the spine."""

    parent: list[int] = field(default_factory=lambda: [-1])
    source: list[int] = field(default_factory=lambda: [ROOT])
    rank: list[int] = field(default_factory=lambda: [0])
    token: list[int] = field(default_factory=list)
    score: list[float] = field(default_factory=lambda: [NAN])
    spine_pos: list[int] = field(default_factory=lambda: [0])
    depth: list[int] = field(default_factory=lambda: [0])
    children: list[list[int]] = field(default_factory=lambda: [[]])
    match: Match = NO_MATCH
    bypass: bool = False

    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    @property
    def n_spine(self) -> int:
        return sum(1 for s in self.source if s == SPINE)

    def add(self, parent: int, source: int, rank: int, token: int, score: float = NAN,
            spine_pos: int = 0) -> int:
        idx = len(self.parent)
        self.parent.append(parent); self.source.append(source); self.rank.append(rank)
        self.token.append(token); self.score.append(score); self.spine_pos.append(spine_pos)
        self.depth.append(self.depth[parent] + 1); self.children.append([])
        self.children[parent].append(idx)
        return idx

    def add_transitions(self, parent: int, cands: list[tuple[int, int, float]]) -> Sequence[int]:
        """Append ``(rank, token, score)`` transition children of ``parent`` in order (the bulk form
        of :meth:`add`: goose's builder hangs a node's children in one call); returns their indices."""
        start, n = len(self.parent), len(cands)
        if n == 1:  # most calls: a single child, where plain appends are cheaper than list building
            rank, token, score = cands[0]
            return (self.add(parent, TRANSITION, rank, token, score),)
        self.parent += [parent] * n; self.source += [TRANSITION] * n; self.spine_pos += [0] * n
        self.depth += [self.depth[parent] + 1] * n
        for rank, token, score in cands:
            self.rank.append(rank); self.token.append(token); self.score.append(score)
            self.children.append([])
        kids = range(start, start + n)
        self.children[parent].extend(kids)
        return kids

    def context(self, node: int, before_anchor: int) -> tuple[int, int]:
        """The adjacency key of ``node``: (token before it, its token)."""
        p = self.parent[node]
        return (self.token[p] if p >= 0 else before_anchor), self.token[node]


def new_tree(anchor: int, match: Match = NO_MATCH) -> DraftTree:
    tree = DraftTree(token=[int(anchor)])
    tree.match = match
    return tree


def candidates(adj: AdjacencyTable | None, tree: DraftTree, node: int, before_anchor: int,
               exclude: set[int] | None = None, *, limit: int | None = None,
               min_score: float = 0.0) -> list[tuple[int, int, float]]:
    """Adjacency successors of ``node`` as ``(rank, token, score)``, best first, minus tokens in
    ``exclude`` and, when ``min_score > 0``, minus scores below it; the first ``limit`` of them
    (None: all). goose's builder asks for a few at every node that gets a branch budget, so the
    scan stops as soon as it has them."""
    if adj is None or (limit is not None and limit <= 0):
        return []
    toks, scores = adj.lookup(*tree.context(node, before_anchor))
    if not exclude and min_score <= 0:
        n = len(toks) if limit is None else min(limit, len(toks))
        return list(zip(range(n), toks[:n], scores[:n]))
    out = []
    for r, (t, s) in enumerate(zip(toks, scores)):
        # min_score only filters when it is on (> 0): scores are logits by default, often negative
        if (exclude and t in exclude) or (min_score > 0 and not s >= min_score):
            continue
        out.append((r, t, s))
        if len(out) == limit:
            break
    return out


def build_chain(anchor: int, match: Match, length: int | None = None) -> DraftTree:
    """The spine alone as a linear chain (``pld``, consensus bypass); nodes 1..m are the spine."""
    tree = new_tree(anchor, match)
    chain = match.tokens if length is None else match.tokens[:length]
    node = 0
    for i, tok in enumerate(chain):
        node = tree.add(node, SPINE, 0, tok, NAN, i + 1)
    return tree


def build_from_topology(topology: Topology, match: Match, adj: AdjacencyTable | None, before_anchor: int,
                        anchor: int, *, mixed: bool = False, budget: int | None = None) -> DraftTree:
    """Fill ``topology`` breadth-first in priority order (at most ``budget`` non-root nodes).

    Spine slot at depth d: ``match.tokens[d-1]``; transition slot of rank r: the r-th adjacency
    successor of its parent. A slot with no token, or whose token a sibling already holds, is
    dropped with its subtree. ``mixed``: the rank-0 slot under the root and under spine nodes
    takes the spine token where the match has one, and that parent's other slots shift down one
    adjacency rank (the ``mixed-iso:K`` control).
    """
    tree = new_tree(anchor, match)
    child_lists = topology.child_lists
    src, rnk = topology.source, topology.rank
    chain = match.tokens
    limit = topology.budget if budget is None else budget
    queue = [(0, 0)]  # (topology node, tree node)
    head = 0
    while head < len(queue) and tree.n_nodes - 1 < limit:
        v, t = queue[head]; head += 1
        kids = child_lists[v]
        if not kids:
            continue
        on_spine = t == 0 or tree.source[t] == SPINE
        has_spine = on_spine and tree.depth[t] < len(chain)
        placed: set[int] = set()
        cands = None
        for c in kids:
            if tree.n_nodes - 1 >= limit:
                break
            spine_slot = src[c] == SPINE or (mixed and has_spine and rnk[c] == 0)
            if spine_slot:
                d = tree.depth[t]
                if not has_spine or chain[d] in placed:
                    continue
                node = tree.add(t, SPINE, 0, chain[d], NAN, d + 1)
                placed.add(chain[d])
            else:
                if cands is None:
                    cands = candidates(adj, tree, t, before_anchor, set())
                r = rnk[c] - 1 if (mixed and has_spine) else rnk[c]
                if mixed and has_spine:  # the spine token is not an adjacency candidate here
                    cands = [x for x in cands if x[1] != chain[tree.depth[t]]]
                if not 0 <= r < len(cands) or cands[r][1] in placed:
                    continue
                rank, tok, score = cands[r]
                node = tree.add(t, TRANSITION, rank, tok, score)
                placed.add(tok)
            queue.append((c, node))
    return tree


def without(tree: DraftTree, drop: Sequence[int]) -> tuple[DraftTree, list[int]]:
    """``tree`` less the nodes ``drop`` (never the root) and their subtrees, and the kept nodes' old
    indices (parents still come first). Dropping drafts never changes what a cycle emits (the target
    chooses every token), only what it verifies.

    Example:
        >>> t = build_chain(5, Match((6, 7, 8), 3, 1, 1))
        >>> small, kept = without(t, [2])
        >>> small.token, small.parent, kept
        ([5, 6], [-1, 0], [0, 1])
    """
    if not drop:
        return tree, list(range(tree.n_nodes))
    gone = [False] * tree.n_nodes
    for node in drop:
        if not 0 < node < tree.n_nodes:
            raise ValueError(f"cannot drop node {node} of a {tree.n_nodes}-node tree")
        gone[node] = True
    kept, new_index = [], {}
    for node in range(1, tree.n_nodes):  # parents first: a dropped parent is known before its children
        gone[node] = gone[node] or gone[tree.parent[node]]
    small = new_tree(tree.token[0], tree.match)
    small.bypass = tree.bypass
    for node in range(tree.n_nodes):
        if gone[node]:
            continue
        new_index[node] = len(kept)
        kept.append(node)
        if node:
            small.add(new_index[tree.parent[node]], tree.source[node], tree.rank[node], tree.token[node],
                      tree.score[node], tree.spine_pos[node])
    return small, kept
