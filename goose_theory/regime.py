"""Expected tau of a topology as the runtime will build it: the two-regime (matched / unmatched)
model, and the topologies that maximise it.

A cycle is *matched* when the context matcher offered a spine, *unmatched* otherwise
(:mod:`goose_theory.regimefit`). In an unmatched cycle a fixed topology loses every spine slot
with its subtree, so its expected tau is tau_U = E[tau](T) under the unmatched acceptance (p_s =
0); in a matched cycle tau_M = E[tau](T) under the matched one. If a share ``psi`` of the text is
produced by matched cycles (nearly method-independent, see regimefit), N tokens take
N psi / tau_M + N (1 - psi) / tau_U cycles, so the tokens per cycle are the weighted harmonic mean

    tau = 1 / (psi / tau_M + (1 - psi) / tau_U).

The same argument prices time: seconds per token = psi t_M / tau_M + (1 - psi) t_U / tau_U, with
t the cycle time at the expected number of nodes the runtime places in each regime.

A third, *confident* regime (:func:`goose_theory.regimefit.fit_regimes` with ``split=True``:
several n-gram lengths agree and the match is >= 8 tokens long, where the paper's goose verifies a
bare chain) takes its share ``psi_confident`` out of ``psi``; the mix then has three terms and
:func:`best_pair` gives it its own tree (the file's ``regimes.confident``).

Optimising: the best single topology for both regimes is :func:`goose_theory.regimesingle.best_single`'s
search. :func:`best_pair` gives one tree per regime (a runtime that switches on "no match"); with the
fit's spine models it prices the matched and confident trees as the runtime fills them for a match
of random length and gives them spare slots (:mod:`goose_theory.regimespare`). The files that
carry these trees are written by :mod:`goose_theory.regimeexport`.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> m, u = Acceptance.parse(0.9, 0.1), Acceptance.parse(0.0, 0.3)
    >>> pred = regime_tau(best_pair(m, u, 0.5, budget=6).matched, m, u, 0.5)
    >>> round(pred.tau_matched, 3) > round(pred.tau_unmatched, 3)
    True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .acceptance import Acceptance
from .optimize import build_topology
from .regimefile import confident_topology, matched_by_length, matched_topology, unmatched_topology
from .regimefill import filled_tau
from .regimelength import length_tau, length_trees
from .regimespare import grow_spare, spare_tau
from .topology import Topology
from .yields import yield_with_fallback

# a pair's unmatched tree may be the optimum at OVERFILL x the budget: the runtime fills a file's
# slots breadth-first up to the budget, dropping those the adjacency table has no candidate for,
# so spare slots take the place of missing ones (held-out HumanEval, B = 14: 9.8 nodes placed per
# unmatched cycle against 8.3 for the exact-budget tree, as goose's 9.3 from re-homing its budget)
OVERFILL = 2
FILL_SAMPLES = 256
# matched and confident trees get spare slots (held-out stdlib, B 8/16/18: 3.575/4.089/4.116 against
# goose@B's 3.546/4.063/4.103 when drafted; docs/two-regime.md section 5); the matched one is written
# as ``regimes.matched`` when BY_LENGTH is off; a runtime that does not draft it uses the file's own
# exact-budget tree as before
SPARE = True
# ... and the matched regime gets one tree per offered match length (regimes.matched_by_length): held-out
# stdlib-wide, B = 15, 197 prompts: 3.682 against goose@15's 3.661 and the one spare tree's 3.529
# (docs/two-regime.md section 13)
BY_LENGTH = True


@dataclass(frozen=True)
class RegimeTau:
    """Expected tau per regime, the harmonic mix, and expected realised nodes per regime."""

    tau: float
    tau_matched: float
    tau_unmatched: float
    psi: float
    nodes_matched: float
    nodes_unmatched: float
    psi_confident: float = 0.0          # share of tokens from confident cycles (part of psi)
    tau_confident: float = float("nan")
    nodes_confident: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        """The fields; the confident ones only for a three-regime prediction (JSON has no NaN)."""
        out = dict(self.__dict__)
        if math.isnan(self.tau_confident):
            for key in ("psi_confident", "tau_confident", "nodes_confident"):
                del out[key]
        return out


def harmonic_tau(tau_matched: float, tau_unmatched: float, psi: float, *, tau_confident: float = 1.0,
                 psi_confident: float = 0.0) -> float:
    """Tokens per cycle when a share ``psi`` of tokens comes from matched cycles (of it,
    ``psi_confident`` from confident ones, at ``tau_confident``).

    Example:
        >>> round(harmonic_tau(8.0, 1.5, 0.7), 6)
        3.478261
        >>> round(harmonic_tau(8.0, 1.5, 0.7, tau_confident=12.0, psi_confident=0.0), 6)
        3.478261
    """
    if not 0.0 <= psi_confident <= psi <= 1.0:
        raise ValueError(f"need 0 <= psi_confident <= psi <= 1, got {psi_confident}, {psi}")
    tau_matched, tau_confident, tau_unmatched = (_at_least_one(t) for t in (tau_matched, tau_confident, tau_unmatched))
    tau = 1.0 / ((psi - psi_confident) / tau_matched + psi_confident / tau_confident + (1.0 - psi) / tau_unmatched)
    # a harmonic mix of taus >= 1 with weights summing to 1 is >= 1 too, but the weights
    # (psi - psi_confident, psi_confident, 1 - psi) round: clamp that as well
    used = [t for t, w in ((tau_matched, psi - psi_confident), (tau_confident, psi_confident),
                           (tau_unmatched, 1.0 - psi)) if w > 0]
    return _at_least_one(tau) if all(t >= 1.0 for t in used) else tau


# how far below 1 a computed tau may land by rounding alone (sums of products of probabilities)
ROUNDING = 1e-9


def _at_least_one(tau: float) -> float:
    """A tau is at least 1 by construction (the bonus token is always accepted); a value a
    rounding below 1 is 1. At budget 0, fit-acceptance --regimes priced the confident tree at
    0.9999999999999981 and mixed a predicted_tau of 0.9999999999999991, which every topology
    loader refuses. Anything further below 1 is left alone, so a real error still shows."""
    return 1.0 if 1.0 - ROUNDING <= tau < 1.0 else tau


def _expected(topology: Topology, acceptance: Acceptance) -> tuple[float, float]:
    """(E[tau], nodes placed). A regime with p_s(1) = 0 places no spine subtree; the count is
    otherwise the topology's, an upper bound (unfilled transition slots cost nothing), which
    keeps the time estimate conservative."""
    result, _ = yield_with_fallback(topology, acceptance)
    keep = np.ones(len(topology.parent), dtype=bool)
    if acceptance.spine_q(1) <= 0:
        for v in range(1, len(topology.parent)):
            keep[v] = keep[topology.parent[v]] and topology.source[v] != 1
    return result.expected_tau, float(keep[1:].sum())


def regime_tau(topology: Topology, matched: Acceptance, unmatched: Acceptance, psi: float,
               unmatched_topology: Topology | None = None, *, confident: Acceptance | None = None,
               psi_confident: float = 0.0, confident_topology: Topology | None = None,
               fill: tuple[float, float, float] | None = None, budget: int | None = None,
               spines: tuple[Any, Any] = (None, None), by_length: Sequence[Topology] = ()) -> RegimeTau:
    """Two-regime expected tau of ``topology`` (or of a pair: ``unmatched_topology`` is used in
    unmatched cycles); with ``confident``, three regimes (``confident_topology`` in confident
    cycles, else ``topology``). With ``fill`` and ``budget``, an unmatched tree of more than
    ``budget`` slots is priced as the runtime fills it (:func:`~goose_theory.regimefill.filled_tau`),
    and with ``spines`` (the fit's :class:`~goose_theory.regimespare.SpineModel` of the matched
    and confident regimes) so are the matched and confident trees
    (:func:`~goose_theory.regimespare.spare_tau`: match length, end-of-spine rates, spare slots);
    ``by_length`` (needs them): matched trees by offered length in place of ``topology``
    (:func:`~goose_theory.regimelength.length_tau`)."""
    filled = fill is not None and budget is not None

    def matched_price(tree: Topology, acceptance: Acceptance, spine: Any) -> tuple[float, float]:
        return spare_tau(tree, acceptance, spine, fill, budget) if filled and spine is not None \
            else _expected(tree, acceptance)

    if by_length and filled and spines[0] is not None:
        tm, nm = length_tau(by_length, matched, spines[0], fill, budget=budget)
    else:
        tm, nm = matched_price(topology, matched, spines[0])
    if filled and unmatched_topology is not None and unmatched_topology.budget > budget:
        tu, nu = filled_tau(unmatched_topology, unmatched, fill, budget, samples=FILL_SAMPLES), float(budget)
    else:
        tu, nu = _expected(unmatched_topology or topology, unmatched)
    tm, tu = _at_least_one(tm), _at_least_one(tu)  # rounding below 1 (see _at_least_one)
    if confident is None:
        return RegimeTau(harmonic_tau(tm, tu, psi), tm, tu, psi, nm, nu)
    tc, nc = matched_price(confident_topology or topology, confident, spines[1])
    tc = _at_least_one(tc)
    return RegimeTau(harmonic_tau(tm, tu, psi, tau_confident=tc, psi_confident=psi_confident),
                     tm, tu, psi, nm, nu, psi_confident, tc, nc)


def file_prediction(topology: Topology, fit: Any) -> RegimeTau:
    """The regime tau of an exported topology file under a :class:`~goose_theory.regimefit.RegimeFit`,
    priced as the export and its variants price it: a file without ``regimes`` (one tree drafted in
    every cycle) by :func:`regime_tau` alone; a regime file with its unmatched, confident, spare-slot
    or by-length trees (:mod:`goose_theory.regimefile`), the slot fill and the spine models. Under
    the fit a file was exported from, its ``.tau`` is the file's ``predicted_tau``
    (tests/test_regimeinterval.py, which draws it under bootstrap fits)."""
    if not topology.meta.get("regimes"):
        return regime_tau(topology, fit.matched, fit.unmatched, fit.psi)
    confident = confident_topology(topology)
    return regime_tau(matched_topology(topology) or topology, fit.matched, fit.unmatched, fit.psi,
                      unmatched_topology(topology), confident=fit.confident, psi_confident=fit.psi_confident,
                      confident_topology=confident[0] if confident else None, fill=fit.fill, budget=topology.budget,
                      spines=fit.spines, by_length=matched_by_length(topology) or ())


@dataclass(frozen=True)
class RegimeChoice:
    """The chosen topology (or pair) and its two-regime prediction."""

    matched: Topology
    unmatched: Topology | None
    prediction: RegimeTau
    weight: float
    confident: Topology | None = None
    matched_spare: Topology | None = None  # ``matched`` with spare slots (file: ``regimes.matched``)
    by_length: tuple[Topology, ...] = ()   # one matched tree per offered length (``regimes.matched_by_length``)


def best_pair(matched: Acceptance, unmatched: Acceptance, psi: float, *, budget: int,
              confident: Acceptance | None = None, psi_confident: float = 0.0,
              fill: tuple[float, float, float] = (1.0, 1.0, 1.0), spines: tuple[Any, Any] = (None, None),
              **limits: Any) -> RegimeChoice:
    """One optimal tree per regime (two, or three with ``confident``): each maximises its own
    regime's E[tau], hence the mix. The unmatched one is the optimum at ``budget`` or, if
    :func:`~goose_theory.regimefill.filled_tau` prices it higher at the slot ``fill`` rates, at
    ``OVERFILL`` x ``budget`` (spare slots). With ``spines``, the matched and confident trees get
    the spare slots that :func:`~goose_theory.regimespare.grow_spare` adds (up to ``OVERFILL`` x
    ``budget`` slots); the matched one is then ``matched_spare`` beside the exact-budget ``matched``,
    and with ``BY_LENGTH`` one matched tree per offered match length (``by_length``,
    :mod:`goose_theory.regimelength`) prices the matched regime instead."""
    tm = build_topology("optimal", matched, budget=budget, **limits).topology
    no_spine = {**limits, "max_spine": 0}  # an unmatched cycle has no match: a spine slot there is worth 0, yet
    # the optimum filled OVERFILL x budget with such nodes where the ranks ran out, and no reader takes them
    tu = max((build_topology("optimal", unmatched, budget=k * budget, **no_spine).topology for k in (1, OVERFILL)),
             key=lambda t: filled_tau(t, unmatched, fill, budget, samples=FILL_SAMPLES))
    tc = build_topology("optimal", confident, budget=budget, **limits).topology if confident is not None else None
    spare = None
    if spines[0] is not None:
        spare = grow_spare(tm, matched, spines[0], fill, budget, max_slots=OVERFILL * budget)
    if tc is not None and spines[1] is not None:
        tc = grow_spare(tc, confident, spines[1], fill, budget, max_slots=OVERFILL * budget)
    by_length = length_trees(matched, spines[0], fill, budget=budget, **limits) \
        if BY_LENGTH and spines[0] is not None else ()
    pred = regime_tau(spare or tm, matched, unmatched, psi, tu, confident=confident, psi_confident=psi_confident,
                      confident_topology=tc, fill=fill, budget=budget, spines=spines, by_length=by_length)
    return RegimeChoice(tm, tu, pred, 1.0, tc, spare, by_length)


def seconds_per_token(pred: RegimeTau, cycle_seconds: Any) -> float:
    """(psi - psi_C) t_M / tau_M + psi_C t_C / tau_C + (1 - psi) t_U / tau_U with t =
    ``cycle_seconds(nodes)`` (interpolated between the integer node counts around the expected one).

    Example (a flat cycle time: seconds per token = t / tau):
        >>> pred = RegimeTau(0.0, 2.0, 1.5, 0.5, 3.0, 2.0, psi_confident=0.4, tau_confident=10.0, nodes_confident=8.0)
        >>> round(seconds_per_token(pred, lambda n: 1.0), 6), round(1 / harmonic_tau(2.0, 1.5, 0.5, tau_confident=10.0, psi_confident=0.4), 6)
        (0.423333, 0.423333)
    """
    def t(nodes: float) -> float:
        lo = int(math.floor(nodes))
        return cycle_seconds(lo) + (nodes - lo) * (cycle_seconds(lo + 1) - cycle_seconds(lo)) if nodes > lo else cycle_seconds(lo)
    total = (pred.psi - pred.psi_confident) * t(pred.nodes_matched) / pred.tau_matched \
        + (1 - pred.psi) * t(pred.nodes_unmatched) / pred.tau_unmatched
    if pred.psi_confident > 0:  # the confident regime's share had been priced at the matched tree's time and tau
        total += pred.psi_confident * t(pred.nodes_confident) / pred.tau_confident
    return total
