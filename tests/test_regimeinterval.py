"""The regime file's predicted-tau interval: each exported file priced exactly as its prediction was
made, prompts resampled as whole clusters (a draw of every prompt once is the fit itself), seeded
and paired draws, and no interval where there is nothing to resample."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from goose_theory.regimeexport import export_topologies, regime_topologies
from goose_theory.regimefit import fit_regimes
from goose_theory.regimeinput import read_frames
from goose_theory.topology import Topology
from goose_theory.regime import file_prediction
from goose_theory.regimeinterval import (draw_counts, draw_taus, prompt_keys, regime_intervals,
                                         resample_frames, strata, with_intervals)

PRIOR = ["traces/prior/humaneval-b8.parquet", "traces/prior/mtbench-b8.parquet", "traces/prior/stdlib-b8.parquet"]


@pytest.fixture(scope="module")
def stdlib():
    """(frames, single, pair, plain fit, methods) of traces/prior's stdlib at budget 15, as goose loop exports it."""
    frames = read_frames(PRIOR, benchmark="stdlib")
    single, pair, fit, methods = regime_topologies(PRIOR, benchmark="stdlib", budget=15, provenance={})
    return frames, single, pair, fit, methods


@pytest.mark.parametrize("bench, budget", [("humaneval", 7), ("mtbench", 7), ("stdlib", 15), ("stdlib", 3)])
def test_each_exported_file_is_priced_as_its_prediction_was_made(bench, budget):
    frames = read_frames(PRIOR, benchmark=bench)
    single, pair, fit, methods = regime_topologies(PRIOR, benchmark=bench, budget=budget, provenance={})
    split = fit_regimes(frames, methods=methods, split=True)
    assert file_prediction(single, fit).tau == single.meta["predicted_tau"]
    assert file_prediction(pair, split).tau == pair.meta["predicted_tau"]
    assert file_prediction(pair, split).to_dict() == pair.meta["regime_prediction"]  # every part, not just the mix
    assert pair.meta.get("regimes", {}).get("unmatched")  # a regime file, priced with its other trees


def test_a_prompt_drawn_k_times_is_k_whole_clusters_in_the_original_order():
    f = pd.DataFrame({"benchmark": "b", "prompt_id": ["x", "x", "x", "y", "y", "z"], "cycle": [0, 0, 1, 0, 0, 0],
                      "node": [0, 1, 0, 0, 1, 0], "parent": [-1, 0, -1, -1, 0, -1]})
    counts = pd.Series([3, 0, 1], index=pd.MultiIndex.from_tuples([("b", "x"), ("b", "y"), ("b", "z")]))
    [(out, meta)] = resample_frames([(f, {"m": 1})], counts)
    assert meta == {"m": 1}
    assert out["prompt_id"].tolist() == ["x", "x", "x", "z", "x#1", "x#1", "x#1", "x#2", "x#2", "x#2"]
    assert out["node"].tolist() == [0, 1, 0, 0, 0, 1, 0, 0, 1, 0]  # each cycle's rows together, its root first
    # a frame none of whose prompts is drawn is left out, as read_frames leaves out an empty one
    assert resample_frames([(f, {})], pd.Series(0, index=counts.index)) == []


def test_drawing_every_prompt_once_is_the_sample_and_twice_changes_no_share(stdlib):
    frames, _, _, fit, methods = stdlib
    keys = prompt_keys(frames)
    assert len(keys) == 16 and keys.is_monotonic_increasing
    once = resample_frames(frames, pd.Series(1, index=keys))
    for (a, _), (b, _) in zip(once, frames):
        pd.testing.assert_frame_equal(a, b)
    # ratios of counts do not move when every cluster is doubled; a block out of order would move them
    twice = fit_regimes(resample_frames(frames, pd.Series(2, index=keys)), methods=methods)
    assert twice.psi == pytest.approx(fit.psi, rel=1e-12) and twice.fill == pytest.approx(fit.fill, rel=1e-12)
    assert twice.unmatched.p_t == pytest.approx(fit.unmatched.p_t, rel=1e-12)
    assert twice.prompts == 2 * fit.prompts and twice.cycles == 2 * fit.cycles


def test_draws_are_seeded_paired_and_their_percentiles_are_the_interval(stdlib):
    frames, single, pair, _, methods = stdlib
    taus = draw_taus(frames, methods, [single, pair], draws=6, seed=3)
    assert taus.shape == (6, 2) and np.array_equal(taus, draw_taus(frames, methods, [single, pair], draws=6, seed=3))
    assert not np.array_equal(taus, draw_taus(frames, methods, [single, pair], draws=6, seed=4))
    # the same draws price both files: the pair alone under seed 3 gives the pair's column
    assert np.array_equal(taus[:, 1], draw_taus(frames, methods, [pair], draws=6, seed=3)[:, 0])
    assert len(np.unique(taus[:, 1])) == 6  # every draw refits: no two of six agree
    cis = regime_intervals(frames, methods, [single, pair], draws=6, seed=3)
    assert cis == [tuple(np.percentile(taus[:, i], [2.5, 97.5])) for i in range(2)]


def test_intervals_go_into_the_files_and_one_prompt_gives_none(stdlib):
    frames, single, pair, _, methods = stdlib
    one, two = with_intervals([single, pair], frames, methods, draws=4)
    assert one.meta["predicted_ci95"] == list(regime_intervals(frames, methods, [single], draws=4)[0])
    assert two.meta["predicted_tau"] == pair.meta["predicted_tau"] and len(two.meta["predicted_ci95"]) == 2
    first = prompt_keys(frames)[0][1]
    lone = [(f[f["prompt_id"] == first].reset_index(drop=True), m) for f, m in frames]
    assert regime_intervals(lone, methods, [pair], draws=4) == [None]
    assert regime_intervals(frames, methods, [pair], draws=0) == [None]
    # no interval now: a stale one is dropped, not carried over
    assert "predicted_ci95" not in with_intervals([two], lone, methods, draws=4)[0].meta


def test_a_file_whose_prediction_its_fit_does_not_give_is_refused(stdlib):
    frames, _, pair, fit, methods = stdlib
    # an export without spare slots is priced alike (spare_tau of a tree without spare slots is its E[tau])
    split = fit_regimes(frames, methods=methods, split=True)
    _, without_spare = export_topologies(fit, 15, provenance={}, split=split, spare=False)
    assert regime_intervals(frames, methods, [without_spare], draws=2)[0] is not None
    edited = pair.with_meta(predicted_tau=pair.meta["predicted_tau"] * 1.01)  # a hand edit, or another fit's file
    with pytest.raises(ValueError, match="not exported as this interval prices it"):
        regime_intervals(frames, methods, [edited], draws=2)


def test_prompts_with_the_fitted_methods_are_drawn_apart_from_the_others():
    # review: goose@16 (fitted at budgets >= 12) ran 6 of stdlib's 16 prompts in traces/; drawn with the
    # other 10, draw 68 of seed 0 held none of the six, and fit-acceptance --regimes --budget 16 crashed
    frames = read_frames(["traces/stdlib.parquet", "traces/stdlib-b8.parquet"], benchmark="stdlib")
    fitted, rest = strata(frames, ("goose@16",))
    [everyone] = strata(frames, ())  # no method named: the fit takes every one
    assert len(fitted) == 6 and len(rest) == 10 and everyone.equals(prompt_keys(frames)) and len(everyone) == 16
    rng = np.random.default_rng(0)
    for _ in range(200):
        counts = draw_counts([fitted, rest], rng)
        assert counts[fitted].sum() == 6 and counts[rest].sum() == 10
    one = [(f[(f["prompt_id"] == fitted[0][1]) | (f["method"] != "goose@16")], m) for f, m in frames]
    assert regime_intervals(one, ("goose@16",), [Topology.root_only()], draws=4) == [None]  # one: nothing to resample
