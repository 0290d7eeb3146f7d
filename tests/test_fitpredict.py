"""Goodness of fit and the bound check on recorded trees: the per-shape model fallback.

(The statistical behaviour -- clean data within the interval, a planted bound violation
flagged -- is tested in test_fitcheck.py.)"""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.bound import paper_lower_bound
from goose_theory.fit import fit_counts
from goose_theory.fitcounts import count_tables
from goose_theory.fitpredict import bound_check, calibration, goodness_of_fit, recorded_shapes
from goose_theory.synthetic import SyntheticSpec, synthetic_table
from goose_theory.topology import Topology
from goose_theory.yields import exact_yield

CHAIN = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0)])
# root with a spine child and two transition children: p_s + 2 p_t > 1 makes exclusive infeasible
FAN = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1),
                           (1, "spine", 0)])
INFEASIBLE_ON_FAN = Acceptance.parse(0.7, 0.3, "exclusive")


def _recorded():
    """Cycles on CHAIN and FAN (drawn where exclusive is feasible), and the cycles per tree."""
    table = synthetic_table(SyntheticSpec(0.6, 0.15, (CHAIN, FAN), prompts=6, cycles=40), seed=3)
    fit = fit_counts(count_tables([table]), n_boot=50, seed=0)
    topos = recorded_shapes(fit.counts)
    per_shape = fit.counts.shape_table.groupby("shape")["n"].sum()
    cycles = {("fan" if topos.topology(s).n_nodes == FAN.n_nodes else "chain"): int(n) for s, n in per_shape.items()}
    assert set(cycles) == {"chain", "fan"} and len(topos) == 2
    return fit, topos, cycles


def test_goodness_of_fit_falls_back_on_the_infeasible_shape_only():
    fit, topos, cycles = _recorded()
    scalar = Acceptance.parse(0.6, 0.25, "exclusive")  # also infeasible on FAN, but not `selected`: tells them apart
    gof = goodness_of_fit(fit.overall, fit.counts, topos, selected=INFEASIBLE_ON_FAN, scalar=scalar)
    assert gof.model == f"exclusive (independent on {cycles['fan']} cycles)"

    def expected(acc: Acceptance) -> float:
        chain = exact_yield(CHAIN, acc).expected_tau  # still exclusive
        fan = exact_yield(FAN, acc.with_model("independent")).expected_tau
        return (cycles["chain"] * chain + cycles["fan"] * fan) / (cycles["chain"] + cycles["fan"])

    assert gof.predicted == pytest.approx(expected(INFEASIBLE_ON_FAN))
    assert gof.predicted_scalar == pytest.approx(expected(scalar))
    assert expected(scalar) != pytest.approx(expected(INFEASIBLE_ON_FAN))  # so a mixed-up acceptance shows
    assert gof.cycles == cycles["chain"] + cycles["fan"] and gof.skipped_cycles == 0


def test_bound_check_falls_back_on_the_same_shape_as_the_yield():
    fit, topos, cycles = _recorded()
    gof = goodness_of_fit(fit.overall, fit.counts, topos, selected=INFEASIBLE_ON_FAN, scalar=INFEASIBLE_ON_FAN)
    check = bound_check(fit.overall, fit.counts, topos, scalar=INFEASIBLE_ON_FAN)
    assert check.model == gof.model
    chain = paper_lower_bound(CHAIN, INFEASIBLE_ON_FAN)
    fan = paper_lower_bound(FAN, INFEASIBLE_ON_FAN.with_model("independent"))
    w = np.array([cycles["chain"], cycles["fan"]], dtype=float)
    assert check.lower_bound == pytest.approx(w @ [chain.lower_bound, fan.lower_bound] / w.sum())
    assert check.exact == pytest.approx(gof.predicted)


def test_no_fallback_where_exclusive_is_feasible():
    fit, topos, _ = _recorded()
    feasible = Acceptance.parse(0.6, 0.15, "exclusive")
    gof = goodness_of_fit(fit.overall, fit.counts, topos, selected=feasible, scalar=feasible)
    assert gof.model == "exclusive"
    assert bound_check(fit.overall, fit.counts, topos, scalar=feasible).model == "exclusive"


def test_shape_evaluations_are_memoised_per_acceptance():
    """goodness of fit, calibration and the bound check of one group share each acceptance's
    evaluation of the recorded shapes: one batched evaluation per acceptance."""
    fit, shapes, _ = _recorded()
    selected, scalar = Acceptance.parse(0.6, 0.15), Acceptance.parse(0.55, 0.1)
    goodness_of_fit(fit.overall, fit.counts, shapes, selected=selected, scalar=scalar)
    calibration(fit.overall, fit.counts, shapes, selected)
    bound_check(fit.overall, fit.counts, shapes, scalar=scalar)
    assert set(shapes._memo) == {selected, scalar}
    assert shapes.evaluate(Acceptance.parse(0.6, 0.15)) is shapes.evaluate(selected)  # equal acceptances share it
