"""The paper's lower bound never exceeds the exact E[tau], and is tight where it should be."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import random_topology
from goose_theory.acceptance import Acceptance
from goose_theory.bound import bound_with_fallback, paper_lower_bound
from goose_theory.topology import Topology
from goose_theory.yields import ExclusiveModelError, yield_with_fallback


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), p_s=st.floats(0, 1), p_t=st.floats(0, 1),
       p_t_spine=st.none() | st.floats(0, 1), p_t_chain=st.none() | st.floats(0, 1),
       lbar=st.sampled_from(["zero", "topology"]))
def test_bound_never_exceeds_exact_independent(seed, n, p_s, p_t, p_t_spine, p_t_chain, lbar):
    topo = random_topology(np.random.default_rng(seed), n)
    acc = Acceptance.parse(p_s, p_t, "independent", p_t_spine=p_t_spine, p_t_chain=p_t_chain)
    result = paper_lower_bound(topo, acc, lbar=lbar)
    assert result.lower_bound <= result.exact + 1e-12
    assert result.gap >= -1e-12


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), p_s=st.floats(0, 0.8), p_t=st.floats(0, 0.02))
def test_bound_holds_under_exclusive_too(seed, n, p_s, p_t):
    topo = random_topology(np.random.default_rng(seed), n)
    try:
        result = paper_lower_bound(topo, Acceptance.parse(p_s, p_t, "exclusive"))
    except ExclusiveModelError:
        return
    assert result.lower_bound <= result.exact + 1e-12


def test_paper_formula_on_a_hand_tree():
    # spine of 2 and w = (2, 1, 0): bound = 1 + p + p^2 + (1-p)(phi0 + p phi1)(1 + lbar), lbar = 0 here
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1),
                                (1, "spine", 0), (1, "transition", 0)])
    p, q = 0.6, 0.1
    r = paper_lower_bound(topo, Acceptance.parse(p, q, "independent"))
    phi0, phi1 = 1 - (1 - q) ** 2, q
    assert r.lower_bound == pytest.approx(1 + p + p * p + (1 - p) * (phi0 + p * phi1))
    # no branch below a branch: the bound is exact under the independent model
    assert r.exact == pytest.approx(r.lower_bound)
    assert r.widths.tolist() == [2, 1, 0]


def test_topology_lbar_counts_continuation():
    # every first-level branch has one child: lbar = its q, and the bound stays exact
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (2, "transition", 0)])
    r = paper_lower_bound(topo, Acceptance.parse(0.5, 0.2, "independent"))
    assert r.lbar == pytest.approx(0.2) and r.exact == pytest.approx(r.lower_bound)
    assert paper_lower_bound(topo, Acceptance.parse(0.5, 0.2, "independent"), lbar="zero").lower_bound < r.lower_bound
    for bad in (-0.5, float("nan"), float("inf"), "some", True, None):  # the library refuses what the CLI would
        with pytest.raises(ValueError, match="lbar: .* must be 'zero', 'topology' or a non-negative number"):
            paper_lower_bound(topo, Acceptance.parse(0.5, 0.2, "independent"), lbar=bad)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), p_s=st.floats(0, 1), p_t=st.floats(0, 0.5),
       lbar=st.sampled_from(["zero", "topology", 0.5]))
def test_bound_with_fallback_falls_back_on_the_same_trees_as_the_yield(seed, n, p_s, p_t, lbar):
    topo = random_topology(np.random.default_rng(seed), n)
    acc = Acceptance.parse(p_s, p_t, "exclusive")
    result, fell_back = bound_with_fallback(topo, acc, lbar=lbar)
    y, y_fell_back = yield_with_fallback(topo, acc)
    assert fell_back == y_fell_back  # one rule for the yield and the bound
    try:
        paper_lower_bound(topo, acc)
        infeasible = False
    except ExclusiveModelError:
        infeasible = True
    assert fell_back == infeasible
    direct = paper_lower_bound(topo, acc.with_model("independent") if fell_back else acc, lbar=lbar)
    assert (result.lower_bound, result.exact, result.lbar) == (direct.lower_bound, direct.exact, direct.lbar)
    assert result.exact == y.expected_tau
    if lbar != 0.5:  # a given lbar is only as good as the number
        assert result.lower_bound <= result.exact + 1e-12


def test_bound_with_fallback_on_a_hand_tree():
    # root: spine (p_s = 0.7) and two transition children (p_t = 0.3): 1.3 > 1, exclusive infeasible
    fan = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    result, fell_back = bound_with_fallback(fan, Acceptance.parse(0.7, 0.3, "exclusive"))
    assert fell_back
    # the independent model: exact 1 + 0.7 + 0.3 (0.3 + 0.7 * 0.3); the bound is tight on this tree
    assert result.exact == pytest.approx(1 + 0.7 + 0.3 * (0.3 + 0.7 * 0.3))
    assert result.lower_bound == pytest.approx(result.exact)
    result, fell_back = bound_with_fallback(fan, Acceptance.parse(0.5, 0.2, "exclusive"))
    assert not fell_back and result.exact == pytest.approx(1.9)
