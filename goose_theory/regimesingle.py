"""The best *single* tree for both regimes (:mod:`goose_theory.regime`): a fixed topology drafted in
matched and unmatched cycles alike, scored by the two-regime harmonic mix.

tau(T) = 1 / (psi / tau_M(T) + (1 - psi) / tau_U(T)) is increasing in tau_M and tau_U, so the best
tree lies on their Pareto front. :func:`best_single` takes the ``optimal`` tree of the blended
acceptance (:func:`blend`: its E[tau] - 1 is w (tau_M - 1) + (1 - w) (tau_U - 1), additive over
nodes, where both regimes share their chain p_t) at a grid of weights w, searches between
neighbouring weights whose trees differ (:func:`blended_optima`), and scores every candidate
exactly. A heuristic, not an exhaustive search: a Pareto tree that no weight makes optimal (off
the hull), or one optimal only between two weights whose trees agree, is not found, and with
chain rates that differ between the regimes the blend is not additive (``bench/bench_regime_single.py``:
trees of up to 5 nodes, 5,000 realistic cases each with equal and with differing chains: 1 and 0
below the exhaustive optimum after the search, by 0.2%; 23 and 65, by up to 4.2%, with the grid alone).

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> m, u = Acceptance.parse(0.9, 0.1), Acceptance.parse(0.0, 0.3)
    >>> choice = best_single(m, u, 0.5, budget=6)
    >>> choice.prediction.tau >= regime_tau(choice.matched, m, u, 0.5).tau - 1e-12
    True
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .acceptance import Acceptance
from .optimize import build_topology
from .regime import RegimeChoice, regime_tau
from .topology import Topology
from .yields import yield_with_fallback

WEIGHTS = tuple(float(w) for w in np.concatenate([[0.0], np.geomspace(0.005, 1.0, 24)]))
REFINE_DEPTH = 2  # searches between two grid weights whose trees differ (blended_optima)


CHAINS = ("mix", "matched", "unmatched")


def blend(matched: Acceptance, unmatched: Acceptance, w: float, *, chain: str = "mix") -> Acceptance:
    """The acceptance whose exact E[tau] - 1 is w (tau_M - 1) + (1 - w) (tau_U - 1) on any tree when
    both regimes share their chain p_t (transition children of transition nodes): spine q(1) times
    w, root p_t mixed, p_t below spine nodes the matched regime's. Chain rates that differ cannot be
    blended additively (a product of mixes is no mix of products): ``chain`` takes them mixed
    (``"mix"``) or from one regime, and the optimum is then only a candidate, as :func:`best_single`
    treats every one (scored exactly)."""
    pt_m, pt_u = matched.transition_list(0), unmatched.transition_list(0)
    root = [w * matched.transition_q(r, 0) + (1 - w) * unmatched.transition_q(r, 0) for r in range(max(len(pt_m), len(pt_u)))]
    if chain == "mix":
        ranks = max(len(matched.transition_list(2)), len(unmatched.transition_list(2)))
        chain_q = [w * matched.transition_q(r, 2) + (1 - w) * unmatched.transition_q(r, 2) for r in range(ranks)]
    elif chain in CHAINS:
        chain_q = list((matched if chain == "matched" else unmatched).transition_list(2))
    else:
        raise ValueError(f"chain must be one of {', '.join(CHAINS)}, got {chain!r}")
    # deeper spine q's are written out: a one-value p_s repeats its last value, so scaling only
    # its first entry had scaled every depth by w (w^2 and more on paths; regime audit, 7 Dec)
    p_s = (w * matched.spine_q(1),) + tuple(matched.spine_q(d) for d in range(2, max(len(matched.p_s), 2) + 1))
    return replace(matched, p_s=p_s, p_t=tuple(root), p_t_spine=matched.transition_list(1), p_t_chain=tuple(chain_q))


def _tree_key(topology: Topology) -> tuple:
    return tuple(topology.parent), tuple(topology.source), tuple(topology.rank)


def blended_optima(matched: Acceptance, unmatched: Acceptance, *, budget: int, weights: Sequence[float] = WEIGHTS,
                   depth: int = REFINE_DEPTH, **limits: Any) -> list[tuple[float, Topology]]:
    """(w, tree) for the ``optimal`` tree of :func:`blend` at each weight, and between two neighbouring
    weights whose trees differ, at the weight where the two trees' w tau_M + (1 - w) tau_U tie (the
    dichotomic search of the (tau_M, tau_U) hull; at the midpoint where the blend is not additive),
    recursively up to ``depth`` times: a tree that is optimal only for w in (0.466, 0.491), between
    grid points 0.398 and 0.501, was missed by the grid alone (regime audit, 7 Dec: 4% below the
    exhaustive optimum). Where the regimes' chain rates differ, the search runs for each of
    :data:`CHAINS` (the mixed chain alone missed trees of small cases that the three find: the
    regime audit of 7 Dec). Distinct trees only, sorted by weight, first kept."""
    same_chain = matched.transition_list(2) == unmatched.transition_list(2)
    found: dict[tuple, tuple[float, Topology]] = {}
    for chain in CHAINS[:1] if same_chain else CHAINS:
        for w, t in _search(matched, unmatched, chain, budget, sorted(set(weights)), depth, limits):
            found.setdefault(_tree_key(t), (w, t))
    return sorted(found.values(), key=lambda wt: wt[0])


def _search(matched: Acceptance, unmatched: Acceptance, chain: str, budget: int, weights: list[float], depth: int,
            limits: dict) -> list[tuple[float, Topology]]:
    """:func:`blended_optima` for one way of blending the chain rates."""
    def tree(w: float) -> Topology:
        return build_topology("optimal", blend(matched, unmatched, w, chain=chain), budget=budget, **limits).topology

    def taus(t: Topology) -> tuple[float, float]:
        return yield_with_fallback(t, matched)[0].expected_tau, yield_with_fallback(t, unmatched)[0].expected_tau

    found = [(w, tree(w)) for w in weights]
    stack = [(a, ta, b, tb, depth) for (a, ta), (b, tb) in zip(found, found[1:])
             if depth > 0 and _tree_key(ta) != _tree_key(tb)]
    while stack:
        a, ta, b, tb, left = stack.pop()
        (ma, ua), (mb, ub) = taus(ta), taus(tb)
        den = (ma - mb) + (ub - ua)
        tie = (ub - ua) / den if den else math.nan
        w = tie if a < tie < b else 0.5 * (a + b)
        t = tree(w)
        found.append((w, t))
        key = _tree_key(t)
        if left <= 1 or (w == tie and key in (_tree_key(ta), _tree_key(tb))):  # a hull edge: nothing between
            continue
        if key != _tree_key(ta):
            stack.append((a, ta, w, t, left - 1))
        if key != _tree_key(tb):
            stack.append((w, t, b, tb, left - 1))
    return sorted(found, key=lambda wt: wt[0])


def best_single(matched: Acceptance, unmatched: Acceptance, psi: float, *, budget: int,
                weights: Sequence[float] = WEIGHTS, extra: Sequence[Topology] = (), **limits: Any) -> RegimeChoice:
    """The single topology with the highest two-regime tau among the blended optima
    (:func:`blended_optima`) and ``extra`` candidates (weight NaN)."""
    best: RegimeChoice | None = None
    cands = blended_optima(matched, unmatched, budget=budget, weights=weights, **limits) \
        + [(math.nan, t) for t in extra]
    for w, topo in cands:
        pred = regime_tau(topo, matched, unmatched, psi)
        if best is None or pred.tau > best.prediction.tau + 1e-12:
            best = RegimeChoice(topo, None, pred, w)
    assert best is not None
    return best
