"""The paper's lower bound on E[tau] (indicator decomposition), generalised and checked.

    E[tau] >= sum_{i=1..m} P_s(i)  +  sum_{i=0..m-1} P_s(i) (1 - p_s(i+1)) phi_i (1 + lbar)  +  1

with P_s(i) = prod_{j<=i} p_s(j) (= p_s^i for a scalar p_s), phi_i = 1 - prod_r (1 - p_t(r))
over the transition children of spine position i (= 1 - (1 - p_t)^{w_i} for a scalar p_t), and
m the spine length. Branches hung on the last spine node are not counted (the paper's sum
stops at m - 1), which is one source of the gap.

lbar, the mean continuation below a matched branch, is not pinned down by the paper. We offer:

* ``"zero"``: the plain bound (lbar = 0), valid for any tree;
* ``"topology"`` (default): lbar = the *smallest* expected continuation, E[accepted nodes
  below c | c accepted], over the first-level branch children c of spine positions 0..m-1,
  computed exactly from the topology under the chosen model. Taking the minimum, not the
  mean, keeps it a true lower bound: each branch term is replaced by a smaller one.
* a number: a user-supplied lbar (then the result is only as good as the number).

Under the independent model (1 - p_s) phi_i is exactly the probability that the walk leaves the
spine at i into a branch, so the bound is tight except for lbar and the last spine node. Under
the exclusive model that probability is sum_r p_t(r) >= (1 - p_s) phi_i, so the bound holds too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._numba import jit
from .acceptance import Acceptance
from .topology import SPINE, TRANSITION, Topology
from .yields import _continuation, _yield_and_q, evaluate_with_fallback


@dataclass(frozen=True)
class BoundResult:
    """The paper's bound next to the exact value."""

    lower_bound: float
    exact: float
    lbar: float
    lbar_rule: str
    spine_length: int
    widths: np.ndarray  # w_i for spine positions 0..m
    phi: np.ndarray  # phi_i for spine positions 0..m

    @property
    def gap(self) -> float:
        return self.exact - self.lower_bound

    @property
    def relative_gap(self) -> float:
        return self.gap / self.exact


LBAR_ZERO, LBAR_TOPOLOGY, LBAR_GIVEN = 0, 1, 2


@jit
def _bound_terms(parent, source, q, qeff, child_start, child_index, lbar_rule, lbar_given, phi, cont):
    """Fill phi[i] for spine positions i = 0..m (phi has one slot per node); return
    (bound, lbar, m). q: match probabilities, qeff: effective ones (see goose_theory.yields).
    One kernel for a single tree and for the batched evaluation of recorded shapes."""
    node, m = 0, 0
    lbar = lbar_given if lbar_rule == LBAR_GIVEN else 0.0
    if lbar_rule == LBAR_TOPOLOGY:
        _continuation(parent, qeff, cont)
    first_level = False
    while True:  # the spine chain: a spine child is its parent's first (priority order)
        miss, spine_child = 1.0, -1
        for k in range(child_start[node], child_start[node + 1]):
            c = child_index[k]
            if source[c] == SPINE:
                spine_child = c
            elif source[c] == TRANSITION:
                miss *= 1.0 - q[c]
        phi[m] = 1.0 - miss
        if spine_child < 0:
            break
        if lbar_rule == LBAR_TOPOLOGY:  # branch children of spine positions 0..m-1
            for k in range(child_start[node], child_start[node + 1]):
                c = child_index[k]
                if source[c] == TRANSITION and (not first_level or cont[c] < lbar):
                    lbar, first_level = cont[c], True
        node, m = spine_child, m + 1
    reach_spine, bound, node = 1.0, 1.0, 0
    for i in range(m):
        for k in range(child_start[node], child_start[node + 1]):
            if source[child_index[k]] == SPINE:
                node = child_index[k]
        p_next = q[node]
        bound += reach_spine * (1.0 - p_next) * phi[i] * (1.0 + lbar)
        reach_spine *= p_next
        bound += reach_spine
    return bound, lbar, m


def paper_lower_bound(topology: Topology, acceptance: Acceptance, lbar: str | float = "topology") -> BoundResult:
    """Evaluate the paper's bound for ``topology``; ``lbar`` as in the module docstring."""
    result, q = _yield_and_q(topology, acceptance)
    rule, given = _lbar_rule(lbar)
    start, index = topology.children
    phi, cont = np.zeros(topology.n_nodes), np.zeros(topology.n_nodes)
    bound, lbar_value, m = _bound_terms(topology.parent_array, topology.source_array, q, result.qeff, start, index,
                                        rule, given, phi, cont)
    return BoundResult(float(bound), result.expected_tau, float(lbar_value), _LBAR_NAMES[rule], int(m),
                       topology.first_level_widths, phi[:m + 1].copy())


def bound_with_fallback(topology: Topology, acceptance: Acceptance,
                        lbar: str | float = "topology") -> tuple[BoundResult, bool]:
    """:func:`paper_lower_bound` under the same per-tree fallback as the yield
    (:func:`goose_theory.yields.evaluate_with_fallback`): where the exclusive model is
    infeasible on ``topology``, bound and exact value are both taken under the independent
    model. Returns (result, fell_back)."""
    return evaluate_with_fallback(lambda t, a: paper_lower_bound(t, a, lbar=lbar), topology, acceptance)


_LBAR_NAMES = {LBAR_ZERO: "zero", LBAR_TOPOLOGY: "topology", LBAR_GIVEN: "given"}


def _lbar_rule(lbar: str | float) -> tuple[int, float]:
    if lbar == "zero":
        return LBAR_ZERO, 0.0
    if lbar == "topology":
        return LBAR_TOPOLOGY, 0.0
    problem = ValueError(f"lbar: {lbar!r} must be 'zero', 'topology' or a non-negative number")
    if isinstance(lbar, bool):  # float(True) is 1.0: a flag passed by mistake, not a length
        raise problem
    try:
        value = float(lbar)
    except (TypeError, ValueError):
        raise problem from None
    if not np.isfinite(value) or value < 0:
        raise problem
    return LBAR_GIVEN, value
