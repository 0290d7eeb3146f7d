"""Matched trees with spare slots: E[tau] as the runtime fills a file's tree for a match of random
length, and the greedy growth of spare slots that this pricing rewards.

Why: the runtime (``goose_runtime.trees.build_from_topology``) fills a topology breadth-first in
priority order (spine child first, then transitions by rank) and stops after ``budget`` placed
nodes. A spine slot deeper than the match's length L is dropped with its subtree, a transition
slot without an adjacency candidate likewise. A matched tree of exactly ``budget`` slots with a
12-node spine thus placed 6.9 of 16 nodes on held-out stdlib prompts, whose matches are short
(L = 4 or 6); slots *beyond* the budget in breadth-first order are placed exactly when earlier
ones drop, so they cost nothing in the cycles where the budget is used up.

:func:`spare_tau` prices a tree under that process: L is drawn from the fitted spine
availability of the regime (a(d) = P(L >= d | L >= d - 1), :class:`SpineModel`), a spine node
at depth d is accepted with p_s(d) given it exists, and a transition under a spine node with no
placed spine child (the end of the drafted spine) is accepted at the end-of-spine rate, which
the traces put far above the mid-spine one (rank 0: 0.83-0.90 on stdlib and HumanEval against
0.04-0.36). :func:`grow_spare` adds slots greedily to a tree while this price rises.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> from goose_theory.topology import Topology
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
    >>> s = SpineModel(p_s=(1.0,), avail=(1.0, 0.5), end=(0.0,))
    >>> round(spare_tau(t, Acceptance.parse(0.0, 0.0), s, (1.0, 1.0, 1.0), 2)[0], 6)  # 1 + 1 + 0.5
    2.5
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ._numba import jit
from .acceptance import Acceptance
from .regimefill import bfs_order
from .topology import SOURCE_NAMES, SPINE, TRANSITION, Topology

DRAWS = 64          # fill draws per match length
PRIOR_N = 10.0      # end-of-spine rates: pseudo-count of the chain-rate prior (the traces hold 6-40 nodes)
MAX_RANK = 10


@dataclass(frozen=True)
class SpineModel:
    """A matched regime's spine: p_s(d) given the node exists, a(d) (d = 1, 2, ...; last values
    repeat for p_s, 0 past the end for a) and the end-of-spine transition rates by rank (slot
    fill folded in, as in the fitted p_t's)."""

    p_s: tuple[float, ...]
    avail: tuple[float, ...]
    end: tuple[float, ...]

    def length_pmf(self) -> np.ndarray:
        """P(L = l), l = 0..len(avail).

        Example:
            >>> SpineModel((1.0,), (1.0, 0.5), (0.0,)).length_pmf().tolist()
            [0.0, 0.5, 0.5]
        """
        at_least = np.cumprod(np.concatenate([[1.0], np.asarray(self.avail, dtype=float)]))
        return at_least - np.concatenate([at_least[1:], [0.0]])

    def effective(self) -> list[float]:
        """p_s(d) a(d): the spine q of the exact yield, which folds the availability in.

        Example:
            >>> SpineModel((0.8,), (1.0, 0.5), (0.0,)).effective()
            [0.8, 0.4]
        """
        return [self.p_s[min(d, len(self.p_s)) - 1] * a for d, a in enumerate(self.avail, start=1)]

    def to_dict(self) -> dict[str, Any]:
        return {"p_s": list(self.p_s), "avail": list(self.avail), "end": list(self.end)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SpineModel":
        """The inverse of :meth:`to_dict` (a regime file's stored ``spines``).

        Example:
            >>> SpineModel.from_dict({"p_s": [0.8], "avail": [1.0, 0.5], "end": [0.6]}).effective()
            [0.8, 0.4]
        """
        return cls(tuple(data["p_s"]), tuple(data["avail"]), tuple(data["end"]))


def end_rates(nodes: pd.DataFrame, prior: Sequence[float]) -> tuple[float, ...]:
    """P(match | exists) by rank of transitions under a spine node that has no spine child, in
    matched cycles (``regime`` >= 1; rows as ``regimefit._annotate`` gives them), shrunk toward
    ``prior`` (unfolded rates by rank) with ``PRIOR_N`` pseudo-nodes: the traces hold few."""
    sel = nodes[nodes["reached"] & (nodes["node"] > 0) & (nodes["regime"] >= 1) & (nodes["source"] == "transition")
                & (nodes["parent_source"] == "spine") & ~nodes["spine_sibling"]]
    rank = sel["rank"].clip(upper=MAX_RANK - 1).to_numpy()
    k = np.bincount(rank, weights=sel["match"].to_numpy(dtype=float), minlength=MAX_RANK)
    n = np.bincount(rank, minlength=MAX_RANK).astype(float)
    base = np.array([prior[min(r, len(prior) - 1)] for r in range(MAX_RANK)], dtype=float)
    return tuple(float(x) for x in (k + PRIOR_N * base) / (n + PRIOR_N))


@jit
def _kernel(order, parent, kind, depth, q_mid, q_end, q_spine, exist, lengths, weights, u, budget):
    """sum_L w(L) mean_draws (E[tau], nodes placed) of the breadth-first fill (module docstring)."""
    n = parent.shape[0]
    placed = np.zeros(n, dtype=np.bool_)
    spined = np.zeros(n, dtype=np.bool_)  # the node got a placed spine child
    reach = np.zeros(n)
    tau_sum, node_sum = 0.0, 0.0
    for i in range(lengths.shape[0]):
        L = lengths[i]
        for s in range(u.shape[0]):
            placed[:] = False
            spined[:] = False
            placed[0] = True
            reach[0] = 1.0
            count, tau = 0, 1.0
            for j in range(order.shape[0]):
                if count >= budget:
                    break
                v = order[j]
                p = parent[v]
                if not placed[p]:
                    continue
                if kind[v] == 1:
                    if depth[v] > L:
                        continue
                    q = q_spine[v]
                    spined[p] = True
                else:
                    if u[s, v] >= exist[v]:
                        continue
                    q = q_end[v] if (kind[p] == 1 and not spined[p]) else q_mid[v]
                placed[v] = True
                count += 1
                reach[v] = reach[p] * q
                tau += reach[v]
            tau_sum += weights[i] * tau / u.shape[0]
            node_sum += weights[i] * count / u.shape[0]
    return tau_sum, node_sum


class _Pricer:
    """The per-node arrays of :func:`_kernel` for one (acceptance, spine, fill, budget)."""

    def __init__(self, acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], budget: int,
                 max_nodes: int, *, draws: int = DRAWS, seed: int = 0):
        pmf = spine.length_pmf()
        keep = np.flatnonzero(pmf > 1e-9)
        self.lengths, self.weights = keep.astype(np.int64), pmf[keep] / pmf[keep].sum()
        full = all(f >= 1.0 for f in fill)
        self.u = np.random.default_rng(seed).random((1 if full else draws, max_nodes))
        self.acc, self.spine, self.fill, self.budget = acceptance, spine, tuple(fill), budget

    def price(self, parent: Sequence[int], kind: Sequence[int], rank: Sequence[int]) -> tuple[float, float]:
        n = len(parent)
        depth = np.zeros(n, dtype=np.int64)
        q_mid, q_end, q_spine, exist = np.ones(n), np.ones(n), np.ones(n), np.ones(n)
        p_s, end, fill = self.spine.p_s, self.spine.end, self.fill
        for v in range(1, n):
            p = parent[v]
            depth[v] = depth[p] + 1
            if kind[v] == SPINE:
                q_spine[v] = p_s[min(depth[v], len(p_s)) - 1]
                continue
            f = fill[kind[p]]
            exist[v] = f
            q_mid[v] = min(self.acc.transition_q(rank[v], kind[p]) / f, 1.0) if f > 0 else 0.0
            q_end[v] = min(end[min(rank[v], len(end) - 1)] / fill[SPINE], 1.0) if fill[SPINE] > 0 else 0.0
        tau, nodes = _kernel(bfs_order(parent, kind, rank), np.asarray(parent, dtype=np.int64),
                             np.asarray(kind, dtype=np.int64), depth, q_mid, q_end, q_spine, exist,
                             self.lengths, self.weights, self.u[:, :n], int(self.budget))
        return float(tau), float(nodes)


def spare_tau(topology: Topology, acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], budget: int, *,
              draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """(E[tau], expected nodes placed) of ``topology`` in a matched regime as the runtime fills it
    at ``budget`` (module docstring): exact over the match length L, Monte Carlo (``draws`` per L)
    over slot fill. ``acceptance`` gives the mid-spine and chain p_t's with ``fill`` folded in
    (as fitted); its p_s is not used (``spine`` has it)."""
    pricer = _Pricer(acceptance, spine, fill, budget, len(topology.parent), draws=draws, seed=seed)
    return pricer.price(topology.parent, topology.source, topology.rank)


def grow_spare(topology: Topology, acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], budget: int, *,
               max_slots: int, top_k: int = 10, draws: int = DRAWS, seed: int = 0, tol: float = 1e-4) -> Topology:
    """``topology`` plus the slots (each the next-ranked transition child or the spine child of a
    node, within its depth limits) that, added one at a time where :func:`spare_tau` rises most,
    raise it by more than ``tol``; at most ``max_slots`` non-root nodes. Same meta."""
    parent, kind, rank = list(topology.parent), list(topology.source), list(topology.rank)
    if len(parent) - 1 > max_slots:  # the pricer's draws are sized for max_slots nodes
        raise ValueError(f"the tree already has {len(parent) - 1} nodes, more than max_slots={max_slots}")
    pricer = _Pricer(acceptance, spine, fill, budget, max_slots + 1, draws=draws, seed=seed)
    best, _ = pricer.price(parent, kind, rank)
    while len(parent) - 1 < max_slots:
        depth = [0] * len(parent)
        for v in range(1, len(parent)):
            depth[v] = depth[parent[v]] + 1
        trials = []
        for v in range(len(parent)):
            ranks = [rank[c] for c in range(1, len(parent)) if parent[c] == v and kind[c] == TRANSITION]
            if depth[v] < topology.max_depth and len(ranks) < top_k:
                trials.append((v, TRANSITION, len(ranks)))
            if kind[v] != TRANSITION and depth[v] < topology.max_spine and not any(
                    parent[c] == v and kind[c] == SPINE for c in range(1, len(parent))):
                trials.append((v, SPINE, 0))
        scored = [(pricer.price(parent + [v], kind + [k], rank + [r])[0], (v, k, r)) for v, k, r in trials]
        if not scored:
            break
        tau, (v, k, r) = max(scored, key=lambda x: x[0])
        if tau <= best + tol:
            break
        best = tau
        parent.append(v); kind.append(k); rank.append(r)
    return Topology.from_nodes([(p, SOURCE_NAMES[k], r) for p, k, r in zip(parent, kind, rank)],
                               max_depth=topology.max_depth, max_spine=topology.max_spine, meta=topology.meta)
