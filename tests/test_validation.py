"""Prediction-vs-measurement helpers: intervals of a ratio over prompts (alone and paired), the
noise floor of a prediction, realised-tree prediction."""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology
from goose_theory.validation import (cluster_ratio_ci, paired_ratio_ci, prompt_spread, ratio_ci, realised_prediction,
                                     split_noise)
from goose_theory.yields import expected_tau

CHAIN = ((-1, 0, 1), ("root", "spine", "spine"), (0, 0, 0))
BUSH = ((-1, 0, 0, 0), ("root", "spine", "transition", "transition"), (0, 0, 0, 1))


def test_ratio_of_sums_and_interval():
    rng = np.random.default_rng(1)
    den = rng.integers(20, 60, size=40)
    num = den * rng.normal(3.0, 0.3, size=40)
    est, lo, hi = ratio_ci(num, den)
    assert est == pytest.approx(num.sum() / den.sum())
    assert lo < est < hi and hi - lo < 0.5
    assert np.log(hi / est) == pytest.approx(np.log(est / lo))  # symmetric on the log scale


def test_ratio_ci_covers_about_95_percent_at_few_prompts():
    rng = np.random.default_rng(7)
    num, den = _population(rng)
    truth, inside, draws = num.sum() / den.sum(), 0, 3000
    for _ in range(draws):
        pick = rng.choice(num.size, 8, replace=False)
        _, lo, hi = ratio_ci(num[pick], den[pick])
        inside += lo <= truth <= hi
    assert 0.92 <= inside / draws <= 0.975


def test_cluster_bootstrap_of_a_ratio():
    rng = np.random.default_rng(1)
    den = rng.integers(20, 60, size=40)
    num = den * rng.normal(3.0, 0.3, size=40)
    est, lo, hi = cluster_ratio_ci(num, den, n_boot=2000, seed=2)
    assert est == pytest.approx(num.sum() / den.sum())
    assert lo < est < hi and hi - lo < 0.5
    assert cluster_ratio_ci(num, den, seed=2) == cluster_ratio_ci(num, den, seed=2)  # seeded
    assert all(np.isnan(cluster_ratio_ci([], [])))
    assert np.isnan(cluster_ratio_ci([5.0], [2.0])[1])


def test_ratio_degenerate_inputs():
    assert all(np.isnan(ratio_ci([], [])))
    assert all(np.isnan(ratio_ci([1.0, 2.0], [1.0])))
    est, lo, hi = ratio_ci([5.0], [2.0])
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


def test_split_noise_with_the_spread_of_the_held_out_prompts_needs_their_degrees_of_freedom():
    rng = np.random.default_rng(8)
    num, den = _population(rng)
    n_fit, n_hold, draws = 16, 5, 3000
    with_t = with_normal = 0
    for _ in range(draws):  # as goose validate does: the spread comes from the n_hold measured prompts
        idx = rng.choice(num.size, n_fit + n_hold, replace=False)
        fit, hold = idx[:n_fit], idx[n_fit:]
        measured = num[hold].sum() / den[hold].sum()
        error = abs(num[fit].sum() / den[fit].sum() - measured) / measured
        spread = prompt_spread(num[hold], den[hold])
        with_t += error <= split_noise(spread, n_fit, n_hold, df=n_hold - 1)
        with_normal += error <= split_noise(spread, n_fit, n_hold)
    assert 0.92 <= with_t / draws <= 0.98
    assert with_normal / draws < 0.9  # the normal quantile with an estimated spread is too narrow


def test_noise_degenerate_inputs():
    assert np.isnan(prompt_spread([3.0], [1.0])) and np.isnan(prompt_spread([], []))
    assert prompt_spread([4.0, 6.0], [2.0, 3.0]) == 0.0
    assert np.isnan(split_noise(0.3, 0, 5)) and np.isnan(split_noise(float("nan"), 5, 5))
    assert np.isnan(split_noise(0.3, 16, 1, df=0))


def test_paired_ratio_ci_sees_a_small_steady_gain_that_separate_intervals_miss():
    rng = np.random.default_rng(5)
    cycles = rng.integers(40, 90, size=10).astype(float)
    tau = rng.uniform(1.4, 3.3, size=10)           # prompts differ a lot
    b_num, a_num = tau * cycles, 1.02 * tau * cycles  # a is 2% better on every prompt
    d, lo, hi = paired_ratio_ci(a_num, cycles, b_num, cycles)
    assert d == pytest.approx(0.02) and lo == pytest.approx(0.02) and hi == pytest.approx(0.02)
    _, a_lo, _ = ratio_ci(a_num, cycles)
    _, _, b_hi = ratio_ci(b_num, cycles)
    assert a_lo < b_hi  # unpaired, the two intervals overlap widely


def test_paired_ratio_ci_covers_the_population_difference_about_95_percent():
    rng = np.random.default_rng(6)
    b_num, den = _population(rng)
    a_num = b_num * rng.normal(1.03, 0.06, size=b_num.size)  # a ~3% above b, prompt by prompt noise
    truth = (a_num.sum() / den.sum()) / (b_num.sum() / den.sum()) - 1
    inside, draws = 0, 3000
    for _ in range(draws):
        pick = rng.choice(b_num.size, 8, replace=False)
        d, lo, hi = paired_ratio_ci(a_num[pick], den[pick], b_num[pick], den[pick])
        assert lo < d < hi
        inside += lo <= truth <= hi
    assert 0.92 <= inside / draws <= 0.975


def test_paired_ratio_ci_degenerate_inputs():
    assert all(np.isnan(paired_ratio_ci([], [], [], [])))
    assert all(np.isnan(paired_ratio_ci([1.0, 2.0], [1.0, 1.0], [1.0], [1.0])))  # not paired
    assert all(np.isnan(paired_ratio_ci([1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0])))  # no cycles in b
    d, lo, hi = paired_ratio_ci([3.0], [1.0], [2.0], [1.0])
    assert d == pytest.approx(0.5) and np.isnan(lo) and np.isnan(hi)


def test_prompt_totals_sums_the_root_rows_per_method_and_prompt(tmp_path):
    import pandas as pd

    from goose_theory.traceio import TraceFileError
    from goose_theory.validation import prompt_totals
    path = "traces/mtbench-b8.parquet"
    totals = prompt_totals(path)
    roots = pd.read_parquet(path, columns=["method", "benchmark", "prompt_id", "node", "tau"]).query("node == 0")
    for (method, bench, prompt), row in totals.iterrows():
        mine = roots[(roots.method == method) & (roots.benchmark == bench) & (roots.prompt_id == prompt)]
        assert row["tokens"] == mine["tau"].sum() and row["cycles"] == len(mine)
    assert list(totals.loc["goose@8"].index.get_level_values("prompt_id")) == list(
        dict.fromkeys(roots[roots.method == "goose@8"]["prompt_id"]))  # the file's order
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(TraceFileError, match="bad.parquet: not a readable parquet file"):
        prompt_totals(tmp_path / "bad.parquet")
