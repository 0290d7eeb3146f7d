"""Fitting p_s / p_t: recovery, honest (cluster-bootstrap) coverage, groups and parents.
(Counting the trace rows, streaming included: tests/test_fitcounts.py.)"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from goose_theory.fit import Z95, fit_counts, wilson
from goose_theory.fitcounts import count_tables
from goose_theory.synthetic import SyntheticSpec, synthetic_table
from goose_theory.validation import ratio_ci
from tests.conftest import DEEP, TREE


def _fit(spec, seed=0, n_boot=300, group_by=()):
    return fit_counts(count_tables([synthetic_table(spec, seed=seed)], group_by=group_by), n_boot=n_boot, seed=seed)


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (37, 200)])
def test_wilson_endpoints_solve_the_score_equation(k, n):
    p = k / n
    for bound in wilson(k, n):
        # the Wilson endpoints are the roots of (p - x)^2 = z^2 x (1 - x) / n
        assert math.isclose((p - bound) ** 2, Z95 ** 2 * bound * (1 - bound) / n, abs_tol=1e-12)


def test_recovers_scalar_parameters():
    fit = _fit(SyntheticSpec(0.55, 0.12, (TREE,), prompts=60, cycles=300), seed=1)
    p_s, p_t = fit.overall.p_s, fit.overall.p_t
    assert abs(p_s.estimate - 0.55) < 0.015 and abs(p_t.estimate - 0.12) < 0.01
    assert p_s.ci95[0] < p_s.estimate < p_s.ci95[1]
    assert p_s.n == int(fit.counts.spine_reached.sum()) and fit.overall.cycles == 60 * 300


def test_recovers_depth_dependent_spine_and_rank_dependent_transition():
    truth = [0.3, 0.5, 0.7, 0.8]
    fit = _fit(SyntheticSpec(truth, [0.1, 0.04], (DEEP, TREE), prompts=80, cycles=250), seed=2)
    curve = fit.overall.spine_by_depth
    for depth, p in enumerate(truth, start=1):
        row = curve.loc[depth]
        assert row["lo"] - 0.02 < p < row["hi"] + 0.02 and abs(row["estimate"] - p) < 0.04
    ranks = fit.overall.transition_by_rank
    assert abs(ranks.loc[0, "estimate"] - 0.1) < 0.015 and abs(ranks.loc[1, "estimate"] - 0.04) < 0.015


def test_cluster_bootstrap_covers_truth_where_naive_interval_does_not():
    """200 small clustered data sets (per-prompt random effect): the bootstrap 95% interval
    covers the population value in [0.90, 0.99] of draws; the naive Wilson interval, which
    ignores the clustering, covers far less."""
    spec = dict(p_s=0.5, p_t=0.15, topologies=(TREE,), prompt_sd=1.0)
    big = _fit(SyntheticSpec(**spec, prompts=20000, cycles=20), seed=999, n_boot=1)
    truth_s, truth_t = big.overall.p_s.estimate, big.overall.p_t.estimate
    hits = np.zeros(3)
    for r in range(200):
        f = _fit(SyntheticSpec(**spec, prompts=25, cycles=20), seed=r, n_boot=300)
        hits += [f.overall.p_s.ci95[0] <= truth_s <= f.overall.p_s.ci95[1],
                 f.overall.p_t.ci95[0] <= truth_t <= f.overall.p_t.ci95[1],
                 f.overall.p_s.naive_ci95[0] <= truth_s <= f.overall.p_s.naive_ci95[1]]
    coverage = hits / 200
    assert 0.90 <= coverage[0] <= 0.99 and 0.90 <= coverage[1] <= 0.99, coverage
    assert coverage[2] < 0.85, coverage


def test_ratio_and_tau_intervals():
    fit = _fit(SyntheticSpec(0.6, 0.1, (TREE,), prompts=40, cycles=100), seed=3)
    o = fit.overall
    assert math.isclose(o.ratio.estimate, o.p_s.estimate / o.p_t.estimate)
    assert o.ratio.ci95[0] < 6.0 < o.ratio.ci95[1]
    assert o.observed_tau.ci95[0] < o.observed_tau.estimate < o.observed_tau.ci95[1]


def test_ratio_interval_counts_draws_without_a_matched_transition_as_unbounded():
    # one matched transition in six prompts: about a third of the draws resample that prompt away,
    # p_t = 0 under p_s > 0 there, and the ratio has no upper limit (they were dropped: [47.9, 160])
    import pyarrow as pa
    from goose_theory.topology import Topology

    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    t = synthetic_table(SyntheticSpec(0.6, 0.0, (tree,), prompts=6, cycles=40), seed=1)
    node = t["node"].to_numpy()
    match, acc = (t[c].to_numpy(zero_copy_only=False).copy() for c in ("match", "accepted"))
    r = next(r for r in np.flatnonzero(node == 0) if not match[r + 1])  # a cycle whose spine missed
    match[r + 3] = acc[r + 3] = True  # its root transition matched (and the walk took it)
    for name, values in (("match", match), ("accepted", acc)):
        t = t.set_column(t.schema.get_field_index(name), name, pa.array(values))
    t = t.set_column(t.schema.get_field_index("tau"), "tau", pa.nulls(len(t), pa.int16()))
    o = fit_counts(count_tables([t]), n_boot=2000, seed=0).overall
    assert o.p_t.matched == 1 and o.ratio.estimate > 100
    assert math.isinf(o.ratio.ci95[1]) and 0 < o.ratio.ci95[0] < o.ratio.estimate
    few = fit_counts(count_tables([synthetic_table(SyntheticSpec(0.6, 0.05, (tree,), prompts=6, cycles=40),
                                                   seed=1)]), n_boot=500, seed=0).overall
    assert all(map(math.isfinite, few.ratio.ci95))  # no draw without a matched transition: finite as before


def test_observed_tau_interval_is_as_wide_as_the_prompts_spread():
    # the tau interval is a cluster bootstrap over prompts: as wide as an independent delta-method one over prompts
    table = synthetic_table(SyntheticSpec(0.6, 0.1, (TREE,), prompts=40, cycles=100, prompt_sd=0.5), seed=3)
    o = fit_counts(count_tables([table]), n_boot=300, seed=3).overall
    roots = table.to_pandas().query("node == 0").groupby("prompt_id", observed=True)["tau"].agg(["sum", "size"])
    estimate, lo, hi = ratio_ci(roots["sum"], roots["size"])
    assert o.observed_tau.estimate == pytest.approx(estimate)
    assert o.observed_tau.ci95[1] - o.observed_tau.ci95[0] == pytest.approx(hi - lo, rel=0.3)


def test_groups_split_and_overall_pools_them():
    specs = [SyntheticSpec(0.7, 0.1, (TREE,), prompts=20, cycles=50, method="a"),
             SyntheticSpec(0.3, 0.1, (TREE,), prompts=20, cycles=50, method="b", run_id="r2")]
    fit = fit_counts(count_tables([synthetic_table(specs, seed=4)], group_by=["method"]), n_boot=200)
    by = {g.label: g for g in fit.groups}
    assert set(by) == {"a", "b"} and by["a"].p_s.estimate > 0.6 > 0.4 > by["b"].p_s.estimate
    # the two methods' synthetic prompts are different prompts (their own random effects and ids)
    assert fit.overall.p_s.n == by["a"].p_s.n + by["b"].p_s.n and fit.overall.prompts == 40
    assert by["a"].prompts == by["b"].prompts == 20


def test_a_group_that_is_everything_has_the_pooled_intervals():
    # --group-by model on one model's traces printed p_t [0.2709, 0.3202] pooled and [0.2722, 0.3183]
    # for the model: the same data, another bootstrap stream (walkthrough, 5 Dec)
    counts = count_tables([synthetic_table(SyntheticSpec(0.6, 0.15, (TREE,), prompts=12, cycles=30), seed=2)],
                          group_by=["method"])
    fit = fit_counts(counts, n_boot=200, seed=3)
    (group,) = fit.groups
    assert group.label != "all" and group.key
    for name in ("p_s", "p_t"):
        assert getattr(group, name).ci95 == getattr(fit.overall, name).ci95
    assert group.ratio == fit.overall.ratio and group.observed_tau == fit.overall.observed_tau


def test_the_same_prompts_in_another_run_are_not_new_evidence():
    # the same traces again under another run_id: as many nodes again, but no new prompts, so the
    # cluster-bootstrap interval must not narrow (the naive Wilson interval, which counts nodes, does)
    one = SyntheticSpec(0.6, 0.15, (TREE,), prompts=12, cycles=40, prompt_group="shared")
    twice = [one, dataclasses.replace(one, run_id="run-again")]
    base = fit_counts(count_tables([synthetic_table(one, seed=6)]), n_boot=300, seed=1).overall
    both = fit_counts(count_tables([synthetic_table(one, seed=6), synthetic_table(twice[1], seed=6)]),
                      n_boot=300, seed=1).overall
    assert both.prompts == base.prompts == 12 and both.p_s.n == 2 * base.p_s.n
    for a, b in ((base.p_s, both.p_s), (base.p_t, both.p_t)):
        assert b.estimate == pytest.approx(a.estimate, abs=1e-12)
        assert b.ci95 == pytest.approx(a.ci95, abs=1e-12)
        assert b.naive_ci95[1] - b.naive_ci95[0] < a.naive_ci95[1] - a.naive_ci95[0]


def test_seeded_bootstrap_is_reproducible():
    counts = count_tables([synthetic_table(SyntheticSpec(0.5, 0.1, (TREE,), prompts=10, cycles=20), seed=5)])
    a, b = fit_counts(counts, n_boot=200, seed=9), fit_counts(counts, n_boot=200, seed=9)
    c = fit_counts(counts, n_boot=200, seed=10)
    assert a.overall.p_s.ci95 == b.overall.p_s.ci95 != c.overall.p_s.ci95


def test_recovers_p_t_by_parent_source():
    """Traces drawn with a different p_t under root, spine and transition parents: each per-parent
    estimate (pooled over rank, and its rank-0 point) has the truth inside its 95% interval, and
    the parent counts add up to the pooled rank counts."""
    spec = SyntheticSpec([0.6, 0.7], 0.15, (TREE,), prompts=60, cycles=200, p_t_spine=0.05, p_t_chain=0.5)
    fit = _fit(spec, seed=21)
    assert [p.source for p in fit.overall.p_t_by_parent] == ["root", "spine", "transition"]
    for source, truth in (("root", 0.15), ("spine", 0.05), ("transition", 0.5)):
        p = fit.overall.parent(source)
        assert p.p_t.ci95[0] <= truth <= p.p_t.ci95[1], (source, p.p_t)
        assert p.by_rank.loc[0, "lo"] <= truth <= p.by_rank.loc[0, "hi"]
    counts = fit.counts
    assert np.array_equal(counts.parent_rank_reached.sum(1), counts.rank_reached)
    assert np.array_equal(counts.parent_rank_matched.sum(1), counts.rank_matched)
    assert sum(p.p_t.n for p in fit.overall.p_t_by_parent) == fit.overall.p_t.n
    d = fit.overall.to_dict()["p_t_by_parent"]
    assert set(d) == {"root", "spine", "transition"} and {"estimate", "ci95", "n", "by_rank"} <= set(d["spine"])


def test_the_naive_tau_interval_stays_at_or_above_one():
    from goose_theory.fit import _naive_mean_ci
    # taus 1, 1, 1, 4: mean 1.75 - 1.96 * 0.65 is below 1, which no cycle can be (a one-prompt trace
    # printed [-0.294, 5.628] in a walkthrough)
    lo, hi = _naive_mean_ci(1.75, 19.0, 4)
    assert lo == 1.0 and hi == pytest.approx(1.75 + 1.959963984540054 * math.sqrt((19 / 4 - 1.75 ** 2) / 4))
