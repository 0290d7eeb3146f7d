"""Model checks: depth-dependence tests, over-dispersion, goodness of fit and the bound check."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.fit import fit_counts
from goose_theory.fitcheck import check_group, curve_test, parent_test, spine_availability
from goose_theory.fitcounts import count_tables
from goose_theory.fitpredict import bound_check, calibration, goodness_of_fit, recorded_shapes
from goose_theory.optimize import build_topology
from goose_theory.synthetic import SyntheticSpec, synthetic_table
from goose_theory.topology import Topology

DEEP = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(6)]
                           + [(0, "transition", 0), (0, "transition", 1), (1, "transition", 0)])
PAPER = build_topology("paper", Acceptance.parse(0.5, 0.04), budget=30).topology
OPT = build_topology("optimal", Acceptance.parse(0.3, 0.04), budget=30).topology


def _fit(specs, seed=0, group_by=("method",)):
    return fit_counts(count_tables([synthetic_table(specs, seed=seed)], group_by=group_by), n_boot=300, seed=seed)


def test_curve_test_detects_depth_dependence_and_recovers_curve():
    fit = _fit(SyntheticSpec([0.3, 0.5, 0.7], 0.1, (DEEP,), prompts=50, cycles=200), seed=1, group_by=())
    checks = check_group(fit.overall, fit.counts)
    assert checks.spine_depth.supported and checks.spine_depth.p_value < 1e-6
    assert np.allclose(checks.spine_depth.curve[:3], [0.3, 0.5, 0.7], atol=0.04)
    assert len(checks.selected.p_s) > 1 and len(checks.scalar.p_s) == 1


def test_curve_test_keeps_constant_model_on_constant_data():
    supported = []
    for seed in range(10):
        fit = _fit(SyntheticSpec(0.5, 0.1, (DEEP,), prompts=30, cycles=100), seed=seed, group_by=())
        supported.append(check_group(fit.overall, fit.counts).spine_depth.supported)
    assert sum(supported) <= 2  # a 5% test: rarely fires on constant data


def test_curve_test_pools_sparse_tail():
    t = curve_test(np.array([0, 60, 30, 2, 1]), np.array([0, 100, 100, 5, 3]), start=1, min_n=30)
    assert t.bin_n == (100, 108) and t.df == 1
    assert t.curve[1] == pytest.approx(33 / 108)


def test_a_rank_without_data_between_two_with_data_is_interpolated():
    # a topology with ranks 0 and 2 only (the optimum's first fit) records no rank-1 nodes: rank 1
    # took rank 0's 0.3 before, and the recommendation drafted it as such
    t = curve_test(np.array([30, 0, 10]), np.array([100, 0, 100]), start=0)
    assert t.curve == pytest.approx((0.3, 0.2, 0.1)) and t.bin_n == (100, 0, 100) and t.df == 1
    lead = curve_test(np.array([0, 30, 0, 10]), np.array([0, 100, 0, 100]), start=0)
    assert lead.curve == pytest.approx((0.2, 0.3, 0.2, 0.1))  # before the first bin with data: the pooled rate


def test_overdispersion_flags_prompt_random_effects():
    fit = _fit(SyntheticSpec(0.5, 0.1, (DEEP,), prompts=40, cycles=50, prompt_sd=1.0), seed=2, group_by=())
    checks = check_group(fit.overall, fit.counts)
    assert checks.spine_dispersion.overdispersed and checks.spine_dispersion.rho > 0.03


def test_goodness_of_fit_on_clean_data():
    fit = _fit(SyntheticSpec([0.5, 0.6, 0.7], [0.08, 0.04, 0.02], (PAPER, OPT), prompts=40, cycles=100), seed=3)
    g = fit.groups[0]
    checks = check_group(g, fit.counts)
    gof = goodness_of_fit(g, fit.counts, recorded_shapes(fit.counts), selected=checks.selected, scalar=checks.scalar)
    assert gof.within_ci and abs(gof.relative_error) < 0.05 and abs(gof.z) < 4 and gof.skipped_cycles == 0
    cal = calibration(g, fit.counts, recorded_shapes(fit.counts), checks.selected, bins=4)
    assert cal["n"].sum() == g.cycles
    # each bin's prediction is its own cycles': the two shapes' predictions differ by ~0.22, so swapped ones miss
    assert np.all(np.abs(cal["observed"] - cal["predicted"]) < 0.05)
    assert ((cal["lo"] <= cal["predicted"]) & (cal["predicted"] <= cal["hi"])).all()


def test_bound_check_flags_planted_violation_and_only_it():
    specs = [SyntheticSpec(0.5, 0.04, (PAPER, OPT), prompts=30, cycles=100, method="clean"),
             SyntheticSpec(0.5, 0.04, (PAPER, OPT), prompts=30, cycles=100, method="planted", run_id="r2",
                           max_accepted_depth=1)]
    fit = _fit(specs, seed=4)
    topos = recorded_shapes(fit.counts)
    result = {g.label: bound_check(g, fit.counts, topos, scalar=check_group(g, fit.counts).scalar) for g in fit.groups}
    assert result["planted"].violated and not result["clean"].violated
    for b in result.values():
        assert b.lower_bound <= b.exact + 1e-12


def test_bound_check_fires_on_one_prompt_too():
    # one prompt has no bootstrap: the observed tau takes the naive interval over cycles (as p_s and
    # p_t take Wilson's), else its interval was NaN and a planted violation never showed (review, 3 Dec)
    for method, deep in (("planted", 1), ("clean", None)):
        fit = _fit(SyntheticSpec(0.5, 0.04, (PAPER, OPT), prompts=1, cycles=400, method=method,
                                 max_accepted_depth=deep), seed=4)
        g = fit.groups[0]
        lo, hi = g.observed_tau.ci95
        assert g.prompts == 1 and lo < g.observed_tau.estimate < hi
        check = bound_check(g, fit.counts, recorded_shapes(fit.counts), scalar=check_group(g, fit.counts).scalar)
        assert check.violated == (method == "planted")


def test_bound_check_silent_on_clean_data_across_seeds():
    for seed in range(8):
        fit = _fit(SyntheticSpec(0.45, 0.05, (PAPER, OPT), prompts=20, cycles=40, prompt_sd=0.5), seed=seed)
        g = fit.groups[0]
        assert not bound_check(g, fit.counts, recorded_shapes(fit.counts),
                               scalar=check_group(g, fit.counts).scalar).violated


def test_spine_availability_from_offer_histogram():
    assert spine_availability(np.array([50, 0, 25, 25]), max_spine=4) == (0.5, 1.0, 0.5, 0.0)
    assert spine_availability(np.zeros(8)) == ()


def test_recorded_spine_offers_scale_p_s_for_the_recommendation():
    table = synthetic_table(SyntheticSpec(0.6, 0.1, (DEEP,), prompts=10, cycles=40), seed=5)
    cyc = np.cumsum(table.column("node").to_numpy() == 0)
    offers = np.where(cyc % 2 == 0, 0, 20).astype(np.int16)  # cycles alternate: 0 or 20 tokens offered
    i = table.schema.get_field_index("spine_avail")
    table = table.set_column(i, table.schema.field(i), pa.array(offers, pa.int16()))
    fit = fit_counts(count_tables([table]), n_boot=100)
    checks = check_group(fit.overall, fit.counts)
    assert checks.availability[0] == pytest.approx(0.5) and checks.availability[1:] == (1.0,) * 19
    rec = checks.for_recommendation
    assert rec.spine_q(1) == pytest.approx(0.5 * checks.selected.spine_q(1))
    assert rec.spine_q(2) == pytest.approx(checks.selected.spine_q(2))


def test_parent_test_detects_per_parent_p_t_and_selects_it():
    """p_t differing by parent source: the LRT and AIC support it and ``selected`` carries the
    per-parent values (near the truth); for_recommendation keeps them."""
    mixed = Topology.from_nodes([*zip(DEEP.parent, DEEP.source, DEEP.rank), (7, "transition", 0)])
    spec = SyntheticSpec(0.6, 0.15, (mixed,), prompts=40, cycles=150, p_t_spine=0.03, p_t_chain=0.5)
    fit = _fit(spec, seed=31, group_by=())
    checks = check_group(fit.overall, fit.counts)
    assert checks.parent.supported and checks.parent.p_value < 1e-6
    sel = checks.selected
    assert sel.by_parent
    for source, truth in enumerate((0.15, 0.03, 0.5)):
        assert abs(sel.transition_q(0, source) - truth) < 0.06, (source, sel.transition_list(source))
    rec = checks.for_recommendation
    assert rec.p_t_spine == sel.p_t_spine and rec.p_t_chain == sel.p_t_chain
    assert Acceptance.from_dict(checks.to_dict()["selected"]) == sel
    # DEEP has no transition node under a transition node: that source falls back to pooled p_t
    fit = _fit(SyntheticSpec(0.6, 0.15, (DEEP,), prompts=40, cycles=150, p_t_spine=0.03), seed=32, group_by=())
    deep = check_group(fit.overall, fit.counts)
    pooled = deep.transition_rank.curve if deep.transition_rank.supported else deep.scalar.p_t
    assert deep.selected.by_parent and deep.selected.p_t_chain == pytest.approx(pooled)


def test_parent_test_stays_quiet_when_p_t_is_the_same_for_every_parent():
    """Equal p_t under every parent: no selection of per-parent p_t in (almost) every seed, and the
    LRT p-values look uniform (not piled up near 0)."""
    p_values, chosen = [], 0
    for seed in range(12):
        fit = _fit(SyntheticSpec(0.5, 0.12, (DEEP,), prompts=30, cycles=100), seed=100 + seed, group_by=())
        checks = check_group(fit.overall, fit.counts)
        p_values.append(checks.parent.p_value)
        chosen += checks.selected.by_parent
    assert chosen <= 2
    assert np.median(p_values) > 0.15


def test_parent_test_unit():
    same = parent_test(np.array([[30, 5], [30, 5], [30, 5]]), np.array([[100, 100]] * 3), bins=2)
    assert same.lr < 1e-9 and not same.supported and same.df == 4
    differ = parent_test(np.array([[40, 5], [5, 5], [60, 5]]), np.array([[100, 100]] * 3), bins=1)
    assert differ.supported and differ.df == 2 and differ.estimates == (0.225, 0.05, 0.325)
    unseen = parent_test(np.array([[40], [0], [60]]), np.array([[100], [0], [100]]))
    assert unseen.df == 1 and np.isnan(unseen.estimates[1])


def test_overdispersion_counts_each_prompt_once_across_runs():
    # the same 12 prompts decoded in two runs (another run_id): 12 prompts for the beta-binomial,
    # as for the bootstrap, not 24 (which would treat a prompt's two decodings as independent)
    spec = SyntheticSpec(0.6, 0.15, (DEEP,), prompts=12, cycles=40, prompt_sd=0.5, prompt_group="shared")
    again = SyntheticSpec(0.6, 0.15, (DEEP,), prompts=12, cycles=40, prompt_sd=0.5, run_id="run-again",
                          prompt_group="shared")
    fit = fit_counts(count_tables([synthetic_table(spec, seed=3), synthetic_table(again, seed=3)]), n_boot=50)
    checks = check_group(fit.overall, fit.counts)
    assert fit.overall.prompts == checks.spine_dispersion.prompts == checks.transition_dispersion.prompts == 12
