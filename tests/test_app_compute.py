"""The explorer's cached computations agree with the library and fail with one readable line."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app import compute, compute_io
from goose_theory.acceptance import Acceptance
from goose_theory.bound import paper_lower_bound
from goose_theory.choices import ChoicesError, choices_from_topology, topology_from_choices
from goose_theory.errors import InputError
from goose_theory.fit import fit_traces
from goose_theory.latency import LatencyError, cost_aware, latency_from_dict
from goose_theory.optimize import OptimizeError, build_topology
from goose_theory.simulate import simulate
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from goose_theory.topology import Topology, TopologyError, topology_from_dict
from goose_theory.traceio import TraceFileError
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


# ---- traces ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    tree = build_topology("optimal", Acceptance.parse(0.6, 0.08), budget=12).topology
    specs = [SyntheticSpec(0.6, 0.08, (tree,), prompts=12, cycles=60, method="goose"),
             SyntheticSpec(0.3, 0.05, (tree,), prompts=12, cycles=60, method="other")]
    path = tmp_path_factory.mktemp("traces") / "synthetic.parquet"
    write_synthetic(path, specs, seed=3)
    return path


def test_fit_uploaded_equals_fit_traces(trace_file):
    out = compute_io.fit_uploaded((("mine.parquet", trace_file.read_bytes()),), ("method",), n_boot=100, seed=1)
    ref = fit_traces([trace_file], group_by=("method",), n_boot=100, seed=1)
    summary = out["summary"].set_index("group")
    for g in (ref.overall, *ref.groups):
        assert summary.loc[g.label, "p_s"] == g.p_s.estimate
        assert (summary.loc[g.label, "p_s_lo"], summary.loc[g.label, "p_s_hi"]) == g.p_s.ci95
        assert summary.loc[g.label, "p_t"] == g.p_t.estimate
        assert (summary.loc[g.label, "p_t_lo"], summary.loc[g.label, "p_t_hi"]) == g.p_t.ci95  # cluster bootstrap
        assert (summary.loc[g.label, "ratio_lo"], summary.loc[g.label, "ratio_hi"]) == g.ratio.ci95
    assert summary.loc["goose", "p_s"] == pytest.approx(0.6, abs=0.05)
    assert out["files"] == ["mine.parquet"]
    assert set(out["spine_curve"]["group"]) == {"all", "goose", "other"}
    assert not out["bound"]["violated"].any()
    gof = out["gof"].set_index("group")
    assert abs(gof.loc["all", "relative_error"]) < 0.05


def test_fit_shipped_matches_upload(trace_file):
    a = compute_io.fit_shipped((str(trace_file),), (0.0,), (), n_boot=50, seed=2)
    b = compute_io.fit_uploaded((("x.parquet", trace_file.read_bytes()),), (), n_boot=50, seed=2)
    pd.testing.assert_frame_equal(a["summary"], b["summary"])


def _bytes_of(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.mark.parametrize("name, data, message", [
    ("empty.parquet", b"", "empty.parquet: the file is empty"),
    ("notes.parquet", b"hello, not parquet", "notes.parquet: not a readable parquet file"),
    ("plain.parquet", _bytes_of(pa.table({"a": [1, 2]})), "plain.parquet: no goose_trace_version"),
])
def test_fit_uploaded_bad_files(name, data, message):
    with pytest.raises(TraceFileError, match=message) as info:
        compute_io.fit_uploaded(((name, data),), ())
    assert "goose-app-" not in str(info.value)  # the temporary path never leaks into the message


def test_fit_uploaded_refuses_the_same_trace_twice(trace_file, tmp_path):
    """As `goose fit-acceptance`: one trace under two names would count its cycles twice."""
    data = trace_file.read_bytes()
    with pytest.raises(TraceFileError) as info:
        compute_io.fit_uploaded((("a.parquet", data), ("b.parquet", data)), ())
    assert str(info.value) == ("b.parquet: the same trace as a.parquet (an identical parquet footer): "
                               "its cycles would count twice")
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(data)
    with pytest.raises(TraceFileError, match=f"{re.escape(str(copy))}: the same trace as {re.escape(str(trace_file))} .* would count twice"):
        compute_io.fit_shipped((str(trace_file), str(copy)), (0.0, 0.0), ())


@pytest.fixture(scope="module")
def roots_only_bytes(tmp_path_factory) -> bytes:
    """Traces of the root alone (as `ar` records them): nothing drafted, nothing to estimate."""
    path = tmp_path_factory.mktemp("roots") / "ar.parquet"
    write_synthetic(path, SyntheticSpec(0.6, 0.1, (Topology.from_nodes([(-1, "root", 0)]),), prompts=4, cycles=20),
                    seed=2)
    return path.read_bytes()


def test_fit_uploaded_refuses_roots_only_traces(roots_only_bytes):
    with pytest.raises(TraceFileError) as info:
        compute_io.fit_uploaded((("ar.parquet", roots_only_bytes),), ())
    assert str(info.value) == ("ar.parquet: the traces reach no drafted node (roots only: ar runs?), so p_s and "
                               "p_t cannot be estimated")


def test_fit_shipped_needs_files():
    with pytest.raises(TraceFileError, match="no trace files chosen"):
        compute_io.fit_shipped((), (), ())


# ---- cost -----------------------------------------------------------------------------------

PROFILE = {"schema": "goose-latency/1", "device": "test", "model": "m", "dtype": "float32",
           "sizes": [1, 8, 32, 128], "seconds": [0.020, 0.021, 0.026, 0.060], "draft_s": 0.0005,
           "draft_s_per_node": 0.00001}


def test_page_budgets():
    small = latency_from_dict({**PROFILE, "sizes": [1, 16], "seconds": [0.02, 0.03]})
    assert compute_io.page_budgets(small) == tuple(range(0, 16))  # few enough: every budget
    big = latency_from_dict(PROFILE)
    grid = compute_io.page_budgets(big)
    assert grid[0] == 0 and grid[-1] == 127 and len(grid) <= compute_io.MAX_BUDGETS
    assert list(grid) == sorted(set(grid))


def test_cost_table_is_cost_aware():
    text = compute_io.parse_latency(json.dumps(PROFILE).encode(), "p.json")
    out = compute_io.cost_table(0.6, 0.05, "exclusive", text, ("optimal", "paper"))
    profile = latency_from_dict(PROFILE)
    grid = compute_io.page_budgets(profile)
    for rule in ("optimal", "paper"):
        full = cost_aware(Acceptance.parse(0.6, 0.05), profile, rule=rule)  # goose optimize --latency
        mine = out["table"][out["table"]["rule"] == rule]
        rates = {r["budget"]: r["tokens_per_s"] for r in full.table}
        assert set(grid) <= set(mine["budget"])  # the grid, and for paper the budgets around its best
        if rule == "optimal":  # every budget, from one optimisation
            assert mine["budget"].tolist() == sorted(rates)
        for budget, rate in zip(mine["budget"], mine["tokens_per_s"]):
            if budget != full.best.budget or rule != "optimal":  # optimal's best row is its tree's exact value
                assert rate == pytest.approx(rates[budget], rel=1e-12)
        best = out["best"].set_index("rule").loc[rule]
        assert best["budget"] == full.best.budget and best["predicted_tau"] == full.best.predicted_tau
        row = next(r for r in full.table if r["budget"] == full.best.budget)  # the speed at the best budget itself
        assert best["tokens_per_s"] == row["tokens_per_s"] and best["speedup_vs_ar"] == row["speedup_vs_ar"]
    assert set(out["table"].columns) >= {"budget", "predicted_tau", "cycle_s", "tokens_per_s", "speedup_vs_ar", "rule"}


def test_cost_table_finds_the_best_budget_between_grid_points():
    # found in review: the best budget on the log-spaced grid disagreed with goose optimize
    # --latency (app 16, 1.897x against 15, 1.9275x for the default rule and shipped EPYC profile)
    path = sorted((Path(__file__).resolve().parent.parent / "app" / "latency").glob("cpu-amd-epyc*.json"))[0]
    text = compute_io.parse_latency(path.read_bytes(), path.name)
    profile = latency_from_dict(json.loads(text))
    out = compute_io.cost_table(0.5, 0.05, "exclusive", text, ("optimal", "paper", "linear"))
    for rule in ("optimal", "paper", "linear"):  # optimal: the grid alone gave 16 here
        full = cost_aware(Acceptance.parse(0.5, 0.05), profile, rule=rule)
        assert out["best"].set_index("rule").loc[rule, "budget"] == full.best.budget, rule


def test_cost_table_leaves_out_a_rule_it_cannot_build():
    # found in review: top_k 2 made isotropic:3 fail and the whole Cost tab go blank
    text = compute_io.parse_latency(json.dumps(PROFILE).encode(), "p.json")
    out = compute_io.cost_table(0.6, 0.05, "exclusive", text, ("optimal", "isotropic:3"), top_k=2)
    assert out["best"]["rule"].tolist() == ["optimal"] and list(out["errors"]) == ["isotropic:3"]
    assert "isotropic:3" not in set(out["table"]["rule"])
    with pytest.raises(InputError, match="isotropic:3: "):
        compute_io.cost_table(0.6, 0.05, "exclusive", text, ("isotropic:3",), top_k=2)


def test_cost_table_without_size_1_has_no_speedup():
    """`goose profile-latency --sizes 8,16` measures no t(1): no AR baseline, speedup NaN (not None)."""
    text = compute_io.parse_latency(json.dumps({**PROFILE, "sizes": [8, 16], "seconds": [0.021, 0.023]}).encode())
    out = compute_io.cost_table(0.6, 0.05, "exclusive", text, ("optimal", "paper"))
    for frame in (out["table"], out["best"]):
        assert frame["speedup_vs_ar"].dtype == float and frame["speedup_vs_ar"].isna().all()
    assert (out["best"]["tokens_per_s"] > 0).all()


@pytest.mark.parametrize("data, message", [
    (b"", "p.json: the file is empty"),
    (b"\xff\xfe", "p.json: not a JSON file"),
    (b'{"sizes": [' + b"1" * 5000 + b"]}", "p.json: not a JSON file \\(an integer longer"),
    (b"[1, 2]", "p.json: a latency profile must be a JSON object"),
    (json.dumps({**PROFILE, "seconds": [0.1]}).encode(), "p.json: sizes and seconds must be"),
    (json.dumps({**PROFILE, "schema": "other"}).encode(), "p.json: unknown schema"),
])
def test_parse_latency_errors(data, message):
    with pytest.raises(LatencyError, match=message):
        compute_io.parse_latency(data, "p.json")


# ---- transition acceptance by parent --------------------------------------------------------

BY_PARENT = {"p_t_spine": 0.02, "p_t_chain": 0.4}  # the traces' shape: low under spine, high in chains


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


def test_curves_and_cost_take_p_t_by_parent():
    acc = Acceptance.parse(0.6, 0.05, **BY_PARENT)
    widths = compute.width_profiles(0.6, 0.05, "exclusive", budget=30, **BY_PARENT)
    ref = build_topology("optimal", acc, budget=30).topology.first_level_widths
    assert widths[widths["rule"] == "optimal"]["width"].tolist() == ref.tolist()
    curves = compute.spine_curves(0.6, 0.05, "exclusive", budget=30, max_spine=8, **BY_PARENT)
    opt = curves[curves["rule"] == "optimal (spine <= m)"]["expected_tau"].iloc[-1]
    assert opt == pytest.approx(build_topology("optimal", acc, budget=30, max_spine=8).predicted_tau)
    text = compute_io.parse_latency(json.dumps(PROFILE).encode(), "p.json")
    out = compute_io.cost_table(0.6, 0.05, "exclusive", text, ("optimal",), **BY_PARENT)
    profile = latency_from_dict(PROFILE)
    best = cost_aware(acc, profile, rule="optimal").best
    row = out["best"].iloc[0]
    assert row["budget"] == best.budget and row["predicted_tau"] == best.predicted_tau


def test_fit_summary_has_p_t_by_parent(tmp_path):
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (1, "spine", 0),
                                (1, "transition", 0), (2, "transition", 0)])
    path = tmp_path / "parents.parquet"
    write_synthetic(path, SyntheticSpec(0.6, 0.2, (tree,), prompts=20, cycles=80, p_t_spine=0.05,
                                        p_t_chain=0.6), seed=4)
    out = compute_io.fit_uploaded((("parents.parquet", path.read_bytes()),), (), n_boot=50, seed=0)
    row = out["summary"].iloc[0]
    ref = fit_traces([path], n_boot=50, seed=0).overall
    for source in ("root", "spine", "transition"):
        assert row[f"p_t_{source}"] == ref.parent(source).p_t.estimate
        assert row[f"p_t_{source}_n"] == ref.parent(source).p_t.n > 0
    assert row["p_t_spine"] < row["p_t_root"] < row["p_t_transition"]  # 0.05 < 0.2 < 0.6, 1600 cycles


REGIME_EXPORT = "bench/results/shuffled_2026-11-30/mtbench_fit15_prior/topology-mtbench-shuffled-regimes.json"


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
        f"Exported with predicted tau {regimes['predicted_tau']:.3f} (rule optimal) under the acceptance")
    # found in review: the loop's single-tree file (rule regime-optimal) predicts a mix of the regimes,
    # not a tau under the one acceptance it carries
    single = compute.parse_topology_json(path.with_name("topology-mtbench-shuffled.json").read_bytes())
    note = compute.uploaded_note(single)
    assert note.startswith("A single-tree regime export (rule regime-optimal)")
    assert f"predicts tau {single['regime_prediction']['tau']:.3f}: other matched cycles" in note
    bare = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    assert compute.uploaded_note(compute.parse_topology_json(json.dumps(bare.to_dict()).encode())) is None


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
