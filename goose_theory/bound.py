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

from .acceptance import Acceptance
from .topology import TRANSITION, Topology
from .yields import continuation, evaluate_with_fallback, exact_yield


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


def paper_lower_bound(topology: Topology, acceptance: Acceptance, lbar: str | float = "topology") -> BoundResult:
    """Evaluate the paper's bound for ``topology``; ``lbar`` as in the module docstring."""
    result = exact_yield(topology, acceptance)
    chain = topology.spine_chain
    m = len(chain) - 1
    phi = np.zeros(m + 1)
    first_level: list[int] = []
    for i, node in enumerate(chain):
        miss = 1.0
        start, index = topology.children
        for c in index[start[node]:start[node + 1]]:
            if topology.source[c] == TRANSITION:
                miss *= 1.0 - acceptance.transition_q(topology.rank[c], topology.source[node])
                if i < m:
                    first_level.append(int(c))
        phi[i] = 1.0 - miss
    lbar_value, rule = _lbar(topology, result.qeff, first_level, lbar)
    reach_spine, bound = 1.0, 1.0
    for i in range(m):
        p_next = acceptance.spine_q(i + 1)
        bound += reach_spine * (1.0 - p_next) * phi[i] * (1.0 + lbar_value)
        reach_spine *= p_next
        bound += reach_spine
    return BoundResult(bound, result.expected_tau, lbar_value, rule, m, topology.first_level_widths, phi)


def bound_with_fallback(topology: Topology, acceptance: Acceptance,
                        lbar: str | float = "topology") -> tuple[BoundResult, bool]:
    """:func:`paper_lower_bound` under the same per-tree fallback as the yield
    (:func:`goose_theory.yields.evaluate_with_fallback`): where the exclusive model is
    infeasible on ``topology``, bound and exact value are both taken under the independent
    model. Returns (result, fell_back)."""
    return evaluate_with_fallback(lambda t, a: paper_lower_bound(t, a, lbar=lbar), topology, acceptance)


def _lbar(topology: Topology, qeff: np.ndarray, first_level: list[int], lbar: str | float) -> tuple[float, str]:
    if lbar == "zero":
        return 0.0, "zero"
    if lbar == "topology":
        if not first_level:
            return 0.0, "topology"
        cont = continuation(topology, qeff)
        return float(min(cont[c] for c in first_level)), "topology"
    value = float(lbar)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"lbar: {lbar!r} must be 'zero', 'topology' or a non-negative number")
    return value, "given"
