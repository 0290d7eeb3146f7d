"""validate's pure helpers: rows from decode results, the measured two-regime split, and the
goose prediction from a two-regime fit."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.regime import regime_tau
from goose_theory.optimize import build_topology
from goose_theory.topology import Topology
from goose_theory.validation import prompt_spread, split_noise
from goose_runtime.records import CycleRecord, PromptResult
from goose_runtime.validate import _goose_prediction, fitted_prompt_count, regime_split, summarize_rows


def _cycle(tau: int, avail: int) -> CycleRecord:
    return CycleRecord(parent=[-1, 0], source=["root", "transition"], rank=[0, 0], token=[5, 6], match=[True, False],
                       accepted=[True, False], score=[math.nan, 1.0], spine_pos=[0, 0], tau=tau, verify_s=0.01,
                       draft_s=0.001, spine_avail=avail)


def _run(prompt: str, cycles: list[CycleRecord]) -> PromptResult:
    return PromptResult("m", prompt, "b", 3, [1] * sum(c.tau for c in cycles), "", cycles)


def test_regime_split_counts_tokens_and_cycles_by_regime():
    runs = [_run("a", [_cycle(5, 20), _cycle(1, 0), _cycle(2, 0)]), _run("b", [_cycle(3, 7), _cycle(1, 0)])]
    psi, tm, tu = regime_split(runs)
    assert psi == pytest.approx(8 / 12) and tm == pytest.approx(4.0) and tu == pytest.approx(4 / 3)
    assert all(math.isnan(x) for x in regime_split([_run("c", [_cycle(1, -1)])]))


def test_summarize_rows_reports_error_and_regimes():
    runs = [_run("a", [_cycle(3, 20), _cycle(1, 0)]), _run("b", [_cycle(2, 0), _cycle(2, 0)])]
    summary = SimpleNamespace(tokens_per_s=10.0, speedup_vs_ar=1.5, matches_ar=True)
    acc = Acceptance.parse(0.5, 0.2)
    row, = summarize_rows("b", {"topology:x": runs}, {"topology:x": summary}, {"topology:x": (1, 2.4, acc)})
    assert row.measured_tau == pytest.approx(2.0) and row.error_pct == pytest.approx(20.0)
    assert row.psi == pytest.approx(3 / 8) and row.tau_matched == 3 and row.tau_unmatched == pytest.approx(5 / 3)
    assert row.cycles == 4 and row.prompts == 2 and row.lossless
    assert math.isnan(row.noise_pct)  # the number of fitted prompts was not given
    assert row.realised_tau == pytest.approx(1.2)  # every cycle built the root and one rank-0 transition: 1 + p_t
    assert math.isnan(row.predicted_low) and math.isnan(row.predicted_high)  # the file gave no interval
    row, = summarize_rows("b", {"topology:x": runs}, {"topology:x": summary}, {"topology:x": (1, 2.4, acc)},
                          intervals={"topology:x": (2.1, 2.9)})
    assert (row.predicted_low, row.predicted_high) == (2.1, 2.9) and row.predicted_tau == 2.4


def test_accepted_tau_counts_what_verification_accepted_not_what_the_token_cap_emitted():
    def cycle(accepted: int, emitted: int) -> CycleRecord:  # a chain of 4 drafts, the first `accepted` on the path
        n = 5
        return CycleRecord(parent=[-1, 0, 1, 2, 3], source=["root"] + ["spine"] * 4, rank=[0] * n, token=[1] * n,
                           match=[True] * n, accepted=[True] + [i < accepted for i in range(4)],
                           score=[math.nan] * n, spine_pos=[0, 1, 2, 3, 4], tau=emitted, verify_s=0.01,
                           draft_s=0.001, spine_avail=4)
    # the last cycle accepted 4 drafts + the bonus but the cap let only 2 tokens out
    runs = [_run("a", [cycle(2, 3), cycle(4, 2)])]
    summary = SimpleNamespace(tokens_per_s=10.0, speedup_vs_ar=1.5, matches_ar=True)
    row, = summarize_rows("b", {"goose": runs}, {"goose": summary}, {"goose": (4, 4.0, None)})
    assert row.measured_tau == pytest.approx(2.5) and row.accepted_tau == pytest.approx(4.0)
    assert row.error_pct == pytest.approx(60.0) and row.accepted_error_pct == pytest.approx(0.0)


def test_summarize_rows_noise_is_the_split_noise_of_this_runs_prompts():
    runs = [_run("a", [_cycle(3, 20), _cycle(1, 0)]), _run("b", [_cycle(2, 0), _cycle(2, 0)]),
            _run("c", [_cycle(1, 0), _cycle(1, 0), _cycle(2, 0)])]
    summary = SimpleNamespace(tokens_per_s=10.0, speedup_vs_ar=1.5, matches_ar=True)
    row, = summarize_rows("b", {"goose": runs}, {"goose": summary}, {}, fitted_prompts={"goose": 16})
    expected = split_noise(prompt_spread([4, 4, 4], [2, 2, 3]), 16, 3, df=2)  # spread from these 3 prompts
    assert expected > 0 and row.noise_pct == pytest.approx(100 * expected)


def test_goose_prediction_uses_the_regime_fit():
    m, u = Acceptance.parse(0.8, [0.1, 0.0]), Acceptance.parse(0.0, [0.3, 0.05, 0.0])
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]).with_meta(
        regime_fit={"matched": m.to_dict(), "unmatched": u.to_dict(), "psi": 0.4})
    expected = regime_tau(build_topology("paper", m, budget=6).topology, m, u, 0.4,
                          build_topology("optimal", u, budget=6).topology).tau
    assert _goose_prediction(topo, m, 6) == pytest.approx(expected)
    plain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    assert _goose_prediction(plain, m, 6) == pytest.approx(build_topology("paper", m, budget=6).predicted_tau)


def test_summarize_rows_compares_a_topology_with_goose_on_the_same_prompts():
    topo = [_run("a", [_cycle(3, 20), _cycle(3, 0)]), _run("b", [_cycle(2, 0), _cycle(2, 0)])]
    goose = [_run("b", [_cycle(2, 0), _cycle(1, 0)]), _run("a", [_cycle(3, 20), _cycle(3, 0)]),
             _run("z", [_cycle(9, 20)])]  # another order, and a prompt the topology did not run
    summary = SimpleNamespace(tokens_per_s=10.0, speedup_vs_ar=1.5, matches_ar=True)
    rows = summarize_rows("b", {"topology:x": topo, "goose@4": goose}, {"topology:x": summary, "goose@4": summary},
                          {}, baselines={"topology:x": "goose@4"})
    by = {r.method: r for r in rows}
    assert by["topology:x"].vs_goose_pct == pytest.approx(100 * (10 / 4) / (9 / 4) - 100)  # prompts a, b only
    assert by["topology:x"].vs_goose_low <= by["topology:x"].vs_goose_pct <= by["topology:x"].vs_goose_high
    assert math.isnan(by["goose@4"].vs_goose_pct)  # goose has no baseline


def test_fitted_prompt_count_prefers_the_regime_fits_own_prompts():
    base = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    own = {"prompts": 16, "group_key": {"benchmark": "stdlib"}}
    assert fitted_prompt_count(base, "stdlib") == 0
    assert fitted_prompt_count(base.with_meta(provenance=own), "stdlib") == 16
    assert fitted_prompt_count(base.with_meta(provenance=own), "mtbench") == 0  # fitted on another set
    assert fitted_prompt_count(base.with_meta(provenance={"prompts": 48, "group_key": {}}), "stdlib") == 0  # pooled
    assert fitted_prompt_count(base.with_meta(provenance=own, regime_fit={"prompts": 6, "psi": 0.3}), "stdlib") == 6


def test_validate_benchmark_wires_baselines_and_noise(monkeypatch, tmp_path):
    """Two topologies at budget 4 share goose@4 as their baseline, one at 60 compares with goose;
    noise needs a holdout (without one the measured prompts may be the fitted ones)."""
    import goose_runtime.runner as runner
    import goose_runtime.validate as validate
    from goose_theory.topology import save_topology

    def topo(budget: int, name: str) -> str:
        nodes = [(-1, "root", 0)] + [(0, "transition", r) for r in range(budget)]
        path = str(tmp_path / f"{name}.json")
        save_topology(Topology.from_nodes(nodes, meta={"predicted_tau": 1.5, "provenance": {"prompts": 6, "group_key": {"benchmark": "stdlib"}}}), path)
        return path
    paths = [topo(4, "a"), topo(4, "b"), topo(60, "c")]
    taus = {"goose@4": [2, 1], "goose": [3, 3]}

    def fake_run_methods(bundle, specs, prompts, *, config, on_result=None):
        labels = [runner.method_label(s) for s in specs]
        return {label: [_run(p, [_cycle(t, 0) for t in taus.get(label, [2, 2])]) for p in ("p1", "p2", "p3")]
                for label in labels}
    monkeypatch.setattr(runner, "run_methods", fake_run_methods)
    for holdout in (True, False):
        rows, _ = validate.validate_benchmark(None, "stdlib", paths, ["p1", "p2", "p3"], config=None, holdout=holdout)
        by = {r.method.split(":")[-1].split("/")[-1]: r for r in rows}
        assert set(by) == {"ar", "goose@4", "goose", "a", "b", "c"}
        for name, baseline in (("a", 4 / 3), ("b", 4 / 3), ("c", 4 / 6)):
            assert by[name].vs_goose_pct == pytest.approx(100 * (baseline - 1))  # 2.0 / 1.5 and 2.0 / 3.0
        assert math.isnan(by["ar"].vs_goose_pct) and math.isnan(by["goose@4"].vs_goose_pct)
        assert math.isnan(by["a"].noise_pct) != holdout  # 6 fitted prompts; none without a holdout


def test_validate_benchmark_with_the_prior_drafts_goose_and_each_topology_with_it(monkeypatch, tmp_path):
    """``prior``: goose and the topology run as ``+prior`` methods, ar without, and the topology is
    compared with goose+prior at its budget (a file fitted on +prior traces against its own kind)."""
    import goose_runtime.runner as runner
    import goose_runtime.validate as validate
    from goose_theory.topology import save_topology

    path = str(tmp_path / "a.json")
    nodes = [(-1, "root", 0)] + [(0, "transition", r) for r in range(4)]
    save_topology(Topology.from_nodes(nodes, meta={"predicted_tau": 1.5, "acceptance": {"p_s": 0.6, "p_t": 0.2}}),
                  path)
    seen = []
    import goose_runtime.replayfit as replayfit
    monkeypatch.setattr(replayfit, "replay_prediction", lambda bundle, spec, *a, **k: SimpleNamespace(emitted_tau=1.7))

    def fake_run_methods(bundle, specs, prompts, *, config, on_result=None):
        seen.extend(specs)
        taus = {"goose+prior@4": [1, 1]}
        return {runner.method_label(s): [_run(p, [_cycle(t, 0) for t in taus.get(runner.method_label(s), [2, 2])])
                                         for p in ("p1", "p2")] for s in specs}
    monkeypatch.setattr(runner, "run_methods", fake_run_methods)
    rows, _ = validate.validate_benchmark(None, "stdlib", [path], ["p1", "p2"], config=None, prior=True)
    assert {s.name: s.prior for s in seen} == {"ar": False, "goose+prior": True, "topology:a+prior": True,
                                               "goose": False}  # the paper's goose@60 as published, too
    by = {r.method: r for r in rows}
    assert set(by) == {"ar", "goose+prior@4", "goose+prior", "goose", "topology:a+prior"}
    assert by["topology:a+prior"].vs_goose_pct == pytest.approx(100.0)  # 2.0 against goose+prior@4's 1.0 per cycle
    assert by["goose+prior"].budget == by["goose"].budget == 60
    # a +prior fit does not describe the paper's goose: neither predicted nor replayed; goose+prior is both
    assert math.isnan(by["goose"].predicted_tau) and math.isnan(by["goose"].replayed_tau)
    assert by["goose+prior"].predicted_tau > 1 and by["goose+prior"].replayed_tau == 1.7


@pytest.mark.parametrize("meta, message", [
    ({"predicted_tau": 10**400},
     "predicted_tau must be a number of tokens per cycle, at least 1, got an integer too large for a float"),
    ({"regime_fit": {"matched": {"p_t": 0.1}, "unmatched": {"p_s": 0.0, "p_t": 0.1}, "psi": 0.5}},
     "regime_fit.matched.p_s is missing"),
    ({"regime_fit": {"matched": {"p_s": 0.9, "p_t": 0.1}, "unmatched": {"p_s": 0.0, "p_t": 0.1}, "psi": 7}},
     "regime_fit.psi must be a share of tokens in [0, 1], got 7"),
], ids=["tau-huge", "regime-no-p_s", "regime-psi-7"])
def test_validate_benchmark_refuses_a_file_it_cannot_predict_with_before_decoding(monkeypatch, tmp_path, meta, message):
    """float(predicted_tau) and the regime fit's goose prediction raised OverflowError / KeyError
    mid-run, after the model loaded and --trace-dir was made; the file's load refuses them now."""
    import goose_runtime.runner as runner
    import goose_runtime.validate as validate
    from goose_theory.topology import TopologyError, save_topology

    path = str(tmp_path / "bad.json")
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "transition", 0)], meta=meta), path)
    monkeypatch.setattr(runner, "run_methods", lambda *a, **k: pytest.fail("decoded a file it cannot predict with"))
    with pytest.raises(TopologyError) as err:
        validate.validate_benchmark(None, "stdlib", [path], ["p1"], config=None)
    assert str(err.value) == f"{path}: meta: {message}"
