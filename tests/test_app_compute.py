"""The explorer's cached computations (app/compute.py) agree with the library and fail with one
readable line: what-if numbers, curves, the gain grid, tree uploads and downloads, notes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app import compute
from apptest import BY_PARENT, REGIME_EXPORT
from goose_theory.acceptance import Acceptance
from goose_theory.bound import paper_lower_bound
from goose_theory.choices import ChoicesError, choices_from_topology, topology_from_choices
from goose_theory.optimize import OptimizeError, build_topology
from goose_theory.simulate import simulate
from goose_theory.topology import Topology, TopologyError, topology_from_dict
from goose_theory.yields import ExclusiveModelError, exact_yield


CROWDED = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])


@pytest.mark.parametrize("model", ["exclusive", "independent"])
@pytest.mark.parametrize("rule", ["optimal", "harmonic", "paper", "isotropic:3"])
def test_whatif_numbers_are_the_librarys(model, rule):
    acc = Acceptance.parse(0.55, 0.06, model)
    r = compute.whatif(0.55, 0.06, model, rule, budget=30, cycles=50_000, seed=7)
    topo = build_topology(rule, acc, budget=30).topology
    assert topology_from_dict(r["topology"]) == topo
    assert r["exact"] == exact_yield(topo, acc).expected_tau
    assert r["lower_bound"] == paper_lower_bound(topo, acc).lower_bound
    sim = simulate(topo, acc, cycles=50_000, seed=7)
    assert r["mc_mean"] == sim.mean and r["mc_ci95"] == tuple(sim.ci95)
    pmf = r["pmf"]
    exact = pmf[pmf["kind"] == "exact"]["probability"].to_numpy()
    assert exact.sum() == pytest.approx(1.0)
    assert np.allclose(exact, exact_yield(topo, acc).pmf[1:len(exact) + 1])
    simulated = pmf[pmf["kind"] == "simulated"]["probability"].to_numpy()
    assert simulated.sum() == pytest.approx(1.0)
    assert np.abs(simulated - exact).max() < 0.02  # 50k cycles: a few per mille of noise


def test_whatif_uploaded_topology_and_exclusive_violation():
    text = json.dumps(CROWDED.to_dict())
    r = compute.whatif(0.5, 0.2, "exclusive", "optimal", budget=60, cycles=1000, topology_json=text)
    assert r["exact"] == pytest.approx(1 + 0.5 + 0.2 + 0.2)
    with pytest.raises(ExclusiveModelError, match="summing to 1.4"):
        compute.whatif(0.6, 0.4, "exclusive", "optimal", budget=60, cycles=1000, topology_json=text)
    # the independent model has no such condition
    r = compute.whatif(0.6, 0.4, "independent", "optimal", budget=60, cycles=1000, topology_json=text)
    assert r["exact"] == pytest.approx(1 + 0.6 + 0.4 * 0.4 + 0.4 * 0.4 * 0.6)


def test_whatif_bad_rule_is_a_one_line_error():
    with pytest.raises(OptimizeError, match="K=5 must be between 1 and top_k=3"):
        compute.whatif(0.5, 0.05, "exclusive", "isotropic:5", budget=20, top_k=3)


def test_spine_curves_match_the_optimizer():
    acc = Acceptance.parse(0.6, 0.05)
    df = compute.spine_curves(0.6, 0.05, "exclusive", budget=40, max_spine=12)
    for rule in ("linear", "harmonic"):
        curve = build_topology(rule, acc, budget=40, max_spine=12).details["curve"]
        got = df[df["rule"] == rule][["m", "expected_tau"]].to_numpy()
        assert np.allclose(got, np.asarray(curve, dtype=float))
    opt = df[df["rule"] == "optimal (spine <= m)"].sort_values("m")["expected_tau"].to_numpy()
    assert len(opt) == 13 and (np.diff(opt) >= -1e-12).all()  # a longer allowed spine never hurts
    best = build_topology("optimal", acc, budget=40, max_spine=12).predicted_tau
    assert opt[-1] == pytest.approx(best)
    assert opt[-1] >= df[df["rule"] != "optimal (spine <= m)"]["expected_tau"].max() - 1e-12


def test_width_profiles_are_first_level_widths():
    acc = Acceptance.parse(0.5, 0.05, "independent")
    df = compute.width_profiles(0.5, 0.05, "independent", budget=30)
    for rule in compute.ALLOCATIONS:
        widths = build_topology(rule, acc, budget=30).topology.first_level_widths
        assert df[df["rule"] == rule]["width"].tolist() == widths.tolist()


def test_gain_grid():
    df = compute.gain_grid("exclusive", budget=20, p_s_values=(0.2, 0.6), p_t_values=(0.03, 0.06))
    assert len(df) == 4
    row = df[(df["p_s"] == 0.6) & (df["p_t"] == 0.03)].iloc[0]
    acc = Acceptance.parse(0.6, 0.03)
    iso = max(build_topology(f"isotropic:{k}", acc, budget=20).predicted_tau for k in range(1, 11))
    opt = build_topology("optimal", acc, budget=20).predicted_tau
    assert row["gain"] == pytest.approx(opt / iso - 1)
    assert (df["gain"] > 0).all()  # anisotropic dominance: p_s > p_t everywhere here


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_gain_grid_equals_every_cell_searched(model):
    """The grid searches isotropic:K once per p_t (a tree without a spine does not see p_s): the
    page's default grid equals a search of every K in every cell, to the last bit."""
    df = compute.gain_grid(model, budget=60)
    for row in df.itertuples():
        acc = Acceptance.parse(row.p_s, row.p_t, model)
        iso = [build_topology(f"isotropic:{k}", acc, budget=60).predicted_tau for k in range(1, 11)]
        assert (row.best_isotropic, row.best_k) == (max(iso), iso.index(max(iso)) + 1)
        assert row.optimal == build_topology("optimal", acc, budget=60).predicted_tau


def test_topology_download_round_trip():
    topo = build_topology("paper", Acceptance.parse(0.5, 0.05), budget=60).topology
    text = compute.topology_download(topo.to_dict())
    assert topology_from_dict(json.loads(text)) == topo
    assert json.loads(text)["schema"] == "goose-topology/1"


def test_uploaded_choices_list_is_a_topology():
    topo = compute.parse_topology_json(b"[[0], [1], [0, 0]]")
    assert topology_from_dict(topo).parent == (-1, 0, 0, 1) and topo["rule"] == "tree-choices"
    with pytest.raises(ChoicesError, match=r"path \[0, 1\] has no parent"):
        compute.parse_topology_json(b"[[0, 1]]")
    assert compute.parse_topology_json(b"\xef\xbb\xbf[[0], [1], [0, 0]]") == topo  # a BOM (Windows editors) is dropped


def test_choices_download_only_without_a_spine():
    acc = Acceptance.parse(0.5, 0.05)
    plain = build_topology("transition-only", acc, budget=12).topology
    text, notes = compute.choices_download(plain.to_dict())
    assert choices_from_topology(topology_from_choices(json.loads(text))) == choices_from_topology(plain)
    assert len(json.loads(text)) == 12
    assert [n.split(" (")[0] for n in notes] == ["levels not uniform"]  # vLLM's one branching count per level
    text, notes = compute.choices_download(build_topology("paper", acc, budget=12).topology.to_dict())
    assert text is None and "spine node" in notes[0]


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b"{not json", "not a JSON file"),
    (b"[" * 50_000, "not a JSON file \\(nested too deeply"),
    (b'{"schema": "goose-topology/9", "nodes": []}', "unknown schema"),
])
def test_parse_topology_json_errors(data, message):
    with pytest.raises(TopologyError, match=message):
        compute.parse_topology_json(data)


@pytest.mark.parametrize("model", ["exclusive", "independent"])
def test_whatif_by_parent_numbers_are_the_librarys(model):
    acc = Acceptance.parse(0.55, 0.06, model, **BY_PARENT)
    r = compute.whatif(0.55, 0.06, model, "optimal", budget=30, cycles=50_000, seed=7, **BY_PARENT)
    res = build_topology("optimal", acc, budget=30)
    assert topology_from_dict(r["topology"]) == res.topology
    assert r["exact"] == exact_yield(res.topology, acc).expected_tau
    assert r["lower_bound"] == paper_lower_bound(res.topology, acc).lower_bound
    sim = simulate(res.topology, acc, cycles=50_000, seed=7)
    assert r["mc_mean"] == sim.mean
    assert r["notes"] == list(res.details.get("truncated", []))
    scalar = compute.whatif(0.55, 0.06, model, "optimal", budget=30, cycles=1000)
    assert r["exact"] != pytest.approx(scalar["exact"])  # the parent values reach the answer


def test_whatif_by_parent_defaults_are_the_scalar_results():
    scalar = compute.whatif(0.6, 0.05, "exclusive", "harmonic", budget=40, cycles=20_000, seed=1)
    off = compute.whatif(0.6, 0.05, "exclusive", "harmonic", budget=40, cycles=20_000, seed=1,
                         p_t_spine=None, p_t_chain=None)
    same = compute.whatif(0.6, 0.05, "exclusive", "harmonic", budget=40, cycles=20_000, seed=1,
                          p_t_spine=0.05, p_t_chain=0.05)
    assert off["topology"] == scalar["topology"] and off["exact"] == scalar["exact"]
    assert same["topology"]["acceptance"] == {**scalar["topology"]["acceptance"], "p_t_spine": 0.05, "p_t_chain": 0.05}
    for r in (off, same):
        assert r["topology"]["nodes"] == scalar["topology"]["nodes"]
        assert r["exact"] == pytest.approx(scalar["exact"], rel=1e-12)
        assert r["mc_mean"] == scalar["mc_mean"]


def test_whatif_by_parent_exclusive_violation_is_a_one_line_error():
    # root -> spine -> spine, plus two transition children of the first spine node
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (1, "transition", 0),
                                (1, "transition", 1)])
    text = json.dumps(tree.to_dict())
    ok = compute.whatif(0.5, 0.3, "exclusive", "optimal", budget=60, cycles=1000, topology_json=text,
                        p_t_spine=0.2, p_t_chain=0.3)
    assert ok["exact"] == pytest.approx(1 + 0.5 * (1 + 0.5 + 0.2 + 0.2))
    with pytest.raises(ExclusiveModelError, match="summing to 1.1"):
        compute.whatif(0.5, 0.05, "exclusive", "optimal", budget=60, cycles=1000, topology_json=text,
                       p_t_spine=0.3, p_t_chain=0.05)


def test_uploaded_note_states_the_files_own_prediction():
    """A regime file exported by the loop: the note gives its harmonic-mix prediction (not the
    single tree's what-if figure); a bare tree gets no note."""
    path = Path(__file__).resolve().parent.parent / REGIME_EXPORT
    regimes = compute.parse_topology_json(path.read_bytes())
    note = compute.uploaded_note(regimes)
    assert note.startswith("A regime file (rule regime-triple)")
    assert f"predicts tau {regimes['regime_prediction']['tau']:.3f}" in note
    pred = regimes["regime_prediction"]
    assert f"confident matches {pred['tau_confident']:.2f} on a share {pred['psi_confident']:.2f}" in note
    assert f"other matched cycles {pred['tau_matched']:.2f} on {pred['psi'] - pred['psi_confident']:.2f}" in note
    assert f"unmatched cycles {pred['tau_unmatched']:.2f} on {1 - pred['psi']:.2f}" in note
    assert "one per match length" in note
    # the shares and taus it names mix (harmonically) to the tau it names
    shares = (pred["psi_confident"], pred["psi"] - pred["psi_confident"], 1 - pred["psi"])
    taus = (pred["tau_confident"], pred["tau_matched"], pred["tau_unmatched"])
    assert 1 / sum(w / t for w, t in zip(shares, taus)) == pytest.approx(pred["tau"], rel=1e-6)
    # hand-edited prediction fields that are not numbers give no note, not a traceback
    assert compute.uploaded_note({**regimes, "regime_prediction": {**pred, "tau": None}, "predicted_tau": "abc"}) is None
    # numbers a float cannot hold (10**400 parses as a Python int) or that are not finite: no sentence either
    for key in ("tau", "psi", "tau_matched", "tau_unmatched", "psi_confident", "tau_confident"):
        for bad in (10**400, -10**400, float("inf"), float("nan")):
            note = compute.uploaded_note({**regimes, "regime_prediction": {**pred, key: bad}})
            assert note.startswith("Exported with predicted tau") and "A regime file" not in note, (key, bad)
    plain = {k: v for k, v in regimes.items() if k not in ("regime_prediction", "regimes")}
    assert compute.uploaded_note({**plain, "predicted_tau": 10**400}) is None
    assert compute.uploaded_note({**plain, "rule": "optimal"}).startswith(
        f"Exported with predicted tau {regimes['predicted_tau']:.3f} (rule optimal) under the acceptance fitted from its")
    # goose optimize's and this page's exports hold the rates they were given, not fitted ones (walkthrough)
    given = {k: v for k, v in plain.items() if k != "provenance"}
    assert "under the acceptance it was optimised for" in compute.uploaded_note(given)
    # found in review: the loop's single-tree file (rule regime-optimal) predicts a mix of the regimes,
    # not a tau under the one acceptance it carries
    single = compute.parse_topology_json(path.with_name("topology-mtbench-shuffled.json").read_bytes())
    note = compute.uploaded_note(single)
    assert note.startswith("A single-tree regime export (rule regime-optimal)")
    assert f"predicts tau {single['regime_prediction']['tau']:.3f}: other matched cycles" in note
    bare = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    assert compute.uploaded_note(compute.parse_topology_json(json.dumps(bare.to_dict()).encode())) is None
    # an export's bootstrap interval (predicted_ci95) goes beside the prediction it belongs to
    note = compute.uploaded_note({**regimes, "predicted_ci95": [1.934, 2.6]})
    assert f"predicts tau {pred['tau']:.3f} (95% interval 1.93-2.60, the fit's prompts resampled): " in note
    assert compute.uploaded_note({**plain, "predicted_ci95": [1.5, 2.25]}).startswith(
        f"Exported with predicted tau {regimes['predicted_tau']:.3f} (95% interval 1.50-2.25, the fit's prompts resampled) (rule")


def test_a_slider_move_builds_each_tree_once(monkeypatch):
    """The What-if tree, the spine curves and the width profiles share their trees (the curves'
    linear and harmonic m-searches are the width profiles' trees too): one build per
    (rule, acceptance, limits), with the same results as building afresh."""
    compute._build.cache_clear()
    built = []
    real = compute.build_topology
    monkeypatch.setattr(compute, "build_topology", lambda rule, acc, **kw: built.append((rule, kw["max_spine"])) or
                        real(rule, acc, **kw))
    args = (0.55, 0.04, "exclusive")
    r = compute.whatif(*args, "optimal", budget=30, seed=0)
    curves = compute.spine_curves(*args, budget=30)
    widths = compute.width_profiles(*args, budget=30)
    assert sorted(built) == sorted(set(built)) and ("linear", 20) in built and ("optimal", 20) in built
    assert len(built) == 2 + 21  # linear, harmonic, optimal with spine <= 0..20 (20: the What-if tree)
    compute._build.cache_clear()
    monkeypatch.setattr(compute, "build_topology", real)
    assert compute.whatif(*args, "optimal", budget=30, seed=0)["exact"] == r["exact"]
    assert compute.spine_curves(*args, budget=30).equals(curves)
    assert compute.width_profiles(*args, budget=30).equals(widths)
