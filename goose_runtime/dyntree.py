"""``auto``: a cost-aware Goose tree grown best-first from calibrated per-node acceptance.

The paper fixes the budget (B = 60) and the shape (spine ratio tiers, harmonic branches). On a
CPU a 60-node forward costs several decode steps, so the budget and the shape must follow what
each node is worth *now*. ``auto`` keeps Goose's two sources (the matched spine, the adjacency
table's transitions) and decides every cycle, node by node:

1. **What a node is worth.** Its chance of being accepted is the product, along its path, of
   each node's chance of matching the target's argmax given its parent was accepted. That chance
   comes from a :class:`Calibration` learnt online from the walks: a spine node's by (depth,
   high-confidence match); a transition node's by (kind of parent, bin of the softmax probability
   the adjacency table stored when it harvested the candidate). Kinds of parent: the root without
   a spine child, the root with one (the spine takes the likely token), a spine node, a transition
   node. Real traces show these differ several-fold (README, "Models of acceptance").
2. **Best-first growth.** A heap holds every candidate child of the nodes placed so far; the one
   with the largest path probability goes in next (a child never outranks its parent, so the
   placed nodes are always a tree, and every prefix of the order is one too).
3. **Cost-aware size.** E[tau] of the first n nodes is 1 + the sum of their path probabilities
   (the bonus token plus each node's chance to be accepted); the tree is cut at the n that
   maximises E[tau] / cycle_seconds(n) on the device's latency profile. n = 0 is a plain decoding
   step, so trees that cannot pay for themselves are not built.
4. **Stopping early, exactly.** Gains come out of the heap in non-increasing order, so after n
   nodes with best rate r* and last gain g, any larger tree m has rate at most
   (r* cost[n] + (m - n) g) / cost[m]; growth stops once that cannot exceed r* for any m, i.e.
   g <= r* min_m (cost[m] - cost[n]) / (m - n). The cut is the same as growing to the budget;
   on a device where a node costs much (a CPU) it saves most of the growing.

Any tree is verified losslessly by the greedy walk, so the estimates only decide speed.

Example:
    >>> from goose_theory.latency import LatencyProfile
    >>> steep = LatencyProfile(sizes=(1, 2, 64), seconds=(0.04, 0.08, 1.0))
    >>> policy = DynamicPolicy(steep, max_budget=8)
    >>> tree, keys = policy.build(Match((9, 9, 9), 3, 4, 3), None, 1, 2)
    >>> tree.n_nodes   # a second token per forward costs as much as a step: no tree
    1
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

import numpy as np

from goose_theory.latency import LatencyProfile
from goose_theory.topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, SPINE, TRANSITION

from .adjacency import AdjacencyTable
from .matcher import Match
from .store import NO_GUESS, Guess
from .trees import NAN, DraftTree, new_tree

PROB_EDGES = (0.01, 0.03, 0.06, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)   # 10 bins of the stored probability
SPINE_DEPTHS = 4                    # spine depth classes 1, 2, 3, >= 4
N_SPINE = 2 * SPINE_DEPTHS          # x (high-confidence match or not)
N_BINS = len(PROB_EDGES) + 1
ROOT_ALONE, ROOT_WITH_SPINE, UNDER_SPINE, UNDER_TRANSITION = range(4)
STORE_SHARE_EDGES = (0.2, 0.4, 0.6, 0.8, 0.95)  # the store's guess (``auto+store``) by its share (store.py)
STORE_KEY = N_SPINE + 4 * N_BINS    # its first class; one per share bin
N_STORE = len(STORE_SHARE_EDGES) + 1
STORE_HIT_PER_SHARE = 0.6  # a guess is right about 0.6x its share (held-out traces, both sets: bench_store.py)
EARLY_STOP = True  # False: grow to the budget or the floor, as before 1 Dec (bench/bench_overhead.py --auto-full-growth)


def _bin_centres(inner_edges: tuple[float, ...] = PROB_EDGES) -> list[float]:
    edges = (0.0, *inner_edges, 1.0)
    return [(edges[i] + edges[i + 1]) / 2 for i in range(len(edges) - 1)]


@dataclass
class Calibration:
    """Online acceptance estimates: a Beta posterior per class with exponential forgetting.

    Class keys: ``0 .. N_SPINE-1`` spine (``conf * SPINE_DEPTHS + depth class``), then
    ``N_SPINE + kind * N_BINS + bin`` for transitions, then ``STORE_KEY + bin`` for the store's guess
    by its share. The prior of a transition class is its bin's mid probability (the stored
    probability is the model's own guess), of a store class :data:`STORE_HIT_PER_SHARE` times its
    bin's mid share (a corpus's guess is right less often than its share there); a spine class starts
    at ``spine_prior``.
    ``decay`` forgets old evidence each cycle so the estimates follow the text.
    """

    prior_weight: float = 2.0
    spine_prior: float = 0.6
    decay: float = 0.98
    prior: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    hits: np.ndarray = field(default=None, repr=False)   # type: ignore[assignment]
    seen: np.ndarray = field(default=None, repr=False)   # type: ignore[assignment]

    def __post_init__(self) -> None:
        n = STORE_KEY + N_STORE
        if self.prior is None:
            store = [STORE_HIT_PER_SHARE * share for share in _bin_centres(STORE_SHARE_EDGES)]
            self.prior = np.array([self.spine_prior] * N_SPINE + _bin_centres() * 4 + store)
        self.hits = np.zeros(n) if self.hits is None else self.hits
        self.seen = np.zeros(n) if self.seen is None else self.seen
        self.refresh()

    def refresh(self) -> None:
        """Recompute the per-class estimates (a list: scalar reads in the builder stay cheap)."""
        w = self.prior_weight
        self.q = ((self.hits + w * self.prior) / (self.seen + w)).tolist()

    def observe(self, keys: list[int], hits: list[bool]) -> None:
        """Fold one cycle's reached nodes (class key, matched?) into the estimates."""
        self.hits *= self.decay
        self.seen *= self.decay
        if keys:
            np.add.at(self.seen, keys, 1.0)
            np.add.at(self.hits, keys, np.asarray(hits, dtype=float))
        self.refresh()

    @staticmethod
    def spine_key(high_confidence: bool, depth: int) -> int:
        return int(high_confidence) * SPINE_DEPTHS + min(depth, SPINE_DEPTHS) - 1

    @staticmethod
    def transition_key(kind: int, prob: float) -> int:
        return N_SPINE + kind * N_BINS + bisect.bisect_right(PROB_EDGES, prob)

    @staticmethod
    def store_key(share: float) -> int:
        return STORE_KEY + bisect.bisect_right(STORE_SHARE_EDGES, share)


@dataclass
class DynamicPolicy:
    """The tree builder of ``auto``: calibration (shared across prompts) plus the latency profile."""

    latency: LatencyProfile
    max_budget: int = 63
    top_k: int = PAPER_TOP_K
    max_depth: int = PAPER_MAX_DEPTH  # transition nodes stay within the paper's branch depth
    max_spine: int = PAPER_MAX_SPINE
    calibration: Calibration = field(default_factory=Calibration)

    def __post_init__(self) -> None:
        top = min(self.max_budget, max(self.latency.sizes) - 1)
        self.max_budget = max(top, 0)
        self.cost = [self.latency.cycle_seconds(n) for n in range(self.max_budget + 1)]
        # growth stops below this path probability: half the mean marginal cost of a node relative
        # to a plain step (only saves building time; _best_size picks the size among what was grown)
        span = self.max_budget - 1
        self.floor = 0.5 * (self.cost[-1] - self.cost[1]) / span / self.cost[0] if span > 0 else 0.0
        self.min_slope = _min_slopes(self.cost)

    def build(self, match: Match, adj: AdjacencyTable | None, before_anchor: int,
              anchor: int, guess: Guess = NO_GUESS) -> tuple[DraftTree, list[int]]:
        """This cycle's tree and each node's calibration key (-1 for the root). ``guess`` (unmatched
        cycles): the retrieval store's, a root candidate of rank ``top_k`` priced by the calibration
        class of its share."""
        tree, keys, gains = _grow(self, match, adj, before_anchor, anchor, guess)
        n = _best_size(gains, self.cost)
        return _truncate(tree, n + 1), keys[: n + 1]

    def observe(self, tree: DraftTree, keys: list[int], argmax: list[int], path: list[int]) -> None:
        """Learn from the walk: every node whose parent was accepted was reached."""
        on_path = set(path)
        reached, hits = [], []
        for i in range(1, tree.n_nodes):
            p = tree.parent[i]
            if p in on_path:
                reached.append(keys[i])
                hits.append(tree.token[i] == argmax[p])
        self.calibration.observe(reached, hits)

    def spine_estimate(self) -> float:
        """Current estimate of first-spine-node acceptance (recorded in the trace's ``ema``)."""
        return self.calibration.q[Calibration.spine_key(False, 1)]


def _grow(policy: DynamicPolicy, match: Match, adj: AdjacencyTable | None, before_anchor: int,
          anchor: int, guess: Guess = NO_GUESS) -> tuple[DraftTree, list[int], list[float]]:
    """Place up to ``max_budget`` nodes best-first by path probability; gains[i] is node i+1's."""
    q = policy.calibration.q
    chain, conf = match.tokens[: policy.max_spine], match.high_confidence
    tree, keys, gains = new_tree(anchor, match), [-1], []
    heap: list[tuple] = []
    seq = 0

    def push_children(node: int, reach: float) -> None:
        nonlocal seq
        depth, src = tree.depth[node], tree.source[node]
        spine_tok = chain[depth] if (node == 0 or src == SPINE) and depth < len(chain) else None
        if spine_tok is not None:
            key = Calibration.spine_key(conf, depth + 1)
            heapq.heappush(heap, (-reach * q[key], seq, node, SPINE, 0, spine_tok, NAN, depth + 1, key))
            seq += 1
        if adj is None or depth >= policy.max_depth:
            return
        kind = (UNDER_TRANSITION if src == TRANSITION else UNDER_SPINE if node else
                ROOT_WITH_SPINE if spine_tok is not None else ROOT_ALONE)
        p = tree.parent[node]
        toks, probs = adj.lookup(tree.token[p] if p >= 0 else before_anchor, tree.token[node])
        toks = toks[: policy.top_k]
        for rank, (tok, prob) in enumerate(zip(toks, probs)):
            if tok == spine_tok:
                continue
            key = Calibration.transition_key(kind, prob)
            heapq.heappush(heap, (-reach * q[key], seq, node, TRANSITION, rank, tok, prob, 0, key))
            seq += 1
        if node == 0 and guess.token >= 0 and spine_tok is None and guess.token not in toks:
            key = Calibration.store_key(guess.share)
            heapq.heappush(heap, (-q[key], seq, 0, TRANSITION, policy.top_k, guess.token, NAN, 0, key))
            seq += 1

    push_children(0, 1.0)
    cost, min_slope = policy.cost, policy.min_slope
    best_rate, total = 1.0 / cost[0], 1.0
    while heap and len(gains) < policy.max_budget:
        neg, _, parent, src, rank, tok, score, spine_pos, key = heapq.heappop(heap)
        if -neg < policy.floor:
            break
        node = tree.add(parent, src, rank, tok, score, spine_pos)
        keys.append(key)
        gains.append(-neg)
        total -= neg
        best_rate = max(best_rate, total / cost[len(gains)])
        if EARLY_STOP and -neg <= best_rate * min_slope[len(gains)] * (1.0 - 1e-9):  # no larger tree beats it
            break
        push_children(node, -neg)
    return tree, keys, gains


def _min_slopes(cost: list[float]) -> list[float]:
    """``[min over m > n of (cost[m] - cost[n]) / (m - n) for each n]``; infinity for the last n
    (nothing larger to grow to). A negative slope (a noisy profile) never stops growth early.

    Example:
        >>> _min_slopes([1.0, 2.0, 2.5, 4.0])
        [0.75, 0.5, 1.5, inf]
    """
    return [min(((cost[m] - c) / (m - n) for m in range(n + 1, len(cost))), default=float("inf"))
            for n, c in enumerate(cost)]


def _best_size(gains: list[float], cost: list[float]) -> int:
    """The n maximising (1 + sum of the first n gains) / cost[n] (n = 0: a plain step)."""
    best_n, best_rate, total = 0, 1.0 / cost[0], 1.0
    for n, g in enumerate(gains, start=1):
        total += g
        rate = total / cost[n]
        if rate > best_rate:
            best_n, best_rate = n, rate
    return best_n


def _truncate(tree: DraftTree, n_nodes: int) -> DraftTree:
    """The first ``n_nodes`` nodes (parents come first, so any prefix is a tree)."""
    if n_nodes >= tree.n_nodes:
        return tree
    for name in ("parent", "source", "rank", "token", "score", "spine_pos", "depth"):
        setattr(tree, name, getattr(tree, name)[:n_nodes])
    tree.children = [[c for c in kids if c < n_nodes] for kids in tree.children[:n_nodes]]
    return tree
