"""The candidate tree every optimizer rule draws from, and the growth primitives they share.

Candidate tree (the design every rule lives in):

* the root and each spine node may have one **spine** child (spine depth <= ``max_spine``) and
  **transition** children of ranks ``0..top_k-1``;
* a transition node has only transition children (ranks ``0..top_k-1``);
* a transition node's (absolute) depth is at most ``max_depth``, as in the topology contract;
* priority among siblings (UnifiedGreedyWalk's order): spine first, then transition by rank.

Exclusive-model feasibility: at a reached node at most one child can match, so the children's
q must sum to <= 1. When ``p_s + p_t(0) + ... + p_t(top_k-1)`` exceeds 1 at some candidate node,
the rules do not fail: they leave children out there, and say so in a one-line
note (``details["truncated"]``). The rules that fill ranks in order (isotropic, the paper's and
the allocations' branches, uniform levels, source-blind) keep the ranks while the total stays
<= 1 (a prefix, :meth:`Candidate.rank_cap`). ``optimal`` and ``transition-only`` take the best of
all maximal child sets that fit (:mod:`goose_theory.childsets`): with p_s = 0.7 and p_t = 0.36,
0.09, 0.05, ... the root's spine child gets ranks 1, 2, ... beside it, not nothing; the first fit
in rank order (:meth:`Candidate.rank_set`) is their choice on a tie. The yield calculator itself
rejects an infeasible *given* tree.

Growth primitives: :class:`TreeBuilder` (nodes in insertion order, parents first),
:func:`best_first` (a heap on path probability) and :func:`breadth_first` (level by level).

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> cand = Candidate(Acceptance.parse(0.3, 0.2), max_depth=6, max_spine=20, top_k=10)
    >>> b = TreeBuilder(cand); best_first(b, budget=3, seeds=[0])
    3
    >>> [(b.source[i], b.rank[i]) for i in range(1, 4)]   # spine (0.3), root ranks 0, 1 (0.2)
    [(1, 0), (2, 0), (2, 1)]
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .acceptance import EXCLUSIVE_TOLERANCE, Acceptance
from .topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, ROOT, SPINE, TRANSITION, Topology

# keys(kind, depth, with_spine) -> (spine child's key or None, [(rank, key), ...] in push order)
KeyFn = Callable[[int, int, bool], tuple[float | None, list[tuple[int, float]]]]


def node_label(kind: int, depth: int) -> str:
    """How notes name the nodes of one type: "the root", "spine depth 2", "transition nodes"."""
    return "transition nodes" if kind == TRANSITION else ("the root" if depth == 0 else f"spine depth {depth}")


def ranks_used(ranks: Sequence[int], top_k: int) -> str:
    """How notes say which ranks a node of the candidate tree may draft (a tree built from it may
    use fewer): "ranks 1, 2 of top_k=3 may be used", "no rank of top_k=3 may be used"."""
    of = f"of top_k={top_k}"
    return (f"ranks {', '.join(map(str, ranks))} {of} may be used" if len(ranks) > 1
            else f"rank {ranks[0]} {of} may be used" if ranks else f"no rank {of} may be used")


@dataclass(frozen=True)
class Candidate:
    """The candidate tree's shape and probabilities for one acceptance model."""

    acceptance: Acceptance
    max_depth: int = PAPER_MAX_DEPTH
    max_spine: int = PAPER_MAX_SPINE
    top_k: int = PAPER_TOP_K
    spine: bool = True  # False: the transition-only candidate tree (no spine anywhere)
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def spine_eligible(self, kind: int, depth: int) -> bool:
        """May a node of this kind at this depth have a spine child?"""
        return self.spine and kind != TRANSITION and depth + 1 <= self.max_spine

    def rank_cap(self, kind: int, depth: int, with_spine: bool) -> int:
        """How many transition ranks (0..cap-1) a node may have: 0 past max_depth, top_k under
        the independent model, and the feasible prefix under the exclusive model."""
        key = ("cap", kind, depth + 1 <= self.max_depth, depth if with_spine else -1)
        if key not in self._cache:
            self._cache[key] = self._cap(kind, depth, with_spine)
        return self._cache[key]

    def rank_set(self, kind: int, depth: int, with_spine: bool) -> tuple[int, ...]:
        """The transition ranks a node may have for the best-first rules: none past max_depth,
        0..top_k-1 under the independent model, and under the exclusive model each rank, in rank
        order, whose q still fits beside the spine child (if any) and the ranks kept before it
        (first fit: a superset of :meth:`rank_cap`'s prefix, equal to it when p_t does not fall).

        Example:
            >>> from goose_theory.acceptance import Acceptance
            >>> Candidate(Acceptance.parse(0.7, "0.36,0.09,0.05,0.04"), top_k=4).rank_set(ROOT, 0, True)
            (1, 2, 3)
        """
        key = ("set", kind, depth + 1 <= self.max_depth, depth if with_spine else -1)
        if key not in self._cache:
            self._cache[key] = self._first_fit(kind, depth, with_spine)
        return self._cache[key]

    def _first_fit(self, kind: int, depth: int, with_spine: bool) -> tuple[int, ...]:
        if depth + 1 > self.max_depth:
            return ()
        if self.acceptance.independent:
            return tuple(range(self.top_k))
        total = self.acceptance.spine_q(depth + 1) if with_spine else 0.0
        kept = []
        for r in range(self.top_k):
            q = self.acceptance.transition_q(r, kind)
            if total + q <= 1.0 + EXCLUSIVE_TOLERANCE:
                kept.append(r)
                total += q
        return tuple(kept)

    def _cap(self, kind: int, depth: int, with_spine: bool) -> int:
        if depth + 1 > self.max_depth:
            return 0
        if self.acceptance.independent:
            return self.top_k
        total = self.acceptance.spine_q(depth + 1) if with_spine else 0.0
        for r in range(self.top_k):
            total += self.acceptance.transition_q(r, kind)
            if total > 1.0 + EXCLUSIVE_TOLERANCE:
                return r
        return self.top_k

    def truncation_note(self, kind: int, depth: int, with_spine: bool, first_fit: bool = False,
                        where: str | None = None) -> str | None:
        """A one-line note when :meth:`rank_cap` (or, ``first_fit``, :meth:`rank_set`) drops ranks
        at such a node, else None. ``where`` names the nodes (default: from kind and depth)."""
        cap = self.rank_cap(kind, depth, with_spine)
        if depth + 1 > self.max_depth or cap >= self.top_k:
            return None
        where = where or node_label(kind, depth)
        spine = self.spine_term(depth, with_spine)
        kept = self.rank_set(kind, depth, with_spine) if first_fit else tuple(range(cap))
        if kept and kept != tuple(range(len(kept))):  # first fit skipped a rank and kept later ones
            return f"exclusive model: at {where} {ranks_used(kept, self.top_k)} (first fit in rank order: {spine}p_t over the others would exceed 1)"
        used = f"ranks 0..{cap - 1} of top_k={self.top_k} may be used" if cap > 1 else f"rank 0 of top_k={self.top_k} may be used"
        return (f"exclusive model: at {where} only {used} ({spine}p_t summed over more ranks would exceed 1)" if cap else
                f"exclusive model: at {where} no transition rank fits ({spine}p_t(0) would exceed 1)")

    def spine_term(self, depth: int, with_spine: bool) -> str:
        """``"p_s(d) + "`` for a note on a node's ranks where its spine child weighs in: there is one,
        and its q is not 0 (with p_s = 0 the note spoke of a spine child that takes nothing), else ``""``."""
        return f"p_s({depth + 1}) + " if with_spine and self.acceptance.spine_q(depth + 1) > 0 else ""

    def keys(self, kind: int, depth: int, with_spine: bool) -> tuple[float | None, list[tuple[int, float]]]:
        """The model's effective probabilities (qeff, as in :mod:`goose_theory.yields`) of a
        node's candidate children (ranks :meth:`rank_set`, first fit), assuming the spine child is
        present iff ``with_spine``. Ranks come sorted by qeff, highest first (rank order when p_t
        is non-increasing)."""
        return self._keys(kind, depth, with_spine, first_fit=True)

    def prefix_keys(self, kind: int, depth: int, with_spine: bool) -> tuple[float | None, list[tuple[int, float]]]:
        """:meth:`keys` over the ranks :meth:`rank_cap` keeps (a prefix): the allocations' branches,
        which fill ranks in order, as the paper's builder does."""
        return self._keys(kind, depth, with_spine, first_fit=False)

    def _keys(self, kind: int, depth: int, with_spine: bool, *, first_fit: bool):
        key = ("keys", first_fit, kind, depth + 1 <= self.max_depth, depth if with_spine else -1)
        if key not in self._cache:
            acc = self.acceptance
            spine_q = acc.spine_q(depth + 1) if with_spine else None
            survive = 1.0 - spine_q if (with_spine and acc.independent) else 1.0
            ranks = []
            kept = self.rank_set(kind, depth, with_spine) if first_fit else range(self.rank_cap(kind, depth, with_spine))
            for r in kept:
                q = acc.transition_q(r, kind)  # transition acceptance depends on the parent's kind
                ranks.append((r, q * survive))
                if acc.independent:
                    survive *= 1.0 - q
            ranks.sort(key=lambda item: -item[1])  # stable: rank order among equal keys
            self._cache[key] = (spine_q, ranks)
        return self._cache[key]


class TreeBuilder:
    """A growing tree in insertion order (a parent always precedes its children)."""

    def __init__(self, candidate: Candidate) -> None:
        self.candidate = candidate
        self.parent, self.source, self.rank, self.depth = [-1], [ROOT], [0], [0]
        self.prob = [1.0]  # path product of the keys used to grow the tree
        # truncation notes -> where (a transition node?, depth): see note_list
        self.notes: dict[str, tuple[bool, int] | None] = {}

    @classmethod
    def from_lists(cls, candidate: Candidate, parent: list[int], source: list[int], rank: list[int],
                   depth: list[int]) -> "TreeBuilder":
        """A builder holding a whole tree at once (node 0 the root, parents first), as
        :meth:`add` node by node would leave it (path probabilities 0.0 past the root)."""
        builder = cls(candidate)
        builder.parent, builder.source, builder.rank, builder.depth = parent, source, rank, depth
        builder.prob = [1.0] + [0.0] * (len(parent) - 1)
        return builder

    def __len__(self) -> int:
        return len(self.parent)

    def add(self, parent: int, source: int, rank: int, prob: float = 0.0) -> int:
        self.parent.append(parent); self.source.append(source); self.rank.append(rank)
        self.depth.append(self.depth[parent] + 1); self.prob.append(prob)
        return len(self.parent) - 1

    def note(self, kind: int, depth: int, with_spine: bool, first_fit: bool = False) -> None:
        text = self.candidate.truncation_note(kind, depth, with_spine, first_fit)
        if text is not None:
            self.notes.setdefault(text, (kind == TRANSITION, depth))

    def note_list(self) -> list[str]:
        """The notes from the root down the spine, then transition nodes, shallow first, in
        whatever order the tree was grown (linear and harmonic grow the deepest spine node's
        branches first); notes without a place keep their order."""
        return sorted(self.notes, key=lambda text: self.notes[text] or (False, -1))

    def topology(self, meta: Mapping[str, Any] | None = None) -> Topology:
        c = self.candidate
        return Topology(tuple(self.parent), tuple(self.source), tuple(self.rank),
                        max_depth=c.max_depth, max_spine=c.max_spine, meta=dict(meta or {}))


def best_first(builder: TreeBuilder, *, budget: int, seeds: Iterable[int], grow_spine: bool = True,
               spine_nodes: frozenset[int] = frozenset(), keys: KeyFn | None = None) -> int:
    """Add up to ``budget`` nodes below ``seeds``, always the candidate of highest path
    probability (product of keys). A popped node pushes its spine child (if ``grow_spine``
    and eligible) and its first rank; popping a rank pushes the next one, so siblings stay
    contiguous in key order. Ties go to the earlier push, so a parent precedes its child.
    Nodes in ``spine_nodes`` already have a spine child: their keys account for it.
    Returns the number of nodes placed (less than ``budget`` only if the candidates run out).
    """
    cand = builder.candidate
    keys = keys or cand.keys
    heap: list[tuple[float, int, int, int, int, list[tuple[int, float]]]] = []
    counter = itertools.count()

    def push_children(v: int) -> None:
        kind, depth, prob = builder.source[v], builder.depth[v], builder.prob[v]
        grow = grow_spine and cand.spine_eligible(kind, depth)
        with_spine = grow or v in spine_nodes
        spine_key, ranks = keys(kind, depth, with_spine)
        builder.note(kind, depth, with_spine, first_fit=keys == cand.keys)  # other keys fill ranks in order
        if grow:
            p = prob * spine_key
            heapq.heappush(heap, (-p, next(counter), v, SPINE, 0, ranks))
        if ranks:
            heapq.heappush(heap, (-prob * ranks[0][1], next(counter), v, TRANSITION, 0, ranks))

    for seed in seeds:
        push_children(seed)
    placed = 0
    while placed < budget and heap:
        neg_p, _, parent, source, index, ranks = heapq.heappop(heap)
        rank = 0 if source == SPINE else ranks[index][0]
        node = builder.add(parent, source, rank, -neg_p)
        placed += 1
        if source == TRANSITION and index + 1 < len(ranks):
            p_parent = builder.prob[parent]
            heapq.heappush(heap, (-p_parent * ranks[index + 1][1], next(counter), parent,
                                  TRANSITION, index + 1, ranks))
        push_children(node)
    return placed


def breadth_first(builder: TreeBuilder, *, budget: int, seeds: Sequence[int],
                  children: Callable[[int], list[tuple[int, int]]]) -> int:
    """Add up to ``budget`` nodes level by level below ``seeds``: each node, in insertion
    order, gets ``children(node)`` (``(source, rank)`` pairs in priority order).
    Returns the number placed."""
    queue = list(seeds)
    placed, head = 0, 0
    while placed < budget and head < len(queue):
        v = queue[head]; head += 1
        for source, rank in children(v):
            if placed == budget:
                break
            queue.append(builder.add(v, source, rank)); placed += 1
    return placed


def largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` into integers proportional to ``weights`` (Hamilton's method; ties in
    the remainder go to the earlier position).

    Example:
        >>> largest_remainder(10, [3, 2, 1])
        [5, 3, 2]
    """
    wsum = float(sum(weights))
    if total <= 0 or wsum <= 0:
        return [0] * len(weights)
    exact = [total * w / wsum for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares
