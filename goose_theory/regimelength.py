"""Matched trees by match length: one tree for each length L of the spine the matcher offers.

Why: the runtime knows, before it drafts, how many tokens the context matcher offers. A single
matched tree of ``budget`` slots drops every spine slot deeper than L with its subtree, so on a
short match it verifies a few nodes where goose verifies the whole budget: on 197 held-out
stdlib-wide prompts (B = 15), the closed-form regime file's non-confident matched cycles offering
2 tokens placed 3 nodes and accepted 2.93 tokens per cycle, goose's 16 nodes and 4.79
(docs/two-regime.md section 13). A file with ``regimes.matched_by_length`` drafts tree
``min(L, n)`` instead (:func:`goose_theory.regimefile.matched_by_length`).

Each tree is optimal for its known L under the matched regime's spine model: a spine of m <= L
nodes (every m tried), then the slots that :func:`goose_theory.regimespare.grow_spare` adds
(end-of-spine rates below the spine's last node, spare slots past the budget that stand in for
transition slots without a candidate). ``scale`` multiplies the spine's p_s, as the replay pick's
variants do (:mod:`goose_theory.regimevariants`). The closed-form price mixes the trees' prices
over the fitted distribution of L (:func:`length_tau`).

Compromise: the growth may extend the spine again (up to L), so for a given start it is greedy,
not exhaustive (exact against brute force on tiny trees, ``tests/test_regimelength.py``). Growing
transitions only onto each fixed spine prices higher in the closed form but replays lower: on
HumanEval's fit texts it picks a 1-node spine for every L and replays 2.267 against 2.330, as the
end-of-spine rates, fitted where goose's spine ended, overrate transitions below a spine cut
short of its match.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> from goose_theory.regimespare import SpineModel
    >>> acc = Acceptance.parse([0.9] * 4, [0.05, 0.02])
    >>> spine = SpineModel(p_s=(0.9,), avail=(1.0, 0.5, 1.0, 1.0), end=(0.6, 0.1))
    >>> trees = length_trees(acc, spine, (1.0, 1.0, 1.0), budget=4)
    >>> [sum(1 for s in t.source if s == 1) for t in trees]   # spine nodes of the trees for L = 1..4
    [1, 2, 3, 4]
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numba
import numpy as np

from .acceptance import Acceptance
from .regimespare import SpineModel, grow_spare, spare_tau
from .topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, Topology

OVERFILL = 2  # slots per tree up to OVERFILL x budget: spare ones fill in for dropped ones (as regime.OVERFILL)


def known_length(spine: SpineModel, length: int, scale: float = 1.0) -> SpineModel:
    """``spine`` for a match of exactly ``length`` tokens, its p_s times ``scale`` (at most 1).

    Example:
        >>> known_length(SpineModel((0.9,), (1.0, 0.5), (0.6,)), 3, 0.5).length_pmf().tolist()
        [0.0, 0.0, 0.0, 1.0]
    """
    return SpineModel(tuple(min(1.0, q * scale) for q in spine.p_s), (1.0,) * length, spine.end)


def length_tree(acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], *, budget: int, length: int,
                scale: float = 1.0, max_depth: int = PAPER_MAX_DEPTH, max_spine: int = PAPER_MAX_SPINE,
                top_k: int = PAPER_TOP_K) -> Topology:
    """The best tree for a match of ``length`` tokens (module docstring): up to ``OVERFILL x
    budget`` slots, of which the runtime places ``budget``."""
    model = known_length(spine, length, scale)
    best: tuple[float, Topology] | None = None
    for m in range(min(length, budget, max_spine) + 1):
        chain = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(m)],
                                    max_depth=max_depth, max_spine=max_spine)
        tree = grow_spare(chain, acceptance, model, fill, budget, max_slots=OVERFILL * budget, top_k=top_k)
        tau = spare_tau(tree, acceptance, model, fill, budget)[0]
        if best is None or tau > best[0] + 1e-12:
            best = (tau, tree)
    assert best is not None
    return best[1]


def length_trees(acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], *, budget: int,
                 scale: float = 1.0, **limits) -> tuple[Topology, ...]:
    """:func:`length_tree` for L = 1 .. min(budget, max_spine): a longer match drafts the last.

    The lengths are built side by side on ``numba.get_num_threads()`` threads (by default
    ``NUMBA_NUM_THREADS``), as the growth kernel releases the GIL; each tree depends on its own L
    only, so the result is the same whatever the thread count. The longest lengths (the most
    spines to try) start first."""
    n = min(budget, limits.get("max_spine", 20))

    def build(length: int) -> Topology:
        return length_tree(acceptance, spine, fill, budget=budget, length=length, scale=scale, **limits)

    longest_first = range(n, 0, -1)
    workers = min(n, numba.get_num_threads())
    if workers <= 1:
        return tuple(reversed([build(L) for L in longest_first]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return tuple(reversed(list(pool.map(build, longest_first))))


def length_tau(trees: Sequence[Topology], acceptance: Acceptance, spine: SpineModel, fill: Sequence[float], *,
               budget: int) -> tuple[float, float]:
    """(E[tau], expected nodes placed) of a matched regime that drafts ``trees[min(L, n) - 1]``
    for a match of L tokens, L drawn from ``spine``'s fitted length distribution (p_s unscaled:
    this is the closed form's price, whatever scale built the trees)."""
    pmf = spine.length_pmf()
    tau = nodes = total = 0.0
    for length in np.flatnonzero(pmf > 1e-9):
        if length == 0:
            continue
        t, k = spare_tau(trees[min(int(length), len(trees)) - 1], acceptance, known_length(spine, int(length)), fill,
                         budget)
        tau += pmf[length] * t; nodes += pmf[length] * k; total += pmf[length]
    if total <= 0:
        raise ValueError("the spine model offers no match of length >= 1")
    return tau / total, nodes / total
