"""Two-regime prediction: the harmonic mix against a Monte Carlo renewal process, the unmatched
regime against brute-force pruning, the blend's additivity, and the optimisers' dominance."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goose_theory.acceptance import Acceptance
from goose_theory.regime import (best_pair, best_single, blend, export_topologies, harmonic_tau, regime_tau,
                                 seconds_per_token, unmatched_topology)
from goose_theory.topology import Topology
from goose_theory.yields import exact_yield

from conftest import random_topology

# ranks past the list repeat its last value, so the lists end in 0 to keep random trees feasible
M = Acceptance.parse([0.7, 0.85], [0.15, 0.03, 0.01, 0.0], p_t_spine=[0.1, 0.03, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])
U = Acceptance.parse(0.0, [0.35, 0.08, 0.02, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])


def _pruned(t: Topology) -> Topology:
    """The tree without spine nodes and their subtrees (what the runtime builds with no match)."""
    keep, new = [True], {0: 0}
    nodes = [(-1, "root", 0)]
    names = ("root", "spine", "transition")
    for v in range(1, len(t.parent)):
        ok = keep[t.parent[v]] and t.source[v] != 1
        keep.append(ok)
        if ok:
            new[v] = len(nodes)
            nodes.append((new[t.parent[v]], names[t.source[v]], t.rank[v]))
    return Topology.from_nodes(nodes, max_depth=t.max_depth, max_spine=t.max_spine)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 14))
def test_unmatched_regime_is_the_pruned_tree(seed, n):
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    pred = regime_tau(t, M, U, 0.3)
    assert pred.tau_unmatched == pytest.approx(exact_yield(_pruned(t), U).expected_tau, rel=1e-12)
    assert pred.nodes_unmatched == len(_pruned(t).parent) - 1
    assert pred.tau_matched == pytest.approx(exact_yield(t, M).expected_tau, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 14), st.floats(0.0, 1.0))
def test_blend_is_the_weighted_sum_of_the_regimes(seed, n, w):
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    lhs = exact_yield(t, blend(M, U, w)).expected_tau - 1
    rhs = w * (exact_yield(t, M).expected_tau - 1) + (1 - w) * (exact_yield(t, U).expected_tau - 1)
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-12)


def test_harmonic_mix_matches_a_renewal_simulation():
    """Text made of long matched / unmatched stretches; cycles draw tau from the exact pmf of the
    tree in the stretch they start in: tokens / cycles converges to the harmonic mix."""
    t = best_pair(M, U, 0.4, budget=6).matched
    pm, pu = exact_yield(t, M).pmf, exact_yield(t, U).pmf
    rng = np.random.default_rng(5)
    seg = rng.integers(200, 400, size=600)
    matched = np.arange(seg.size) % 3 == 0
    tokens = cycles = 0
    produced_matched = 0
    for length, is_m in zip(seg, matched):
        pmf = pm if is_m else pu
        pos = 0
        while pos < length:
            k = int(rng.choice(pmf.size, p=pmf / pmf.sum()))
            pos += k; cycles += 1
            produced_matched += k if is_m else 0
        tokens += pos
    psi = produced_matched / tokens
    expected = harmonic_tau(exact_yield(t, M).expected_tau, exact_yield(t, U).expected_tau, psi)
    assert tokens / cycles == pytest.approx(expected, rel=0.02)


def test_harmonic_rejects_bad_psi():
    with pytest.raises(ValueError):
        harmonic_tau(2.0, 1.0, 1.5)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.3, 0.95), st.floats(0.05, 0.4), st.floats(0.0, 1.0), st.integers(1, 12))
def test_pair_dominates_single_and_single_dominates_its_candidates(p_s, p_t, psi, budget):
    m = Acceptance.parse([p_s, 0.9], [p_t / 2, 0.05], p_t_chain=[0.4, 0.1])
    u = Acceptance.parse(0.0, [p_t, 0.05], p_t_chain=[0.4, 0.1])
    spine = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(budget)])
    single = best_single(m, u, psi, budget=budget, extra=(spine,))
    assert single.prediction.tau >= regime_tau(spine, m, u, psi).tau - 1e-12
    pair = best_pair(m, u, psi, budget=budget)
    assert pair.prediction.tau >= single.prediction.tau - 1e-9


def test_seconds_per_token_with_a_flat_cycle_time():
    pred = regime_tau(best_pair(M, U, 0.5, budget=5).matched, M, U, 0.5)
    assert seconds_per_token(pred, lambda n: 0.02) == pytest.approx(0.02 / pred.tau)


def test_export_writes_predictions_and_the_unmatched_tree():
    class Fit:
        matched, unmatched, psi = M, U, 0.4

        @staticmethod
        def to_dict():
            return {"psi": 0.4}

    single, pair = export_topologies(Fit, 6, provenance={"traces": ["x.parquet"]})
    assert single.budget == pair.budget == 6
    assert single.meta["predicted_tau"] <= pair.meta["predicted_tau"] + 1e-9
    unmatched = Topology.from_nodes([(n["parent"], n["source"], n["rank"]) for n in pair.meta["regimes"]["unmatched"]["nodes"]])
    assert unmatched.spine_length == 0 and unmatched.budget == 6
    assert pair.meta["provenance"]["traces"] == ["x.parquet"]


def test_unmatched_topology_round_trips_through_a_file(tmp_path):
    from goose_theory.topology import load_topology, save_topology
    matched = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (1, "transition", 0)])
    save_topology(matched.with_meta(regimes={"unmatched": unmatched.to_dict()}), tmp_path / "pair.json")
    save_topology(matched, tmp_path / "plain.json")
    assert unmatched_topology(load_topology(tmp_path / "pair.json")).parent == unmatched.parent
    assert unmatched_topology(load_topology(tmp_path / "plain.json")) is None
