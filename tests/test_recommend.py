"""Recommendation: the optimal tree beats every reference rule at the same budget; cost-aware wiring."""
from __future__ import annotations

import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.latency import LatencyProfile, cost_aware
from goose_theory.optimize import build_topology
from goose_theory.recommend import COMPARE, recommend


@pytest.mark.parametrize("p_s,p_t,budget", [(0.6, 0.05, 30), ([0.3, 0.5, 0.7], [0.1, 0.04, 0.02], 20), (0.2, 0.08, 12)])
def test_optimal_is_best_at_the_same_budget(p_s, p_t, budget):
    rec = recommend(Acceptance.parse(p_s, p_t), budget=budget)
    assert rec.best.rule == "optimal" and rec.budget == budget and rec.budget_source == "given"
    assert [r["rule"] for r in rec.rows] == list(COMPARE)
    best = rec.rows[0]["predicted_tau"]
    for row in rec.rows:
        assert row["budget"] <= budget and row["predicted_tau"] <= best + 1e-9
    paper = next(r for r in rec.rows if r["rule"] == "paper")
    assert paper["gain_vs_paper"] == 0.0 and rec.rows[0]["gain_vs_paper"] >= 0.0


def test_recommendation_matches_the_optimizer_directly():
    acc = Acceptance.parse(0.5, 0.05)
    rec = recommend(acc, budget=25, budget_source="recorded")
    direct = build_topology("optimal", acc, budget=25)
    assert rec.best.predicted_tau == pytest.approx(direct.predicted_tau)
    assert rec.to_dict()["budget_source"] == "recorded" and rec.to_dict()["rule"] == "optimal"


def test_latency_profile_chooses_the_budget():
    """With a latency profile the budget is the cost-aware one, and every rule is compared there."""
    steep = LatencyProfile(sizes=(1, 41), seconds=(0.02, 0.06))  # +5% per node: small trees win
    acc = Acceptance.parse(0.5, 0.05)
    rec = recommend(acc, budget=60, latency=steep)
    chosen = cost_aware(acc, steep)
    assert rec.budget_source == "cost-aware" and rec.budget == chosen.best.budget < 40
    assert rec.best.predicted_tau == pytest.approx(chosen.best.predicted_tau)
    assert len(rec.cost_table) == 41 and all(r["budget"] <= rec.budget for r in rec.rows)


def test_a_given_budget_is_the_most_the_cost_aware_choice_takes():
    # as goose optimize --budget B --latency: fit-acceptance --budget 5 --latency chose 36 here
    flat = LatencyProfile(sizes=(1, 41), seconds=(0.02, 0.021))  # big trees nearly free: the largest wins
    acc = Acceptance.parse(0.5, 0.05)
    given = recommend(acc, budget=5, latency=flat)
    assert given.budget == 5 and [r["budget"] for r in given.cost_table] == list(range(6))
    recorded = recommend(acc, budget=5, budget_source="recorded", latency=flat)
    assert recorded.budget > 30 and len(recorded.cost_table) == 41


def test_rules_wider_than_top_k_are_named_as_left_out():
    # fit-acceptance dropped isotropic:5 from its comparison without a word when the traces hold 4 ranks
    rec = recommend(Acceptance.parse(0.6, 0.05), budget=8, top_k=4)
    assert rec.left_out == ("isotropic:5",) and rec.top_k == 4
    assert "isotropic:5" not in [r["rule"] for r in rec.rows] and "isotropic:3" in [r["rule"] for r in rec.rows]
    assert recommend(Acceptance.parse(0.6, 0.05), budget=8).left_out == ()
