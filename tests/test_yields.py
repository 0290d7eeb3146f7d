"""Exact yield against brute-force enumeration of every outcome on tiny trees (exact)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import random_topology
from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology
from goose_theory.yields import (ExclusiveModelError, continuation, evaluate_with_fallback, exact_yield, expected_tau,
                                 fallback_model_name, taus_by_draw, yield_with_fallback)


def _q(topo: Topology, acc: Acceptance) -> list[float]:
    q = [1.0]
    for i in range(1, topo.n_nodes):
        q.append(acc.spine_q(int(topo.depth[i])) if topo.source[i] == 1
                 else acc.transition_q(topo.rank[i], topo.source[topo.parent[i]]))
    return q


def _walk(topo: Topology, matched_child_of) -> int:
    """Greedy walk: follow the matched child until none; tau = 1 + depth reached."""
    node = 0
    while (child := matched_child_of(node)) is not None:
        node = child
    return int(topo.depth[node]) + 1


def brute_force_pmf(topo: Topology, acc: Acceptance) -> dict[int, float]:
    """Enumerate every joint outcome: independent -> each node matches or not; exclusive ->
    each node picks one matching child or none. Run the walk on each outcome."""
    q = _q(topo, acc)
    start, index = topo.children
    kids = [list(index[start[v]:start[v + 1]]) for v in range(topo.n_nodes)]
    pmf: dict[int, float] = {}
    if acc.independent:
        for bits in itertools.product((0, 1), repeat=topo.n_nodes - 1):
            match = (1,) + bits
            prob = np.prod([q[i] if match[i] else 1 - q[i] for i in range(1, topo.n_nodes)])
            tau = _walk(topo, lambda v: next((c for c in kids[v] if match[c]), None))
            pmf[tau] = pmf.get(tau, 0.0) + prob
    else:
        options = [[None] + kids[v] for v in range(topo.n_nodes)]
        for choice in itertools.product(*options):
            prob = 1.0
            for v, c in enumerate(choice):
                prob *= (1 - sum(q[k] for k in kids[v])) if c is None else q[c]
            tau = _walk(topo, lambda v: choice[v])
            pmf[tau] = pmf.get(tau, 0.0) + prob
    return pmf


SMALL = dict(max_examples=120, deadline=None)


P_T = st.lists(st.floats(0, 0.3), min_size=1, max_size=3)


@settings(**SMALL)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), model=st.sampled_from(["exclusive", "independent"]),
       p_s=st.lists(st.floats(0, 1), min_size=1, max_size=3), p_t=P_T,
       p_t_spine=st.none() | P_T, p_t_chain=st.none() | P_T, gaps=st.booleans())
def test_pmf_equals_brute_force(seed, n, model, p_s, p_t, p_t_spine, p_t_chain, gaps):
    topo = random_topology(np.random.default_rng(seed), n, max_depth=4, max_spine=4, gap_prob=0.4 if gaps else 0.0)
    acc = Acceptance.parse(p_s, p_t, model, p_t_spine=p_t_spine, p_t_chain=p_t_chain)
    try:
        result = exact_yield(topo, acc)
    except ExclusiveModelError:
        start, index = topo.children
        q = _q(topo, acc)
        assert max(sum(q[c] for c in index[start[v]:start[v + 1]]) for v in range(n)) > 1
        return
    truth = brute_force_pmf(topo, acc)
    for tau, prob in truth.items():
        assert result.pmf[tau] == pytest.approx(prob, abs=1e-12)
    assert result.pmf.sum() == pytest.approx(1.0, abs=1e-12)
    taus = np.arange(result.pmf.size)
    mean = sum(t * p for t, p in truth.items())
    assert result.expected_tau == pytest.approx(mean, abs=1e-12)
    assert result.expected_tau == pytest.approx(float(taus @ result.pmf), abs=1e-12)
    assert result.variance == pytest.approx(sum(t * t * p for t, p in truth.items()) - mean**2, abs=1e-10)


def test_chain_closed_form():
    chain = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(5)])
    p = 0.7
    assert expected_tau(chain, Acceptance.parse(p, 0.0)) == pytest.approx(sum(p**i for i in range(6)))
    # depth-dependent p_s: reach probabilities are running products
    acc = Acceptance.parse([0.9, 0.5, 0.2], 0.0)
    reach = exact_yield(chain, acc).reach
    np.testing.assert_allclose(reach, [1, 0.9, 0.45, 0.09, 0.018, 0.0036])


def test_independent_priority_spine_first():
    # root with a spine child and one transition child: the transition child is only taken when
    # the spine child fails (UnifiedGreedyWalk), so its effective probability is (1 - p_s) p_t.
    topo = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "spine", 0)])
    r = exact_yield(topo, Acceptance.parse(0.6, 0.5, "independent"))
    np.testing.assert_allclose(r.qeff, [1, 0.2, 0.6])
    assert r.expected_tau == pytest.approx(1.8)
    assert exact_yield(topo, Acceptance.parse(0.4, 0.5, "exclusive")).expected_tau == pytest.approx(1.9)


def test_exclusive_rejects_children_summing_above_one():
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)] + [(0, "transition", r) for r in range(10)])
    with pytest.raises(ExclusiveModelError, match=r"children of node 0 .* summing to 1\.1 > 1"):
        exact_yield(topo, Acceptance.parse(0.6, 0.05))
    assert exact_yield(topo, Acceptance.parse(0.6, 0.05, "independent")).expected_tau > 1.6


def test_transition_acceptance_by_parent_source():
    # root -> spine -> transition(a); root -> transition(b) -> transition(c)
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "transition", 0), (0, "transition", 0),
                                (3, "transition", 0)])
    acc = Acceptance.parse(0.5, 0.2, p_t_spine=0.1, p_t_chain=0.6)
    np.testing.assert_allclose(exact_yield(topo, acc).qeff, [1, 0.5, 0.1, 0.2, 0.6])
    # without overrides every transition node uses p_t
    np.testing.assert_allclose(exact_yield(topo, Acceptance.parse(0.5, 0.2)).qeff, [1, 0.5, 0.2, 0.2, 0.2])


def test_root_only_is_plain_decoding():
    r = exact_yield(Topology.root_only(), Acceptance.parse(0.5, 0.1))
    assert r.expected_tau == 1.0 and r.variance == 0.0 and r.pmf.tolist() == [0.0, 1.0]


def test_continuation_matches_reach_ratios():
    topo = random_topology(np.random.default_rng(7), 30)
    acc = Acceptance.parse(0.5, 0.03)
    r = exact_yield(topo, acc)
    cont = continuation(topo, r.qeff)
    assert 1.0 + cont[0] == pytest.approx(r.expected_tau)
    for v in range(topo.n_nodes):  # every node: its descendants' reach over its own (accepted given v accepted)
        below, level = [], [v]
        while level:
            level = [c for c in range(topo.n_nodes) if topo.parent[c] in level]
            below += level
        assert cont[v] == pytest.approx(sum(r.reach[d] for d in below) / r.reach[v], rel=1e-9, abs=1e-12)


def _exclusive_infeasible(topo: Topology, acc: Acceptance) -> bool:
    """Some node's children have q summing above 1 (worked out here, not by the library)."""
    start, index = topo.children
    q = _q(topo, acc)
    return max(sum(q[c] for c in index[start[v]:start[v + 1]]) for v in range(topo.n_nodes)) > 1 + 1e-9


@settings(**SMALL)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), p_s=st.floats(0, 1), p_t=st.floats(0, 0.6),
       model=st.sampled_from(["exclusive", "independent"]))
def test_yield_with_fallback_falls_back_exactly_on_infeasible_trees(seed, n, p_s, p_t, model):
    topo = random_topology(np.random.default_rng(seed), n, max_depth=3, max_spine=3)
    acc = Acceptance.parse(p_s, p_t, model)
    result, fell_back = yield_with_fallback(topo, acc)
    assert fell_back == (model == "exclusive" and _exclusive_infeasible(topo, acc))
    used = acc.with_model("independent") if fell_back else acc
    assert result.model == used.model
    # the model it says it used, exactly, up to the feasibility tolerance: children whose q sum to
    # 1 + 1e-9 count as feasible, and the library clamps the "no child" probability of -1e-9 to 0
    # where the brute force keeps it (hypothesis found p_s = 1, p_t = 1e-9)
    for tau, prob in brute_force_pmf(topo, used).items():
        assert result.pmf[tau] == pytest.approx(prob, abs=1e-8)


def test_evaluate_with_fallback_retries_only_after_the_exclusive_error():
    fan = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    calls: list[str] = []

    def evaluate(topo, acc):
        calls.append(acc.model)
        return exact_yield(topo, acc).expected_tau

    # feasible (0.5 + 0.2 + 0.2 <= 1): one call, no fallback
    assert evaluate_with_fallback(evaluate, fan, Acceptance.parse(0.5, 0.2, "exclusive")) == \
        (pytest.approx(1.9), False)
    assert calls == ["exclusive"]
    calls.clear()
    # infeasible (0.7 + 0.3 + 0.3 > 1): the exclusive try, then the independent one
    value, fell_back = evaluate_with_fallback(evaluate, fan, Acceptance.parse(0.7, 0.3, "exclusive"))
    assert fell_back and calls == ["exclusive", "independent"]
    assert value == pytest.approx(1 + 0.7 + 0.3 * 0.3 + 0.3 * 0.7 * 0.3)


def test_evaluate_with_fallback_passes_other_errors_through():
    def broken(topo, acc):
        raise ValueError("not a fallback case")

    with pytest.raises(ValueError, match="not a fallback case"):
        evaluate_with_fallback(broken, Topology.root_only(), Acceptance.parse(0.5, 0.1))


def test_fallback_model_name():
    assert fallback_model_name("exclusive", 0) == "exclusive"
    assert fallback_model_name("exclusive", 7) == "exclusive (independent on 7 cycles)"


@settings(**SMALL)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), draws=st.integers(1, 6),
       model=st.sampled_from(["exclusive", "independent"]), by_parent=st.booleans())
def test_taus_by_draw_equals_yield_with_fallback_per_draw(seed, n, draws, model, by_parent):
    """The batched kernel gives each draw the bits of the per-tree evaluation, the per-draw
    fallback to the independent model included (p_t up to 0.6: many draws are infeasible)."""
    rng = np.random.default_rng(seed)
    topo = random_topology(rng, n, max_depth=4, max_spine=3)
    p_s, p_t = rng.random((draws, 3)), rng.random((draws, 3, 4)) * 0.6
    if not by_parent:
        p_t[:, 1:] = p_t[:, :1]
    got = taus_by_draw(topo, p_s, p_t, model)
    for b in range(draws):
        extra = {"p_t_spine": list(p_t[b, 1]), "p_t_chain": list(p_t[b, 2])} if by_parent else {}
        acc = Acceptance.parse(list(p_s[b]), list(p_t[b, 0]), model, **extra)
        assert got[b] == yield_with_fallback(topo, acc)[0].expected_tau


def test_taus_by_draw_refuses_misshapen_parameters():
    chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    with pytest.raises(ValueError, match="p_s must be"):
        taus_by_draw(chain, np.array([0.5]), np.full((1, 3, 1), 0.1))
    with pytest.raises(ValueError, match="p_s must be"):
        taus_by_draw(chain, np.array([[0.5]]), np.full((1, 2, 1), 0.1))
    with pytest.raises(ValueError, match="p_s must be"):
        taus_by_draw(chain, np.zeros((1, 0)), np.full((1, 3, 1), 0.1))
