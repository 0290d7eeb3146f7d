"""Prediction-vs-measurement helpers: cluster bootstrap of a ratio, realised-tree prediction."""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology
from goose_theory.validation import cluster_ratio_ci, realised_prediction
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
