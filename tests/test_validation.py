"""Prediction-vs-measurement helpers: cluster bootstrap of a ratio, realised-tree prediction."""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology
from goose_theory.validation import (cluster_ratio_ci, paired_ratio_ci, prompt_spread, realised_prediction,
                                     split_noise)
from goose_theory.yields import expected_tau

CHAIN = ((-1, 0, 1), ("root", "spine", "spine"), (0, 0, 0))
BUSH = ((-1, 0, 0, 0), ("root", "spine", "transition", "transition"), (0, 0, 0, 1))


def test_ratio_of_sums_and_interval_cover():
    rng = np.random.default_rng(1)
    den = rng.integers(20, 60, size=40)
    num = den * rng.normal(3.0, 0.3, size=40)
    est, lo, hi = cluster_ratio_ci(num, den, n_boot=2000, seed=2)
    assert est == pytest.approx(num.sum() / den.sum())
    assert lo < est < hi and hi - lo < 0.5
    assert cluster_ratio_ci(num, den, seed=2) == cluster_ratio_ci(num, den, seed=2)  # seeded


def test_ratio_degenerate_inputs():
    assert all(np.isnan(cluster_ratio_ci([], [])))
    est, lo, hi = cluster_ratio_ci([5.0], [2.0])
    assert est == 2.5 and np.isnan(lo) and np.isnan(hi)


def test_realised_prediction_weights_shapes_by_count():
    acc = Acceptance.parse(0.6, 0.1)
    pred = realised_prediction([CHAIN, CHAIN, CHAIN, BUSH], acc)
    chain = expected_tau(Topology.from_nodes(zip(*CHAIN)), acc)
    bush = expected_tau(Topology.from_nodes(zip(*BUSH)), acc)
    assert pred.tau == pytest.approx((3 * chain + bush) / 4)
    assert pred.cycles == 4 and pred.shapes == 2 and pred.model == "exclusive"


def test_realised_prediction_falls_back_per_tree():
    acc = Acceptance.parse(0.9, 0.2)  # 0.9 + 2 * 0.2 > 1 at the root of BUSH; CHAIN is feasible
    pred = realised_prediction([BUSH, CHAIN, CHAIN], acc)
    assert pred.model == "exclusive (independent on 1 cycles)"
    bush = expected_tau(Topology.from_nodes(zip(*BUSH)), acc.with_model("independent"))
    chain = expected_tau(Topology.from_nodes(zip(*CHAIN)), acc)  # the feasible tree keeps its model
    assert pred.tau == pytest.approx((bush + 2 * chain) / 3)


def _population(rng, size=5000):
    """Prompts like real ones: 40-90 cycles each, per-prompt tau log-normal around 2 (CV ~0.3)."""
    cycles = rng.integers(40, 91, size=size).astype(float)
    tau = 2.0 * np.exp(rng.normal(0.0, 0.3, size=size) - 0.045)
    return tau * cycles, cycles


def test_prompt_spread_is_the_delta_method_standard_error():
    rng = np.random.default_rng(3)
    num, den = _population(rng)
    spread = prompt_spread(num, den)
    assert 0.25 < spread < 0.35  # per-prompt tau CV 0.3, diluted a little by the cycle weights
    n, draws = 10, 4000
    picks = rng.integers(0, num.size, size=(draws, n))
    ratios = num[picks].sum(1) / den[picks].sum(1)
    empirical = np.std(ratios / (num.sum() / den.sum()))
    assert empirical == pytest.approx(spread / np.sqrt(n), rel=0.1)


def test_split_noise_covers_an_exact_models_error_about_95_percent():
    rng = np.random.default_rng(4)
    num, den = _population(rng)
    n_fit, n_hold, draws = 16, 5, 3000
    half = split_noise(prompt_spread(num, den), n_fit, n_hold)
    inside = 0
    for _ in range(draws):  # "fit" = the pooled tau of n_fit prompts, "measure" on n_hold others
        idx = rng.choice(num.size, n_fit + n_hold, replace=False)
        fit, hold = idx[:n_fit], idx[n_fit:]
        predicted = num[fit].sum() / den[fit].sum()
        measured = num[hold].sum() / den[hold].sum()
        inside += abs(predicted - measured) / measured <= half
    assert 0.92 <= inside / draws <= 0.975
    assert split_noise(0.3, 16, 5) > split_noise(0.3, 16, 50) > split_noise(0.3, 1000, 1000)


def test_noise_degenerate_inputs():
    assert np.isnan(prompt_spread([3.0], [1.0])) and np.isnan(prompt_spread([], []))
    assert prompt_spread([4.0, 6.0], [2.0, 3.0]) == 0.0
    assert np.isnan(split_noise(0.3, 0, 5)) and np.isnan(split_noise(float("nan"), 5, 5))


def test_paired_ratio_ci_sees_a_small_steady_gain_that_separate_intervals_miss():
    rng = np.random.default_rng(5)
    cycles = rng.integers(40, 90, size=10).astype(float)
    tau = rng.uniform(1.4, 3.3, size=10)           # prompts differ a lot
    b_num, a_num = tau * cycles, 1.02 * tau * cycles  # a is 2% better on every prompt
    d, lo, hi = paired_ratio_ci(a_num, cycles, b_num, cycles, seed=1)
    assert d == pytest.approx(0.02) and lo == pytest.approx(0.02) and hi == pytest.approx(0.02)
    _, a_lo, _ = cluster_ratio_ci(a_num, cycles, seed=1)
    _, _, b_hi = cluster_ratio_ci(b_num, cycles, seed=1)
    assert a_lo < b_hi  # unpaired, the two intervals overlap widely


def test_paired_ratio_ci_interval_brackets_a_noisy_difference():
    rng = np.random.default_rng(6)
    cycles = rng.integers(40, 90, size=12).astype(float)
    tau = rng.uniform(1.4, 3.3, size=12)
    a_num = tau * cycles * rng.normal(1.0, 0.05, size=12)
    d, lo, hi = paired_ratio_ci(a_num, cycles, tau * cycles, cycles, seed=2)
    assert d == pytest.approx(a_num.sum() / (tau * cycles).sum() - 1)
    assert lo < d < hi and hi - lo < 0.1
    assert paired_ratio_ci(a_num, cycles, tau * cycles, cycles, seed=2) == (d, lo, hi)  # seeded


def test_paired_ratio_ci_degenerate_inputs():
    assert all(np.isnan(paired_ratio_ci([], [], [], [])))
    assert all(np.isnan(paired_ratio_ci([1.0, 2.0], [1.0, 1.0], [1.0], [1.0])))  # not paired
    d, lo, hi = paired_ratio_ci([3.0], [1.0], [2.0], [1.0])
    assert d == pytest.approx(0.5) and np.isnan(lo) and np.isnan(hi)
