"""Replay inputs: texts rebuilt from trace files, and a regime fit's rates with the spine miss
divided out (checked against the fit that folded it in)."""
from __future__ import annotations

import pytest

from goose_runtime.records import CycleRecord, PromptResult
from goose_runtime.tracing import write_run_trace
from goose_theory.acceptance import Acceptance
from goose_theory.regimefit import fit_regimes
from goose_theory.regimeinput import read_frames
from goose_theory.regimespare import SpineModel
from goose_theory.replayinput import conditional_rates, spine_misses, trace_texts

NAN = float("nan")


def _cycle(tokens, accepted, tau, parent=None):
    n = len(tokens)
    parent = parent or [-1] + list(range(n - 1))
    return CycleRecord(parent=parent, source=["root"] + ["spine"] * (n - 1), rank=[0] * n, token=list(tokens),
                       match=list(accepted), accepted=list(accepted), score=[NAN] * n,
                       spine_pos=list(range(n)), tau=tau, verify_s=0.0, draft_s=0.0, ngram=3, consensus=1,
                       ema=NAN, bypass=False)


def _write(path, results, cap):
    write_run_trace(path, results, run_id="r", model="m", device="cpu", dtype="float32",
                    config={"decode": {"max_new_tokens": cap}})


def test_texts_are_accepted_paths_joined_by_bonus_tokens(tmp_path):
    # prompt ends in 9; cycle 0 accepts 20, 21 (bonus 30 = next root); cycle 1 accepts 31, cut by the cap
    long = PromptResult("pld", "p", "b", 3, [20, 21, 30, 31], "", cycles=[
        _cycle([9, 20, 21, 22], [True, True, True, False], 3), _cycle([30, 31, 32], [True, True, True], 1)])
    short = PromptResult("ar", "p", "b", 3, [20], "", cycles=[_cycle([9], [True], 1)])
    other = PromptResult("ar", "q", "c", 3, [5], "", cycles=[_cycle([8], [True], 1), _cycle([5], [True], 1)])
    _write(tmp_path / "t.parquet", [long, short, other], cap=4)
    texts = trace_texts([str(tmp_path / "t.parquet")])
    # the longest text wins, accepted tokens past the cap included (32 was verified too)
    assert texts[("b", "p")].tokens == (20, 21, 30, 31, 32) and not texts[("b", "p")].complete
    assert texts[("c", "q")].tokens == (5,) and texts[("c", "q")].complete  # 2 tokens < cap 4: it ended
    assert set(trace_texts([str(tmp_path / "t.parquet")], benchmark="c")) == {("c", "q")}


def test_an_ended_text_is_cut_at_its_emitted_tokens(tmp_path):
    # EOS (7) inside an accepted path: the run emitted 2 of the 3 accepted tokens
    eos = PromptResult("pld", "p", "b", 3, [20, 7], "", cycles=[_cycle([9, 20, 7, 40], [True] * 4, 2)])
    _write(tmp_path / "t.parquet", [eos], cap=16)
    text = trace_texts([str(tmp_path / "t.parquet")])[("b", "p")]
    assert text.tokens == (20, 7) and text.complete


def test_rates_divide_out_exactly_the_miss_the_fit_folded_in():
    fit = fit_regimes(read_frames(["traces/stdlib-b8.parquet"]), methods=("goose@8",), split=True)
    rates = conditional_rates(fit.to_dict())
    assert set(rates) == {"matched", "confident", "unmatched"}
    for name, acc, spine in (("matched", fit.matched, fit.spines[0]), ("confident", fit.confident, fit.spines[1])):
        root_miss, spine_miss = spine_misses(spine.effective())
        assert 0 < root_miss < 1 and 0 < spine_miss < 1
        assert [x * root_miss for x in rates[name].root] == pytest.approx(acc.transition_list(0))
        assert [x * spine_miss for x in rates[name].spine] == pytest.approx(acc.transition_list(1))
        assert rates[name].chain == pytest.approx(acc.transition_list(2))
        assert rates[name].end == spine.end and rates[name].p_s == spine.p_s
        assert all(0 <= x <= 1 for x in rates[name].root + rates[name].spine)
    assert rates["unmatched"].root == pytest.approx(fit.unmatched.transition_list(0))


def test_a_fit_without_spine_models_is_refused():
    acc = Acceptance.parse(0.5, 0.2).to_dict()
    with pytest.raises(ValueError, match="no spine model"):
        conditional_rates({"matched": acc, "unmatched": acc, "spines": [None, None]})


def test_spine_misses_use_depths_two_to_six():
    eff = SpineModel((0.8, 0.5), (1.0,) * 8, ()).effective()
    assert spine_misses(eff) == pytest.approx((0.2, 0.5))


def test_a_stored_regime_fit_round_trips_and_reprices_its_file():
    from goose_theory.regime import regime_tau
    from goose_theory.regimeexport import regime_topologies
    from goose_theory.regimefile import confident_topology, matched_by_length, matched_topology, unmatched_topology
    from goose_theory.replayinput import regime_fit_from_dict
    _, pair, _, _ = regime_topologies(["traces/stdlib-b8.parquet"], benchmark="stdlib", budget=12, provenance={})
    fit = regime_fit_from_dict(pair.meta["regime_fit"])
    assert fit.to_dict() == pair.meta["regime_fit"]
    conf = confident_topology(pair)
    pred = regime_tau(matched_topology(pair) or pair, fit.matched, fit.unmatched, fit.psi, unmatched_topology(pair),
                      confident=fit.confident, psi_confident=fit.psi_confident,
                      confident_topology=conf[0] if conf else None, fill=fit.fill, budget=pair.budget, spines=fit.spines,
                      by_length=matched_by_length(pair) or ())
    assert pred.tau == pytest.approx(pair.meta["predicted_tau"])
