"""Monte Carlo simulator against the exact calculator, reproducibility, bursty regimes, bad input."""
from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from conftest import random_topology
from goose_theory._sim_kernels import CHUNK_CYCLES
from goose_theory.acceptance import Acceptance, AcceptanceError
from goose_theory.simulate import (BurstyRegime, SimulationError, simulate, simulate_bursty,
                                   simulate_numpy)
from goose_theory.topology import Topology
from goose_theory.yields import ExclusiveModelError, exact_yield

# derandomize: the statistical checks use 4 standard errors over many examples; a fixed
# example set keeps CI deterministic while every example can still fail.
PROPERTY = dict(max_examples=120, deadline=None, derandomize=True)
probs = st.floats(0.0, 1.0)


def mixed_tree() -> Topology:
    """Spine of 3 with branches on the root, on spine nodes, and a second-level branch."""
    return Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0),
                                (0, "transition", 0), (0, "transition", 1), (4, "transition", 0),
                                (1, "transition", 0), (7, "transition", 0), (2, "transition", 0)])


def max_child_q_sum(topo: Topology, acc: Acceptance) -> float:
    start, index = topo.children
    worst = 0.0
    for v in range(topo.n_nodes):
        total = sum(acc.spine_q(int(topo.depth[c])) if topo.source[c] == 1 else acc.transition_q(topo.rank[c])
                    for c in index[start[v]:start[v + 1]])
        worst = max(worst, total)
    return worst


def valid_acceptance(topo: Topology, p_s: list[float], p_t: list[float], model: str) -> Acceptance:
    """Scale p_s and p_t down where needed so that the exclusive model's child sums stay <= 1."""
    acc = Acceptance.parse(p_s, p_t, model)
    scale = max(1.0, max_child_q_sum(topo, acc)) if model == "exclusive" else 1.0
    return Acceptance.parse([p / scale for p in p_s], [p / scale for p in p_t], model)


def assert_within_se(mean: float, exact: float, variance: float, n: int, k: float = 4.0) -> None:
    se = math.sqrt(max(variance, 0.0) / n)
    assert abs(mean - exact) <= k * se + 1e-12, f"mean {mean} vs exact {exact}: {(mean - exact) / se:.2f} SE"


@settings(**PROPERTY)
@given(tree_seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), p_s=st.lists(probs, min_size=1, max_size=3),
       p_t=st.lists(probs, min_size=1, max_size=4), model=st.sampled_from(["exclusive", "independent"]),
       seed=st.integers(0, 2**63), gaps=st.booleans())
def test_mc_mean_matches_exact_yield(tree_seed, n, p_s, p_t, model, seed, gaps):
    topo = random_topology(np.random.default_rng(tree_seed), n, gap_prob=0.4 if gaps else 0.0)
    acc = valid_acceptance(topo, p_s, p_t, model)
    exact = exact_yield(topo, acc)
    result = simulate(topo, acc, cycles=20_000, seed=seed)
    assert_within_se(result.mean, exact.expected_tau, exact.variance, result.cycles)
    assert result.histogram.sum() == result.cycles and result.histogram.dtype == np.int64
    assert result.histogram.shape == (int(topo.depth.max()) + 2,) and result.histogram[0] == 0


@pytest.mark.parametrize("model", ["exclusive", "independent"])
@pytest.mark.parametrize("tree_seed", [3, 11, 29])
def test_histogram_matches_exact_pmf(model, tree_seed):
    topo = random_topology(np.random.default_rng(tree_seed), 40, spine_prob=0.5)
    acc = valid_acceptance(topo, [0.7, 0.6], [0.3, 0.2, 0.1], model)
    pmf = exact_yield(topo, acc).pmf
    hist = simulate(topo, acc, cycles=400_000, seed=tree_seed).histogram
    assert np.all(hist[pmf == 0] == 0)  # impossible values of tau never occur
    expected = pmf * hist.sum()
    big = expected >= 5  # chi-square on well-filled bins, the rest pooled into one
    observed = np.append(hist[big], hist[~big].sum())
    expect = np.append(expected[big], expected[~big].sum())
    keep = expect > 0
    p_value = stats.chisquare(observed[keep], expect[keep] * observed[keep].sum() / expect[keep].sum()).pvalue
    assert p_value > 1e-4, f"chi-square p = {p_value:.2e}: histogram {hist} vs pmf {pmf}"


def test_exclusive_model_error_matches_the_calculator():
    topo = mixed_tree()
    acc = Acceptance.parse(0.7, 0.2)  # root: 0.7 + 0.2 + 0.2 > 1
    with pytest.raises(ExclusiveModelError) as from_yields:
        exact_yield(topo, acc)
    for run in (simulate, simulate_numpy):
        with pytest.raises(ExclusiveModelError) as from_sim:
            run(topo, acc, cycles=10, seed=0)
        assert str(from_sim.value) == str(from_yields.value)
    with pytest.raises(ExclusiveModelError):
        simulate_bursty(topo, Acceptance.parse(0.5, 0.2), BurstyRegime(0.7, 0.1, 0.1, 0.1), cycles=10, seed=0)
    simulate(topo, acc.with_model("independent"), cycles=10, seed=0)  # no sum rule there


def _thread_counts() -> list[int]:
    top = numba.config.NUMBA_NUM_THREADS
    assert top >= 2, "reproducibility across thread counts needs a machine with >= 2 cores"
    return sorted({1, 2, top})


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_results_do_not_depend_on_the_thread_count(model):
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.1, model)
    regime = BurstyRegime(0.8, 0.2, to_novel=0.01, to_repetitive=0.02)
    cycles = 5 * CHUNK_CYCLES + 123  # several chunks and a partial one
    saved = numba.get_num_threads()
    runs = []
    try:
        for threads in _thread_counts():
            numba.set_num_threads(threads)
            runs.append((simulate(topo, acc, cycles=cycles, seed=42),
                         simulate_bursty(topo, acc, regime, cycles=cycles, seed=42)))
    finally:
        numba.set_num_threads(saved)
    for plain, bursty in runs[1:]:
        np.testing.assert_array_equal(plain.histogram, runs[0][0].histogram)
        np.testing.assert_array_equal(bursty.histogram, runs[0][1].histogram)
        assert (plain.mean, plain.std, plain.ci95) == (runs[0][0].mean, runs[0][0].std, runs[0][0].ci95)
        assert (bursty.lag1_autocorrelation, bursty.fraction_repetitive) == \
            (runs[0][1].lag1_autocorrelation, runs[0][1].fraction_repetitive)


def test_same_seed_same_result_different_seed_different():
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.1)
    a, b = simulate(topo, acc, cycles=100_000, seed=7), simulate(topo, acc, cycles=100_000, seed=7)
    c = simulate(topo, acc, cycles=100_000, seed=8)
    np.testing.assert_array_equal(a.histogram, b.histogram)
    assert (a.mean, a.std, a.ci95) == (b.mean, b.std, b.ci95)
    assert not np.array_equal(a.histogram, c.histogram)
    assert (a.seed, c.seed, a.model) == (7, 8, "exclusive")


def test_summary_statistics_follow_the_histogram():
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.1)
    r = simulate(topo, acc, cycles=50_000, seed=1)
    taus = np.repeat(np.arange(r.histogram.size), r.histogram)
    assert r.mean == pytest.approx(taus.mean(), rel=1e-12)
    assert r.std == pytest.approx(taus.std(ddof=1), rel=1e-9)
    half = 1.959963984540054 * r.std / math.sqrt(r.cycles)
    assert r.ci95 == pytest.approx((r.mean - half, r.mean + half), rel=1e-12)
    one = simulate(topo, acc, cycles=1, seed=1)
    assert one.cycles == 1 and one.std == 0.0 and one.ci95 == (one.mean, one.mean)
    # the interval stays where tau can be: 2 cycles gave [0.08, 7.92] of a tree whose tau is >= 1 (walkthrough)
    from goose_theory.simulate import summarize
    two = summarize(np.array([0, 1, 0, 0, 0, 0, 0, 0, 1]), "exclusive", 0)
    assert two.mean == 4.5 and two.ci95 == (1.0, 8.0)


def test_root_only_and_certain_trees_are_deterministic():
    assert simulate(Topology.root_only(), Acceptance.parse(0.5, 0.5), cycles=1000, seed=0).histogram.tolist() == [0, 1000]
    chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    for model in ("exclusive", "independent"):
        r = simulate(chain, Acceptance.parse(1.0, 0.0, model), cycles=1000, seed=0)
        assert r.histogram.tolist() == [0, 0, 0, 1000] and r.std == 0.0


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_numpy_reference_agrees_with_numba(model):
    topo, acc = mixed_tree(), Acceptance.parse([0.6, 0.5], [0.2, 0.1], model)
    exact = exact_yield(topo, acc)
    fast = simulate(topo, acc, cycles=1_000_000, seed=5)
    slow = simulate_numpy(topo, acc, cycles=300_000, seed=5, batch=70_000)
    se = math.sqrt(exact.variance / fast.cycles + exact.variance / slow.cycles)
    assert abs(fast.mean - slow.mean) <= 4 * se
    assert_within_se(slow.mean, exact.expected_tau, exact.variance, slow.cycles)
    assert slow.histogram.sum() == 300_000 and slow.histogram.shape == fast.histogram.shape


# ---- bursty regimes ---------------------------------------------------------------------------
def test_memoryless_regime_with_equal_p_s_matches_the_plain_simulator():
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.1)
    regime = BurstyRegime(0.5, 0.5, to_novel=0.5, to_repetitive=0.5)
    bursty = simulate_bursty(topo, acc, regime, cycles=1_000_000, seed=2)
    plain = simulate(topo, acc, cycles=1_000_000, seed=3)
    exact = exact_yield(topo, acc)
    assert abs(bursty.mean - plain.mean) <= 4 * math.sqrt(2 * exact.variance / 1_000_000)
    assert bursty.iid_mixture_tau == pytest.approx(exact.expected_tau, rel=1e-12)
    assert abs(bursty.lag1_autocorrelation) <= 4 / math.sqrt(1_000_000)
    assert abs(bursty.fraction_repetitive - 0.5) <= 4 * math.sqrt(0.25 / 1_000_000)
    table = np.vstack([bursty.histogram, plain.histogram])[:, plain.histogram + bursty.histogram > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-4


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_sticky_regime_correlates_tau_and_keeps_the_stationary_mean(model):
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.1, model)
    regime = BurstyRegime(0.8, 0.1, to_novel=0.01, to_repetitive=0.03)
    r = simulate_bursty(topo, acc, regime, cycles=2_000_000, seed=4)
    assert r.lag1_autocorrelation > 0.2
    se = (r.ci95[1] - r.ci95[0]) / (2 * 1.959963984540054)
    assert abs(r.mean - r.iid_mixture_tau) <= 4 * se
    assert se > 3 * r.std / math.sqrt(r.cycles)  # correlation widens the honest CI
    lam = regime.persistence
    se_frac = math.sqrt(0.75 * 0.25 * (1 + lam) / (1 - lam) / r.cycles)
    assert abs(r.fraction_repetitive - regime.stationary_repetitive) <= 4 * se_frac


def test_bursty_confidence_interval_is_calibrated():
    """Across independent seeds the spread of the means matches the reported standard error."""
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.05)
    regime = BurstyRegime(0.9, 0.1, to_novel=0.02, to_repetitive=0.02)
    runs = [simulate_bursty(topo, acc, regime, cycles=200_000, seed=s) for s in range(40)]
    reported = np.median([(r.ci95[1] - r.ci95[0]) / (2 * 1.959963984540054) for r in runs])
    observed = np.std([r.mean for r in runs], ddof=1)
    assert 0.6 < observed / reported < 1.5, f"observed spread {observed:.5f} vs reported SE {reported:.5f}"


def test_bursty_standard_error_is_the_markov_chains():
    """The reported SE against the closed form of a two-state chain (mutation audit, 6 Dec: halving the
    correlation term passed the 0.6-1.5 window above). Cov(tau_0, tau_k) = pi (1 - pi) dE^2 lambda^k, so
    n SE^2 = Var_mix + 2 pi (1 - pi) dE^2 lambda / (1 - lambda), and the lag-1 autocorrelation is
    pi (1 - pi) dE^2 lambda / Var_mix."""
    from dataclasses import replace
    topo, acc = mixed_tree(), Acceptance.parse(0.5, 0.05)
    regime = BurstyRegime(0.9, 0.1, to_novel=0.02, to_repetitive=0.02)
    rep, nov = (exact_yield(topo, replace(acc, p_s=(p,))) for p in (0.9, 0.1))
    pi, lam, gap2 = regime.stationary_repetitive, regime.persistence, (rep.expected_tau - nov.expected_tau) ** 2
    var_mix = pi * rep.variance + (1 - pi) * nov.variance + pi * (1 - pi) * gap2
    r = simulate_bursty(topo, acc, regime, cycles=2_000_000, seed=3)
    theory_se = math.sqrt((var_mix + 2 * pi * (1 - pi) * gap2 * lam / (1 - lam)) / r.cycles)
    reported_se = (r.ci95[1] - r.ci95[0]) / (2 * 1.959963984540054)
    assert reported_se / theory_se == pytest.approx(1.0, abs=0.05)
    assert r.lag1_autocorrelation == pytest.approx(pi * (1 - pi) * gap2 * lam / var_mix, abs=0.01)


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cycles", [0, -5, 1.5, True, "10"])
def test_bad_cycles_raise_one_line(cycles):
    for run in (simulate, simulate_numpy):
        with pytest.raises(SimulationError, match="cycles: must be an integer >= 1") as err:
            run(mixed_tree(), Acceptance.parse(0.5, 0.1), cycles=cycles, seed=0)
        assert "\n" not in str(err.value)


def test_bad_seed_raises():
    with pytest.raises(SimulationError, match="seed"):
        simulate(mixed_tree(), Acceptance.parse(0.5, 0.1), cycles=10, seed=-1)


@pytest.mark.parametrize("args", [(1.5, 0.1, 0.1, 0.1), (0.5, -0.1, 0.1, 0.1), (0.5, 0.1, float("nan"), 0.1),
                                  (0.5, 0.1, 0.1, 2.0), (0.5, 0.1, 0.0, 0.0), ("0.5", 0.1, 0.1, 0.1)])
def test_bad_regime_raises(args):
    with pytest.raises(SimulationError):
        BurstyRegime(*args)
    assert issubclass(SimulationError, AcceptanceError)  # so the CLI reports it with exit code 2


@pytest.mark.parametrize("p_s,p_t", [(1.2, 0.1), (0.5, -0.01), (float("nan"), 0.1)])
def test_probabilities_outside_unit_interval_are_rejected(p_s, p_t):
    with pytest.raises(AcceptanceError):
        simulate(mixed_tree(), Acceptance.parse(p_s, p_t), cycles=10, seed=0)


def test_regime_properties():
    regime = BurstyRegime(0.8, 0.1, to_novel=0.02, to_repetitive=0.06)
    assert regime.stationary_repetitive == pytest.approx(0.75)
    assert regime.persistence == pytest.approx(0.92)
    assert BurstyRegime(0.8, 0.1, to_novel=0.0, to_repetitive=0.3).stationary_repetitive == 1.0


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_per_parent_transition_acceptance_matches_exact(model):
    # spine chain with branches, and transition chains under the root: all three parent kinds
    nodes = [(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0), (3, "transition", 0),
             (4, "transition", 0), (1, "transition", 0), (1, "transition", 1), (7, "transition", 0)]
    topo = Topology.from_nodes(nodes)
    acc = Acceptance.parse(0.6, 0.3, model, p_t_spine="0.1,0.05", p_t_chain=0.7)
    result = simulate(topo, acc, cycles=400_000, seed=11)
    exact = exact_yield(topo, acc).expected_tau
    assert abs(result.mean - exact) < 4 * result.std / np.sqrt(result.cycles)
