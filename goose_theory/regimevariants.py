"""Regime files that differ from an exported one only in their matched tree: candidates for a
choice by trace replay (:func:`goose_runtime.replay.pick_by_replay`).

Why: the closed form prices a matched tree cycle by cycle, so it gives the non-confident matched
regime a pure spine (each spine slot beats a transition slot there). It cannot see what a failed
spine does to the *next* cycle: a bare spine that fails leaves the text right after the
divergence, where the matcher often re-matches a short n-gram, so short, poor matched cycles
follow (46% of the exported file's non-confident matches offered <= 2 tokens, against 23% of
goose@8's; docs/two-regime.md sections 10-11). A tree with transitions beside its spine catches
the diverging token more often. Scaling the matched regime's spine q by f < 1 before optimising
gives exactly those trees, shorter spines with branches; the replay, which follows the text
from cycle to cycle, prices them. :func:`length_variants` gives the same scales to files with one
matched tree per offered match length.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> m = Acceptance.parse([0.9] * 8, [0.05, 0.02])
    >>> [sum(1 for s in t.source if s == 1) for _, t in matched_trees(m, budget=6, scales=(1.0, 0.5))]
    [6, 4]
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from .acceptance import Acceptance
from .optimize import build_topology
from .regime import RegimeTau, file_prediction, harmonic_tau
from .regimefile import matched_by_length, without_interval
from .regimelength import length_tau, length_trees
from .topology import Topology

SPINE_SCALES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
MATCHED_KEYS = ("matched", "matched_by_length")  # a variant's matched trees replace both


def matched_trees(matched: Acceptance, *, budget: int, scales: Sequence[float] = SPINE_SCALES,
                  **limits: Any) -> list[tuple[float, Topology]]:
    """(f, the optimal tree at ``budget`` with every spine q of ``matched`` times f), one per
    distinct shape, in the order of ``scales``."""
    out, seen = [], set()
    for f in scales:
        acc = replace(matched, p_s=tuple(float(q) * f for q in matched.p_s))
        tree = build_topology("optimal", acc, budget=budget, **limits).topology
        shape = (tree.parent, tree.source, tree.rank)
        if shape not in seen:
            seen.add(shape)
            out.append((float(f), tree))
    return out


def matched_variants(pair: Topology, fit: Any, *, scales: Sequence[float] = SPINE_SCALES) -> list[tuple[float, Topology]]:
    """``pair`` (a regime file) with its matched tree replaced by each of :func:`matched_trees`
    under its fit's matched regime (``fit``: the file's ``RegimeFit``), priced by the closed form
    (``predicted_tau``, ``regime_prediction``; the file's spare-slot or by-length matched trees
    dropped); the file itself comes first, and stands for f = 1 unless it has by-length trees."""
    out: list[tuple[float, Topology]] = [(1.0, pair)]
    own_is_one_tree = matched_by_length(pair) is None
    for f, tree in matched_trees(fit.matched, budget=pair.budget, scales=scales):
        if f == 1.0 and own_is_one_tree:
            continue
        variant = tree.with_meta(**{**without_interval(pair).meta, "regimes": _without_matched(pair), "spine_scale": f})
        pred = file_prediction(variant, fit)  # the file's unmatched and confident trees, this matched one
        out.append((f, variant.with_meta(predicted_tau=pred.tau, regime_prediction=pred.to_dict())))
    return out


def length_variants(pair: Topology, fit: Any, *, scales: Sequence[float] = SPINE_SCALES) -> list[tuple[float, Topology]]:
    """``pair`` with one matched tree per offered match length (``regimes.matched_by_length``,
    :mod:`goose_theory.regimelength`) in place of its matched tree with spare slots, built with the
    spine's p_s times each of ``scales`` (one per distinct family), priced by the closed form with
    the file's unmatched and confident prices; [] without the fit's matched spine model."""
    spine = fit.spines[0] if fit.spines else None  # the file's own by-length family (if any) is not repeated
    prior = pair.meta.get("regime_prediction")
    if spine is None or not isinstance(prior, dict):
        return []
    own = matched_by_length(pair) or ()
    out, seen = [], {tuple((t.parent, t.source, t.rank) for t in own)}  # the file's own family is the file
    for f in scales:
        trees = length_trees(fit.matched, spine, fit.fill, budget=pair.budget, scale=f, max_depth=pair.max_depth,
                             max_spine=pair.max_spine)
        shape = tuple((t.parent, t.source, t.rank) for t in trees)
        if shape in seen:
            continue
        seen.add(shape)
        tm, nm = length_tau(trees, fit.matched, spine, fit.fill, budget=pair.budget)
        pred = _with_matched(prior, tm, nm)
        regimes = {**_without_matched(pair), "matched_by_length": [t.to_dict() for t in trees]}
        out.append((float(f), without_interval(pair).with_meta(regimes=regimes, predicted_tau=pred.tau, regime_prediction=pred.to_dict(),
                                             spine_scale=float(f), matched_rule="by-length")))
    return out


def _without_matched(pair: Topology) -> dict:
    """``pair``'s regimes without its matched trees (a variant brings its own)."""
    return {k: v for k, v in (pair.meta.get("regimes") or {}).items() if k not in MATCHED_KEYS}


def _with_matched(prior: dict, tau_matched: float, nodes_matched: float) -> RegimeTau:
    """The file's stored prediction (``regime_prediction``) with its matched regime's price replaced."""
    p = {**prior, "tau_matched": tau_matched, "nodes_matched": nodes_matched}
    tc, pc = p.get("tau_confident", 1.0), p.get("psi_confident", 0.0)
    tau = harmonic_tau(tau_matched, p["tau_unmatched"], p["psi"], tau_confident=tc, psi_confident=pc)
    return RegimeTau(tau, tau_matched, p["tau_unmatched"], p["psi"], nodes_matched, p["nodes_unmatched"], pc,
                     p.get("tau_confident", float("nan")), p.get("nodes_confident", float("nan")))
