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

from ._spare_kernels import _grow, _price, _set_slot
from .acceptance import Acceptance
from .topology import PAPER_TOP_K, SOURCE_NAMES, Topology

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


def _arrays(topology: Topology, acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], size: int,
            top_k: int, draws: int, seed: int):
    """(tree, model, draws) for the kernels: ``topology`` set in arrays of ``size`` nodes, the rates
    (p_t by parent kind and rank, p_s, end-of-spine, fill) and the match lengths and fill draws."""
    width = max([top_k, *(r + 1 for r in topology.rank)])
    model = (np.array([[acceptance.transition_q(r, k) for r in range(width)] for k in range(3)]),
             np.asarray(spine.p_s, dtype=np.float64), np.asarray(spine.end, dtype=np.float64),
             np.asarray(fill, dtype=np.float64))
    tree = (*(np.zeros(size, dtype=np.int64) for _ in range(4)), *(np.ones(size) for _ in range(4)))
    tree[0][0] = -1
    for v in range(1, len(topology.parent)):
        _set_slot(v, topology.parent[v], topology.source[v], topology.rank[v], tree, model)
    pmf = spine.length_pmf()
    keep = np.flatnonzero(pmf > 1e-9)
    full = all(f >= 1.0 for f in fill)
    u = np.random.default_rng(seed).random((1 if full else draws, size))
    return tree, model, (keep.astype(np.int64), pmf[keep] / pmf[keep].sum(), u)


def spare_tau(topology: Topology, acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], budget: int, *,
              draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """(E[tau], expected nodes placed) of ``topology`` in a matched regime as the runtime fills it
    at ``budget`` (module docstring): exact over the match length L, Monte Carlo (``draws`` per L)
    over slot fill. ``acceptance`` gives the mid-spine and chain p_t's with ``fill`` folded in
    (as fitted); its p_s is not used (``spine`` has it)."""
    n = len(topology.parent)
    tree, _, fill_draws = _arrays(topology, acceptance, spine, fill, n, 1, draws, seed)
    tau, nodes = _price(n, tree, fill_draws, int(budget))
    return float(tau), float(nodes)


def grow_spare(topology: Topology, acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], budget: int, *,
               max_slots: int, top_k: int = PAPER_TOP_K, draws: int = DRAWS, seed: int = 0,
               tol: float = 1e-4) -> Topology:
    """``topology`` plus the slots (each the lowest free transition rank below ``top_k`` or the
    spine child of a node, within its depth limits) that, added one at a time where
    :func:`spare_tau` rises most, raise it by more than ``tol``; at most ``max_slots`` non-root
    nodes. Same meta."""
    if len(topology.parent) - 1 > max_slots:  # the draws are sized for max_slots nodes
        raise ValueError(f"the tree already has {len(topology.parent) - 1} nodes, more than max_slots={max_slots}")
    tree, model, fill_draws = _arrays(topology, acceptance, spine, fill, max_slots + 1, top_k, draws, seed)
    n = _grow(len(topology.parent), tree, model, fill_draws, int(budget), topology.max_depth, topology.max_spine,
              top_k, tol)
    parent, kind, rank = (a[:n].tolist() for a in tree[:3])
    return Topology.from_nodes([(p, SOURCE_NAMES[k], r) for p, k, r in zip(parent, kind, rank)],
                               max_depth=topology.max_depth, max_spine=topology.max_spine, meta=topology.meta)
