"""Exact yield of a speculation tree: E[tau], Var[tau] and the whole pmf of tau.

tau = tokens accepted per verification call, bonus token included, so tau = 1 + depth of the
last accepted node. Both acceptance models reduce to the same computation:

    qeff(c)  = q(c)                                    (exclusive)
             = q(c) * prod_{siblings s before c} (1 - q(s))   (independent, priority order)
    reach(v) = prod of qeff along the path root -> v   (probability that v is accepted)
    stop(v)  = reach(v) * (1 - sum_{children c} qeff(c))  (the walk ends at v)

    E[tau]   = 1 + sum_{v != root} reach(v)
    P(tau=k) = sum_{v: depth(v) = k-1} stop(v)

No Monte Carlo: one O(n) numba pass. The exclusive model requires sum_c q(c) <= 1 at every
node; :func:`exact_yield` raises :class:`ExclusiveModelError` naming the node otherwise.

Example:
    >>> from goose_theory.topology import Topology
    >>> from goose_theory.acceptance import Acceptance
    >>> chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
    >>> round(expected_tau(chain, Acceptance.parse(0.5, 0.1)), 6)   # 1 + 0.5 + 0.25
    1.75
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from ._numba import jit
from .acceptance import EXCLUSIVE_TOLERANCE, Acceptance, AcceptanceError
from .topology import SOURCE_NAMES, Topology


class ExclusiveModelError(AcceptanceError):
    """The exclusive model was asked for a node whose children's q sum above 1."""


R = TypeVar("R")


@jit
def _node_q(parent, source, rank, depth, p_s, p_t, out):
    """q(v) of every node: p_s by spine depth; p_t[parent's source, rank] (rows root, spine,
    transition); last value repeated."""
    out[0] = 1.0
    for i in range(1, source.shape[0]):
        if source[i] == 1:
            out[i] = p_s[min(depth[i], p_s.shape[0]) - 1]
        else:
            out[i] = p_t[source[parent[i]], min(rank[i], p_t.shape[1] - 1)]


@jit
def _effective_q(q, child_start, child_index, independent, out):
    """Fill qeff (see module docstring); return (node, child q sum) of the worst node."""
    out[0] = 1.0
    worst_node, worst_sum = 0, 0.0
    for v in range(child_start.shape[0] - 1):
        survive, total = 1.0, 0.0
        for k in range(child_start[v], child_start[v + 1]):
            c = child_index[k]
            total += q[c]
            if independent:
                out[c] = q[c] * survive
                survive *= 1.0 - q[c]
            else:
                out[c] = q[c]
        if total > worst_sum:
            worst_node, worst_sum = v, total
    return worst_node, worst_sum


@jit
def _reach_and_pmf(parent, depth, qeff, child_start, child_index, reach, pmf):
    """reach(v) by one forward pass; pmf[k] = P(tau = k). Returns E[tau]."""
    n = parent.shape[0]
    reach[0] = 1.0
    for i in range(1, n):
        reach[i] = reach[parent[i]] * qeff[i]
    pmf[:] = 0.0
    expected = 1.0
    for v in range(n):
        taken = 0.0
        for k in range(child_start[v], child_start[v + 1]):
            taken += qeff[child_index[k]]
        stop = reach[v] * (1.0 - taken)
        pmf[depth[v] + 1] += stop if stop > 0.0 else 0.0
        if v > 0:
            expected += reach[v]
    return expected


@jit
def _variance(pmf, expected):
    """Var[tau] = sum_k k^2 P(tau = k) - E[tau]^2, summed in index order (one order for the
    per-tree and the batched evaluations, so both give the same bits)."""
    second = 0.0
    for k in range(pmf.shape[0]):
        second += pmf[k] * float(k * k)
    return second - expected * expected


@jit
def _continuation(parent, qeff, cont):
    """cont[v] = sum_c qeff(c) (1 + cont[c]); children have larger indices than their parents."""
    cont[:] = 0.0
    for v in range(parent.shape[0] - 1, 0, -1):
        cont[parent[v]] += qeff[v] * (1.0 + cont[v])


@dataclass(frozen=True)
class YieldResult:
    """Exact distribution of tau for one topology under one acceptance model."""

    expected_tau: float
    variance: float
    pmf: np.ndarray  # pmf[k] = P(tau = k), k = 0 .. max_depth + 1 (pmf[0] = 0)
    reach: np.ndarray  # per node: probability that it is accepted
    qeff: np.ndarray  # per node: probability of being taken once its parent is reached
    model: str

    @property
    def std(self) -> float:
        return float(np.sqrt(max(self.variance, 0.0)))


@jit
def _taus_by_draw(parent, source, rank, depth, child_start, child_index, p_s, p_t, independent, tolerance, out):
    """E[tau] of one tree under each row of (draws, depths) p_s and (draws, 3, ranks) p_t, by
    the same kernels as :func:`exact_yield` (the same bits); an exclusive draw that is infeasible
    on this tree is priced under the independent model, as :func:`yield_with_fallback` does."""
    n = parent.shape[0]
    q, qeff, reach = np.empty(n), np.empty(n), np.empty(n)
    pmf = np.zeros(depth.max() + 2)
    for b in range(p_s.shape[0]):
        _node_q(parent, source, rank, depth, p_s[b], p_t[b], q)
        node, total = _effective_q(q, child_start, child_index, independent, qeff)
        if not independent and total > 1.0 + tolerance:
            _effective_q(q, child_start, child_index, True, qeff)
        out[b] = _reach_and_pmf(parent, depth, qeff, child_start, child_index, reach, pmf)


def taus_by_draw(topology: Topology, p_s: np.ndarray, p_t: np.ndarray, model: str = "exclusive") -> np.ndarray:
    """E[tau] of ``topology`` under many parameter sets at once: ``p_s`` (draws, depths) by spine
    depth from 1, ``p_t`` (draws, 3, ranks) by the parent's source (root, spine, transition) and
    rank, each repeating its last value (as :attr:`Acceptance.p_t_matrix`); per draw equal to
    ``yield_with_fallback(topology, acceptance)[0].expected_tau``.

    Example:
        >>> from goose_theory.topology import Topology
        >>> chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
        >>> taus_by_draw(chain, np.array([[0.5], [1.0]]), np.full((2, 3, 1), 0.1)).tolist()
        [1.75, 3.0]
    """
    p_s, p_t = np.ascontiguousarray(p_s, dtype=np.float64), np.ascontiguousarray(p_t, dtype=np.float64)
    if p_s.ndim != 2 or p_t.ndim != 3 or p_t.shape[:2] != (p_s.shape[0], 3) or min(p_s.shape[1], p_t.shape[2]) < 1:
        raise ValueError(f"p_s must be (draws, depths) and p_t (draws, 3, ranks); got {p_s.shape} and {p_t.shape}")
    out = np.empty(p_s.shape[0])
    start, index = topology.children
    _taus_by_draw(topology.parent_array, topology.source_array, topology.rank_array, topology.depth, start, index,
                  p_s, p_t, model == "independent", EXCLUSIVE_TOLERANCE, out)
    return out


def _compiled(topology: Topology, acceptance: Acceptance) -> tuple[np.ndarray, np.ndarray]:
    q = np.empty(topology.n_nodes)
    _node_q(topology.parent_array, topology.source_array, topology.rank_array, topology.depth,
            acceptance.p_s_array, acceptance.p_t_matrix, q)
    qeff = np.empty_like(q)
    start, index = topology.children
    node, total = _effective_q(q, start, index, acceptance.independent, qeff)
    if not acceptance.independent and total > 1.0 + EXCLUSIVE_TOLERANCE:
        raise ExclusiveModelError(_exclusive_message(topology, q, int(node), float(total)))
    return q, qeff


def _exclusive_message(topology: Topology, q: np.ndarray, node: int, total: float) -> str:
    start, index = topology.children
    kids = index[start[node]:start[node + 1]]
    parts = [f"{SOURCE_NAMES[topology.source[c]]}[rank {topology.rank[c]}]={q[c]:.4g}" for c in kids[:4]]
    more = f" + {len(kids) - 4} more" if len(kids) > 4 else ""
    return (f"exclusive model: the children of node {node} have match probabilities summing to "
            f"{total:.4g} > 1 ({' + '.join(parts)}{more}); lower p_s/p_t, use fewer ranks, "
            f"or use the independent model")


def exact_yield(topology: Topology, acceptance: Acceptance) -> YieldResult:
    """E[tau], Var[tau], pmf of tau and per-node reach probabilities, exactly."""
    return _yield_and_q(topology, acceptance)[0]


def _yield_and_q(topology: Topology, acceptance: Acceptance) -> tuple[YieldResult, np.ndarray]:
    """:func:`exact_yield`'s result and every node's q (the paper's bound reads both)."""
    q, qeff = _compiled(topology, acceptance)
    reach = np.empty(topology.n_nodes)
    pmf = np.zeros(int(topology.depth.max()) + 2)
    start, index = topology.children
    expected = _reach_and_pmf(topology.parent_array, topology.depth, qeff, start, index, reach, pmf)
    return YieldResult(float(expected), float(_variance(pmf, expected)), pmf, reach, qeff, acceptance.model), q


def evaluate_with_fallback(evaluate: Callable[[Topology, Acceptance], R], topology: Topology,
                           acceptance: Acceptance) -> tuple[R, bool]:
    """``evaluate(topology, acceptance)``, or, when the exclusive model is infeasible on *this*
    tree (:class:`ExclusiveModelError`), ``evaluate`` under the independent model; returns
    (result, fell_back). The one fallback rule for recorded or realised trees, whatever is
    evaluated on them (:func:`yield_with_fallback`, :func:`goose_theory.bound.bound_with_fallback`):
    the fallback is per tree, so a few infeasible shapes (e.g. a root with a spine child and
    several transition children) do not move every other tree to the independent model, which
    double-discounts transition children whose fitted p_t is already a marginal match rate.

    Example:
        >>> from goose_theory.topology import Topology
        >>> fan = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
        >>> y, fell_back = evaluate_with_fallback(exact_yield, fan, Acceptance.parse(0.7, 0.4, "exclusive"))
        >>> fell_back, y.model, round(y.expected_tau, 6)   # 0.7 + 0.4 > 1: 1 + 0.7 + 0.3 * 0.4
        (True, 'independent', 1.82)
    """
    try:
        return evaluate(topology, acceptance), False
    except ExclusiveModelError:
        return evaluate(topology, acceptance.with_model("independent")), True


def yield_with_fallback(topology: Topology, acceptance: Acceptance) -> tuple[YieldResult, bool]:
    """:func:`exact_yield` under :func:`evaluate_with_fallback`'s per-tree rule; returns
    (result, fell_back)."""
    return evaluate_with_fallback(exact_yield, topology, acceptance)


def fallback_model_name(model: str, fallback_cycles: int) -> str:
    """The model a set of trees was evaluated under: ``model``, or e.g. ``exclusive (independent
    on 60 cycles)`` when :func:`evaluate_with_fallback` fell back on trees of that many cycles.

    Example:
        >>> fallback_model_name("exclusive", 0), fallback_model_name("exclusive", 60)
        ('exclusive', 'exclusive (independent on 60 cycles)')
    """
    return model if not fallback_cycles else f"{model} (independent on {fallback_cycles} cycles)"


def expected_tau(topology: Topology, acceptance: Acceptance) -> float:
    """Just E[tau] (same computation as :func:`exact_yield`)."""
    return exact_yield(topology, acceptance).expected_tau


def continuation(topology: Topology, qeff: np.ndarray) -> np.ndarray:
    """cont[v] = E[further accepted nodes below v | v accepted] = sum_c qeff(c) (1 + cont[c])."""
    cont = np.empty(topology.n_nodes)
    _continuation(topology.parent_array, np.asarray(qeff, dtype=np.float64), cont)
    return cont
