"""Latency profiles: interpolation, strict file parsing, and the cost-aware budget choice."""
from __future__ import annotations

import doctest
import json

import numpy as np
import pytest

import goose_theory.latency as latency_module
from goose_theory.acceptance import Acceptance
from goose_theory.latency import (SCHEMA, LatencyError, LatencyProfile, cost_aware, latency_from_dict, load_latency,
                                  save_latency)
from goose_theory.optimize import build_topology


def profile(**kw):
    base = {"sizes": (1, 11, 61), "seconds": (0.020, 0.022, 0.030), "draft_s": 0.001}
    base.update(kw)
    return LatencyProfile(**base)


def test_interpolation_and_cycle_cost():
    p = profile(draft_s_per_node=1e-5)
    assert p.verify_seconds(1) == 0.020 and p.verify_seconds(61) == 0.030
    assert p.verify_seconds(6) == pytest.approx(0.021)
    assert p.verify_seconds(36) == pytest.approx(0.026)
    assert p.cycle_seconds(35) == pytest.approx(0.026 + 0.001 + 35e-5)
    assert p.cycle_seconds(0) == 0.020  # a plain AR step: no drafting


@pytest.mark.parametrize("n", [0, 62])
def test_outside_the_measured_range_is_an_error(n):
    with pytest.raises(LatencyError, match=f"tree size {n} is outside the measured sizes 1..61"):
        profile().verify_seconds(n)


def test_round_trip(tmp_path):
    p = profile(device="H200", model="m", dtype="fp16", draft_s_per_node=2e-6)
    save_latency(p, tmp_path / "lat.json")
    assert load_latency(tmp_path / "lat.json") == p
    assert json.loads((tmp_path / "lat.json").read_text())["schema"] == SCHEMA


@pytest.mark.parametrize("data,needle", [
    ({"sizes": [1, 2], "seconds": [0.1]}, "same length"),
    ({"sizes": [1, 1], "seconds": [0.1, 0.2]}, "strictly increasing"),
    ({"sizes": [5, 2], "seconds": [0.1, 0.2]}, "strictly increasing"),
    ({"sizes": [1, 2], "seconds": [0.1, 0.0]}, "> 0"),
    ({"sizes": [1, 2], "seconds": [0.1, -1]}, "> 0"),
    ({"sizes": [0, 2], "seconds": [0.1, 0.2]}, "integers >= 1"),
    ({"sizes": [1.5, 2], "seconds": [0.1, 0.2]}, "integers >= 1"),
    # past int64 numpy's interpolation overflowed, and a size of 10**6 sent the budget scans on for hours
    ({"sizes": [1, 10**30], "seconds": [0.1, 0.2]}, "at most 4096 tokens"),
    ({"sizes": [1, 4097], "seconds": [0.1, 0.2]}, "at most 4096 tokens"),
    ({"sizes": [1, 2], "seconds": [0.1, "x"]}, "finite number"),
    # JSON's integers have no size limit: math.isfinite(10**400) raised OverflowError, a traceback
    ({"sizes": [1, 2], "seconds": [10**400, 0.2]}, "seconds entry must be a finite number, got an integer too large"),
    ({"draft_s": 10**400}, "draft_s must be a finite number, got an integer too large for a float"),
    ({"draft_s_per_node": -10**400}, "draft_s_per_node must be a finite number, got an integer too large"),
    ({"draft_s": True}, "draft_s must be a finite number, got True"),
    # bad-input sweep, 6 Dec: priced, these made tokens/s inf (and chose budget 0) or 0
    ({"sizes": [1, 2], "seconds": [1e-320, 0.2]}, "seconds entry must be between 1e-9 and 86400 seconds (a day), got 1e-320"),
    ({"draft_s_per_node": 1e308}, "draft_s_per_node must be at most 86400 seconds (a day), got 1e+308"),
    ({"sizes": [1, 2], "seconds": [0.1, 0.2], "draft_s": -1}, "draft_s"),
    ({"sizes": [], "seconds": []}, "non-empty"),
    ({"sizes": 3, "seconds": [0.1]}, "lists"),
    ({"schema": "goose-latency/9"}, "unknown schema"),
    ({"schema": None}, "no 'schema' key (expected 'goose-latency/1'): not a latency profile"),
    ({"draft_s": None}, "missing key 'draft_s'"),
    ({"device": 3}, "device must be a string"),
    # fuzz review, 7 Dec: a typo priced drafting at 0 s a node unsaid
    ({"draft_s_per_nod": 0.5}, "unknown key 'draft_s_per_nod' (a latency profile holds schema, device, model, dtype, "
                               "sizes, seconds, draft_s, draft_s_per_node); did you mean 'draft_s_per_node'?"),
])
def test_bad_files_give_one_line(tmp_path, data, needle):
    doc = {"schema": SCHEMA, "sizes": [1, 2], "seconds": [0.1, 0.2], "draft_s": 0.0}
    doc.update(data)
    doc = {k: v for k, v in doc.items() if v is not None}
    path = tmp_path / "lat.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LatencyError) as err:
        load_latency(path)
    assert needle in str(err.value) and "\n" not in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize("text,needle", [("{not json", "malformed JSON"), ("[1, 2]", "JSON object")])
def test_malformed_json(tmp_path, text, needle):
    (tmp_path / "x.json").write_text(text)
    with pytest.raises(LatencyError, match=needle):
        load_latency(tmp_path / "x.json")
    with pytest.raises(LatencyError, match="no such file"):
        load_latency(tmp_path / "missing.json")


def test_cost_aware_prefers_small_trees_when_verification_cost_grows_steeply():
    acc = Acceptance.parse(0.5, 0.05)
    steep = LatencyProfile(sizes=(1, 61), seconds=(0.02, 0.20), draft_s=0.0005)  # 10x at n=61
    res = cost_aware(acc, steep)
    assert [row["budget"] for row in res.table] == list(range(61))
    rates = [row["tokens_per_s"] for row in res.table]
    assert res.best.budget == rates.index(max(rates)) and 0 < res.best.budget < 20
    row = res.table[res.best.budget]
    assert row["predicted_tau"] == res.best.predicted_tau
    assert row["speedup_vs_ar"] == pytest.approx(row["tokens_per_s"] * 0.02) and row["speedup_vs_ar"] > 1


def test_cost_aware_takes_the_largest_budget_when_cost_is_flat():
    acc = Acceptance.parse(0.5, 0.05)
    flat = LatencyProfile(sizes=(1, 61), seconds=(0.02, 0.02))
    res = cost_aware(acc, flat)
    assert res.best.budget == 60
    assert res.best.predicted_tau == build_topology("optimal", acc, budget=60).predicted_tau


def test_cost_aware_other_rules_budgets_and_profiles_without_size_one():
    acc = Acceptance.parse(0.3, 0.05, "independent")
    prof = LatencyProfile(sizes=(8, 33), seconds=(0.02, 0.03), draft_s=0.001)
    res = cost_aware(acc, prof, rule="paper")
    assert [row["budget"] for row in res.table] == list(range(7, 33))
    assert all(row["speedup_vs_ar"] is None for row in res.table)
    assert res.best.rule == "paper"
    with pytest.raises(LatencyError, match="outside"):
        cost_aware(acc, prof, budgets=[40])
    with pytest.raises(ValueError, match="budget"):
        cost_aware(acc, prof, budgets=[-1])


def test_docstring_examples():
    assert doctest.testmod(latency_module).failed == 0


@pytest.mark.parametrize("acc", [Acceptance.parse("0.9,0.85,0.8,0.7,0.6", "0.25,0.1,0.05,0.03"),
                                 Acceptance.parse(0.7, "0.3,0.2", "independent")])
def test_cost_aware_optimal_matches_a_tree_per_budget(acc):
    # the scan reads E[tau] off one optimisation; the reference builds and scores every budget's tree
    prof = LatencyProfile(sizes=(1, 8, 24, 64), seconds=(0.04, 0.046, 0.063, 0.11), draft_s=0.0006)
    res = cost_aware(acc, prof)
    want = [build_topology("optimal", acc, budget=b).predicted_tau for b in range(64)]
    np.testing.assert_allclose([row["predicted_tau"] for row in res.table], want, rtol=1e-12, atol=0)
    rates = [tau / row["cycle_s"] for tau, row in zip(want, res.table)]
    assert res.best.budget == rates.index(max(rates)) and 5 < res.best.budget < 40
    assert res.table[res.best.budget]["predicted_tau"] == res.best.predicted_tau == want[res.best.budget]


@pytest.mark.parametrize("rule", ["paper", "linear", "optimal"])
def test_cost_aware_prices_each_tree_at_the_nodes_it_holds(rule):
    # p_s + p_t > 1: the exclusive model caps the ranks, so the trees stop growing before their budget
    acc = Acceptance.parse(0.9, 0.3)
    prof = LatencyProfile(sizes=(1, 48), seconds=(0.02, 0.08))
    res = cost_aware(acc, prof, rule=rule)
    for row in res.table:
        tree = build_topology(rule, acc, budget=row["budget"]).topology
        assert row["nodes"] == tree.budget <= row["budget"]
        assert row["cycle_s"] == prof.cycle_seconds(row["nodes"]) and row["tokens_per_s"] == pytest.approx(
            row["predicted_tau"] / row["cycle_s"], rel=1e-15)
    assert any(row["nodes"] < row["budget"] for row in res.table)
    best = max(res.table, key=lambda row: row["tokens_per_s"])  # the first of equal rates
    assert (res.best.budget, res.best.topology.budget) == (best["budget"], best["nodes"])
    # the smallest budget that builds the chosen tree; a larger budget's same tree is priced the same
    assert all(row["nodes"] < best["nodes"] for row in res.table if row["budget"] < best["budget"])
    assert all(row["tokens_per_s"] == best["tokens_per_s"] for row in res.table if row["nodes"] == best["nodes"])


def test_cost_aware_prices_a_tree_below_the_profile_at_its_smallest_size():
    # the candidate tree (2 transitions under the root, 2 under each) holds 6 nodes, 4 of them with no
    # chance; a profile measured from 8 tokens cannot price 6 nodes, and prices them as 7 (an upper
    # bound) instead of refusing
    acc = Acceptance.parse(0.0, "0.5,0")
    prof = LatencyProfile(sizes=(8, 16, 64), seconds=(0.03, 0.035, 0.06))
    for rule in ("optimal", "paper"):
        res = cost_aware(acc, prof, rule=rule, max_depth=2, max_spine=0, top_k=2)
        assert res.table[0]["budget"] == 7 and all(row["nodes"] == 6 for row in res.table)
        assert all(row["cycle_s"] == prof.cycle_seconds(7) for row in res.table)
        assert res.best.budget == 7 and res.best.predicted_tau == pytest.approx(1.75)


@pytest.mark.parametrize("sizes,seconds", [((10**400,), (0.1,)), ((1,), (-10**300,)), ((1,), ("x" * 1000,))])
def test_huge_values_give_a_short_line(sizes, seconds):
    with pytest.raises(LatencyError) as info:
        LatencyProfile(sizes=sizes, seconds=seconds)
    assert len(str(info.value)) <= 200


@pytest.mark.parametrize("seed", range(20))
def test_isotonic_is_scipys_least_squares_fit(seed):
    """The pool-adjacent-violators fit against scipy's isotonic regression (the reference)."""
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(seed)
    values = np.cumsum(rng.normal(0.5, 1.0, size=int(rng.integers(1, 30))))  # drifts up, dips often
    np.testing.assert_allclose(latency_module.isotonic(values), isotonic_regression(values).x, rtol=0, atol=1e-12)


def test_a_dip_in_the_measured_seconds_is_priced_flat_and_kept_in_the_file():
    """3 Dec's refreshed 2-core profile read 12 rows 101.9 ms and 16 rows 97.1: priced as measured,
    budgets 12-15 looked cheaper than 11; priced by the isotonic fit, 12 and 16 cost their mean."""
    measured = (0.0708, 0.0712, 0.0763, 0.0869, 0.1019, 0.0971, 0.1207)
    prof = LatencyProfile(sizes=(1, 2, 4, 8, 12, 16, 24), seconds=measured)
    assert prof.priced_seconds[4] == prof.priced_seconds[5] == pytest.approx((0.1019 + 0.0971) / 2)
    costs = [prof.verify_seconds(n) for n in range(1, 25)]
    assert all(b >= a for a, b in zip(costs, costs[1:]))  # never cheaper for more tokens
    assert prof.to_dict()["seconds"] == list(measured)  # the file keeps what was measured
    assert latency_from_dict(prof.to_dict()) == prof


def test_a_profile_that_never_dips_is_priced_as_measured():
    prof = LatencyProfile(sizes=(1, 2, 4, 8), seconds=(0.02, 0.02, 0.021, 0.03))
    assert prof.priced_seconds == prof.seconds
    assert [prof.verify_seconds(n) for n in (1, 2, 4, 8)] == [0.02, 0.02, 0.021, 0.03]
