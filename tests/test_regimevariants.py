"""Matched-tree variants of a regime file: shorter spines with branches as the scale falls, the
other regime trees kept, each priced by the closed form exactly as a direct regime_tau call."""
from __future__ import annotations

import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.regime import regime_tau
from goose_theory.regimeexport import regime_topologies
from goose_theory.regimefile import confident_topology, matched_by_length, matched_topology, unmatched_topology
from goose_theory.regimevariants import length_variants, matched_trees, matched_variants
from goose_theory.replayinput import regime_fit_from_dict


def _spine(tree) -> int:
    return sum(1 for s in tree.source if s == 1)


def test_lower_scales_give_shorter_spines_and_distinct_shapes():
    m = Acceptance.parse([0.9, 0.85, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8], [0.3, 0.1, 0.05], p_t_spine=[0.3, 0.1])
    trees = matched_trees(m, budget=10, scales=(1.0, 1.0, 0.8, 0.6, 0.4, 0.2))
    scales = [f for f, _ in trees]
    assert scales[0] == 1.0 and len(set(scales)) == len(scales)  # the repeated 1.0 is one shape
    spines = [_spine(t) for _, t in trees]
    assert spines == sorted(spines, reverse=True) and spines[0] > spines[-1]
    assert all(t.budget == 10 for _, t in trees)


@pytest.fixture(scope="module")
def stdlib_pair():
    _, pair, _, _ = regime_topologies(["traces/stdlib-b8.parquet"], benchmark="stdlib", budget=12, provenance={})
    return pair


def test_variants_keep_the_other_trees_and_are_priced_by_the_closed_form(stdlib_pair):
    fit = regime_fit_from_dict(stdlib_pair.meta["regime_fit"])
    variants = matched_variants(stdlib_pair, fit, scales=(1.0, 0.8, 0.5))
    assert variants[0] == (1.0, stdlib_pair) and len(variants) >= 2
    conf = confident_topology(stdlib_pair)
    for f, v in variants[1:]:
        assert v.meta["spine_scale"] == f and matched_topology(v) is None  # no spare or by-length trees
        assert matched_by_length(v) is None
        assert unmatched_topology(v) == unmatched_topology(stdlib_pair) and confident_topology(v) == conf
        want = regime_tau(v, fit.matched, fit.unmatched, fit.psi, unmatched_topology(v), confident=fit.confident,
                          psi_confident=fit.psi_confident, confident_topology=conf[0] if conf else None,
                          fill=fit.fill, budget=v.budget, spines=fit.spines)
        assert v.meta["predicted_tau"] == pytest.approx(want.tau) and v.budget == stdlib_pair.budget
    # the closed form's own optimum (scale 1) prices highest: the variants trade it for what it cannot see
    assert all(v.meta["predicted_tau"] <= stdlib_pair.meta["predicted_tau"] + 1e-9 for _, v in variants)


def test_length_variants_replace_the_matched_trees_and_keep_the_other_prices(stdlib_pair):
    from goose_theory.regimefile import matched_by_length
    from goose_theory.regimelength import length_tau

    fit = regime_fit_from_dict(stdlib_pair.meta["regime_fit"])
    own = matched_by_length(stdlib_pair)  # the exported file already drafts by length, at scale 1
    assert own and matched_topology(stdlib_pair) is None
    assert stdlib_pair.meta["regime_prediction"]["tau_matched"] == pytest.approx(
        length_tau(own, fit.matched, fit.spines[0], fit.fill, budget=stdlib_pair.budget)[0])
    variants = length_variants(stdlib_pair, fit, scales=(1.0, 1.0, 0.5, 0.4))
    assert [f for f, _ in variants] == [0.5, 0.4]  # the file's own family is not repeated
    prior = stdlib_pair.meta["regime_prediction"]
    for f, v in variants:
        trees = matched_by_length(v)
        assert len(trees) == min(stdlib_pair.budget, stdlib_pair.max_spine) and matched_topology(v) is None
        assert v.meta["spine_scale"] == f and v.budget == stdlib_pair.budget and v.parent == stdlib_pair.parent
        assert unmatched_topology(v) == unmatched_topology(stdlib_pair)
        assert confident_topology(v) == confident_topology(stdlib_pair)
        pred = v.meta["regime_prediction"]
        assert pred["tau_unmatched"] == prior["tau_unmatched"] and pred.get("tau_confident") == prior.get("tau_confident")
        tm, _ = length_tau(trees, fit.matched, fit.spines[0], fit.fill, budget=v.budget)
        assert pred["tau_matched"] == pytest.approx(tm)
    assert length_variants(stdlib_pair.with_meta(regime_prediction=None), fit) == []


def test_a_by_length_file_offers_its_one_tree_at_scale_1_as_a_variant(stdlib_pair):
    from goose_theory.regimefile import matched_by_length

    fit = regime_fit_from_dict(stdlib_pair.meta["regime_fit"])
    variants = matched_variants(stdlib_pair, fit, scales=(1.0,))
    assert [f for f, _ in variants] == [1.0, 1.0] and variants[0][1] is stdlib_pair
    one = variants[1][1]
    assert matched_by_length(one) is None and matched_topology(one) is None
    # each length's tree is optimal for its length, so the file prices above its one tree
    assert one.meta["predicted_tau"] <= stdlib_pair.meta["predicted_tau"] + 1e-9


def test_an_exported_by_length_file_round_trips_and_drafts_by_length(stdlib_pair, tmp_path):
    from goose_runtime.matcher import Match
    from goose_runtime.methods import parse_method
    from goose_theory.regimefile import matched_by_length
    from goose_theory.topology import load_topology, save_topology

    save_topology(stdlib_pair, tmp_path / "pair.json")
    loaded = load_topology(tmp_path / "pair.json")
    assert [(t.parent, t.source, t.rank) for t in matched_by_length(loaded)] == \
        [(t.parent, t.source, t.rank) for t in matched_by_length(stdlib_pair)]
    spec = parse_method(f"topology:{tmp_path / 'pair.json'}")
    two = Match((4, 5), 3, 1, 1)  # a non-confident 2-token match drafts the file's tree for L = 2
    assert spec.tree_for(two).parent == matched_by_length(stdlib_pair)[1].parent


def test_a_variant_does_not_carry_the_files_interval(stdlib_pair):
    # its prediction is its own; the file's bootstrap interval (goose_theory.regimeinterval) is not its
    fit = regime_fit_from_dict(stdlib_pair.meta["regime_fit"])
    pair = stdlib_pair.with_meta(predicted_ci95=[3.0, 4.0])
    variants = matched_variants(pair, fit, scales=(1.0, 0.5)) + length_variants(pair, fit, scales=(0.8,))
    assert variants[0][1].meta["predicted_ci95"] == [3.0, 4.0] and len(variants) >= 3
    assert all("predicted_ci95" not in v.meta for _, v in variants[1:])
