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

Optimising: tau is increasing in tau_M and tau_U, so the best single topology lies on their
Pareto front; :func:`best_single` scans weights w and takes the ``optimal`` tree for the blended
acceptance (spine q times w, root p_t mixed w : 1 - w; the objective w tau_M + (1 - w) tau_U is
then additive over nodes), scoring each candidate exactly by the harmonic mean.
:func:`best_pair` gives one tree per regime (a runtime that switches on "no match").

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> m, u = Acceptance.parse(0.9, 0.1), Acceptance.parse(0.0, 0.3)
    >>> pred = regime_tau(best_pair(m, u, 0.5, budget=6).matched, m, u, 0.5)
    >>> round(pred.tau_matched, 3) > round(pred.tau_unmatched, 3)
    True
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from .acceptance import Acceptance
from .optimize import build_topology
from .topology import SCHEMA, Topology, topology_from_dict
from .yields import yield_with_fallback

WEIGHTS = tuple(float(w) for w in np.concatenate([[0.0], np.geomspace(0.005, 1.0, 24)]))


@dataclass(frozen=True)
class RegimeTau:
    """Expected tau per regime, the harmonic mix, and expected realised nodes per regime."""

    tau: float
    tau_matched: float
    tau_unmatched: float
    psi: float
    nodes_matched: float
    nodes_unmatched: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def harmonic_tau(tau_matched: float, tau_unmatched: float, psi: float) -> float:
    """Tokens per cycle when a share ``psi`` of tokens comes from matched cycles.

    Example:
        >>> round(harmonic_tau(8.0, 1.5, 0.7), 6)
        3.478261
    """
    if not 0.0 <= psi <= 1.0:
        raise ValueError(f"psi must lie in [0, 1], got {psi}")
    return 1.0 / (psi / tau_matched + (1.0 - psi) / tau_unmatched)


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
               unmatched_topology: Topology | None = None) -> RegimeTau:
    """Two-regime expected tau of ``topology`` (or of a pair: ``unmatched_topology`` is used in
    unmatched cycles)."""
    tm, nm = _expected(topology, matched)
    tu, nu = _expected(unmatched_topology or topology, unmatched)
    return RegimeTau(harmonic_tau(tm, tu, psi), tm, tu, psi, nm, nu)


def blend(matched: Acceptance, unmatched: Acceptance, w: float) -> Acceptance:
    """The acceptance whose exact E[tau] is w tau_M + (1 - w) tau_U - 1 + 1 on any tree, up to
    the chain p_t (taken from the matched regime below spine nodes and mixed below the root by
    using the matched values; see the module docstring)."""
    pt_m, pt_u = matched.transition_list(0), unmatched.transition_list(0)
    n = max(len(pt_m), len(pt_u))
    root = [w * matched.transition_q(r, 0) + (1 - w) * unmatched.transition_q(r, 0) for r in range(n)]
    chain = [w * matched.transition_q(r, 2) + (1 - w) * unmatched.transition_q(r, 2)
             for r in range(max(len(matched.transition_list(2)), len(unmatched.transition_list(2))))]
    p_s = (w * matched.spine_q(1),) + tuple(matched.p_s[1:])
    return replace(matched, p_s=p_s, p_t=tuple(root), p_t_spine=matched.transition_list(1), p_t_chain=tuple(chain))


@dataclass(frozen=True)
class RegimeChoice:
    """The chosen topology (or pair) and its two-regime prediction."""

    matched: Topology
    unmatched: Topology | None
    prediction: RegimeTau
    weight: float


def best_single(matched: Acceptance, unmatched: Acceptance, psi: float, *, budget: int,
                weights: Sequence[float] = WEIGHTS, extra: Sequence[Topology] = (), **limits: Any) -> RegimeChoice:
    """The single topology with the highest two-regime tau among the blended optima (and
    ``extra`` candidates, weight NaN)."""
    best: RegimeChoice | None = None
    cands = [(w, build_topology("optimal", blend(matched, unmatched, w), budget=budget, **limits).topology)
             for w in weights] + [(math.nan, t) for t in extra]
    for w, topo in cands:
        pred = regime_tau(topo, matched, unmatched, psi)
        if best is None or pred.tau > best.prediction.tau + 1e-12:
            best = RegimeChoice(topo, None, pred, w)
    assert best is not None
    return best


def best_pair(matched: Acceptance, unmatched: Acceptance, psi: float, *, budget: int, **limits: Any) -> RegimeChoice:
    """One optimal tree per regime: each maximises its own regime's E[tau], hence the mix."""
    tm = build_topology("optimal", matched, budget=budget, **limits).topology
    tu = build_topology("optimal", unmatched, budget=budget, **limits).topology
    return RegimeChoice(tm, tu, regime_tau(tm, matched, unmatched, psi, tu), 1.0)


def seconds_per_token(pred: RegimeTau, cycle_seconds: Any) -> float:
    """psi t_M / tau_M + (1 - psi) t_U / tau_U with t = ``cycle_seconds(nodes)`` (interpolated
    between the integer node counts around the expected one)."""
    def t(nodes: float) -> float:
        lo = int(math.floor(nodes))
        return cycle_seconds(lo) + (nodes - lo) * (cycle_seconds(lo + 1) - cycle_seconds(lo)) if nodes > lo else cycle_seconds(lo)
    return pred.psi * t(pred.nodes_matched) / pred.tau_matched + (1 - pred.psi) * t(pred.nodes_unmatched) / pred.tau_unmatched


def export_topologies(fit: Any, budget: int, *, provenance: dict, **limits: Any) -> tuple[Topology, Topology]:
    """(single, pair) topologies for a :class:`~goose_theory.regimefit.RegimeFit` at ``budget``,
    each with its two-regime ``predicted_tau`` and the fit in its metadata. The pair's file holds
    the matched tree and ``regimes.unmatched`` (read back by :func:`unmatched_topology`)."""
    single = best_single(fit.matched, fit.unmatched, fit.psi, budget=budget, **limits)
    pair = best_pair(fit.matched, fit.unmatched, fit.psi, budget=budget, **limits)
    common = {"acceptance": fit.matched.to_dict(), "regime_fit": fit.to_dict(),
              "provenance": provenance}
    one = single.matched.with_meta(rule="regime-optimal", predicted_tau=single.prediction.tau,
                                   regime_prediction=single.prediction.to_dict(), weight=single.weight, **common)
    assert pair.unmatched is not None
    two = pair.matched.with_meta(rule="regime-pair", predicted_tau=pair.prediction.tau,
                                 regime_prediction=pair.prediction.to_dict(),
                                 regimes={"unmatched": pair.unmatched.to_dict()}, **common)
    return one, two


def unmatched_topology(topology: Topology) -> Topology | None:
    """The tree a two-regime topology file drafts in cycles without a context match (its
    ``regimes.unmatched``), or None for a plain file. Raises ``TopologyError`` if it is malformed.

    Example:
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
        >>> u = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0)])
        >>> unmatched_topology(t.with_meta(regimes={"unmatched": u.to_dict()})).budget, unmatched_topology(t)
        (1, None)
    """
    spec = (topology.meta.get("regimes") or {}).get("unmatched")
    if not spec:
        return None
    return topology_from_dict({**spec, "schema": SCHEMA})


def regime_topologies(files: Sequence[str], *, benchmark: str | None, budget: int,
                      provenance: dict) -> tuple[Topology, Topology, Any, tuple[str, ...]]:
    """Fit the two-regime model from trace ``files`` (one ``benchmark``'s rows, or all) using the
    trace methods whose budgets are nearest ``budget``, and export the (single, pair) topologies
    at ``budget``; also returns the fit and the methods used. Reads those rows into memory."""
    from .regimefit import fit_regimes, nearest_methods, read_frames

    frames = read_frames(files, benchmark=benchmark)
    methods = tuple(nearest_methods(frames, budget))
    fit = fit_regimes(frames, methods=methods)
    single, pair = export_topologies(fit, budget, provenance={**provenance, "regime_methods": list(methods)})
    return single, pair, fit, methods


def save_regime_topologies(single: Topology, pair: Topology, path: str) -> str:
    """Write ``single`` to ``path`` (a ``.json`` file) and ``pair`` beside it as ``*-regimes.json``
    (each atomically); returns the pair's path."""
    from .topology import save_topology

    pair_path = path[: -len(".json")] + "-regimes.json"
    save_topology(single, path)
    save_topology(pair, pair_path)
    return pair_path
