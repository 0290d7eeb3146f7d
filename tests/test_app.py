"""The explorer page under streamlit.testing's AppTest: every section runs without an exception,
shows the library's numbers, and answers bad input with a readable message."""
from __future__ import annotations

import gc
import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.sections.common import TAB_KEY
from app.sections.sidebar import on_slider
from app.sections.traces import load_caption
from goose_theory.acceptance import Acceptance
from goose_theory.bound import paper_lower_bound
from goose_theory.choices import choices_from_topology
from goose_theory.fit import fit_traces
from goose_theory.optimize import build_topology
from goose_theory.simulate import simulate
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from goose_theory.topology import Topology, topology_from_dict
from goose_theory.yields import exact_yield

REGIME_EXPORT = "bench/results/shuffled_2026-11-30/mtbench_fit15_prior/topology-mtbench-shuffled-regimes.json"
APP = str(Path(__file__).resolve().parent.parent / "app" / "explorer.py")
TIMEOUT = 120  # the first run imports numba kernels; later runs take well under a second


@pytest.fixture(autouse=True)
def unfrozen_heap():
    """The page freezes long-lived objects (``app/sections/common.freeze_long_lived``); this test
    process is no page server, so they go back to the collector after each test (frozen objects
    are invisible to ``gc.get_referrers``, which hypothesis, for one, relies on)."""
    yield
    gc.unfreeze()


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not app.exception
    return app


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """file name -> bytes of every download button the page offers (AppTest keeps no contents)."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    served: dict[str, bytes] = {}
    load = MemoryMediaFileStorage.load_and_get_id

    def spy(self, path_or_data, mimetype, kind, filename=None):
        if filename:
            served[filename] = path_or_data
        return load(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", spy)
    return served


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def deltas(app: AppTest) -> dict[str, str]:
    return {m.label: m.proto.delta for m in app.metric}


def errors(app: AppTest) -> list[str]:
    return [e.value for e in app.error]


def open_tab(app: AppTest, label: str) -> AppTest:
    """Click a tab: only the open tab runs, so a test opens the one it reads."""
    app.session_state[TAB_KEY] = label
    return app.run()


def expected(p_s, p_t, model="exclusive", rule="optimal", budget=60, seed=0, p_t_spine=None, p_t_chain=None,
             **shape):
    acc = Acceptance.parse(p_s, p_t, model, p_t_spine=p_t_spine, p_t_chain=p_t_chain)
    topo = build_topology(rule, acc, budget=budget, **shape).topology
    sim = simulate(topo, acc, cycles=200_000, seed=seed)
    return topo, exact_yield(topo, acc).expected_tau, paper_lower_bound(topo, acc).lower_bound, sim


def assert_whatif_numbers(app: AppTest, topo_exact_bound_sim) -> None:
    topo, exact, bound, sim = topo_exact_bound_sim
    shown = metrics(app)
    assert shown["exact E[tau]"] == f"{exact:.4f}"
    assert shown["paper's lower bound"] == f"{bound:.4f}"
    assert shown["Monte Carlo mean"] == f"{sim.mean:.4f}"
    assert deltas(app)["Monte Carlo mean"] == f"95% CI {sim.ci95[0]:.4f} .. {sim.ci95[1]:.4f}"
    assert shown["tree"] == f"{topo.budget} nodes"


def test_default_page_shows_the_librarys_numbers(at):
    assert_whatif_numbers(at, expected(0.5, 0.05))
    assert [t.label for t in at.tabs] == ["What-if", "Traces", "Cost", "Export"]
    assert not errors(at)
    exported = json.loads(open_tab(at, "Export").code[0].value)  # the Export tab's JSON is the What-if tree
    assert topology_from_dict(exported) == expected(0.5, 0.05)[0]
    assert exported["schema"] == "goose-topology/1"
    assert at.get("download_button")


def test_every_widget_has_a_key(at):
    at.checkbox(key="by_parent").check().run()  # the per-parent sliders too
    widgets = [w for kind in ("slider", "radio", "selectbox", "number_input", "multiselect", "select_slider",
                              "checkbox")
               for w in getattr(at, kind)]
    assert widgets and all(w.key for w in widgets)


def test_sliders_move_the_numbers(at):
    at.slider(key="p_s").set_value(0.7)
    at.slider(key="p_t").set_value(0.03)
    at.slider(key="budget").set_value(40)
    at.selectbox(key="rule").set_value("harmonic")
    at.radio(key="model").set_value("independent").run()
    assert not at.exception and not errors(at)
    assert_whatif_numbers(at, expected(0.7, 0.03, "independent", "harmonic", 40))
    at.slider(key="max_depth").set_value(4)
    at.slider(key="top_k").set_value(5)
    at.slider(key="max_spine").set_value(10)
    at.number_input(key="seed").set_value(3).run()
    assert_whatif_numbers(at, expected(0.7, 0.03, "independent", "harmonic", 40, seed=3,
                                       max_depth=4, max_spine=10, top_k=5))


def test_p_t_by_parent_sliders_move_e_tau(at):
    scalar = metrics(at)["exact E[tau]"]
    at.checkbox(key="by_parent").check().run()
    assert not at.exception and not errors(at)
    assert at.slider(key="p_t_spine").value == at.slider(key="p_t_chain").value == 0.05  # start at p_t
    assert metrics(at)["exact E[tau]"] == scalar  # nothing changes until a slider moves
    at.slider(key="p_t_spine").set_value(0.02)
    at.slider(key="p_t_chain").set_value(0.45).run()
    assert not at.exception and not errors(at)
    assert_whatif_numbers(at, expected(0.5, 0.05, p_t_spine=0.02, p_t_chain=0.45))
    assert metrics(at)["exact E[tau]"] != scalar
    assert any("0.02 under a spine node, 0.45 under a transition node" in m.value  # the Export tab says so
               for m in open_tab(at, "Export").markdown)
    open_tab(at, "What-if")
    at.radio(key="model").set_value("independent").run()
    assert_whatif_numbers(at, expected(0.5, 0.05, "independent", p_t_spine=0.02, p_t_chain=0.45))


def test_p_t_by_parent_off_is_the_scalar_page(at):
    at.checkbox(key="by_parent").check().run()
    at.slider(key="p_t_chain").set_value(0.6).run()
    moved = metrics(at)["exact E[tau]"]
    at.checkbox(key="by_parent").uncheck().run()
    assert not at.exception and not errors(at)
    assert not [s for s in at.slider if s.key in ("p_t_spine", "p_t_chain")]
    assert_whatif_numbers(at, expected(0.5, 0.05))
    assert metrics(at)["exact E[tau]"] != moved
    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT).run()  # the same page as one never switched on
    assert metrics(at) == metrics(fresh) and deltas(at) == deltas(fresh)
    assert json.loads(open_tab(at, "Export").code[0].value) == json.loads(open_tab(fresh, "Export").code[0].value)


def test_p_t_by_parent_exclusive_violation_is_a_message(at):
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (1, "transition", 0),
                                (1, "transition", 1)])
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("spine.json", json.dumps(tree.to_dict()).encode(),
                                                       "application/json"))
    at.checkbox(key="by_parent").check().run()
    assert not at.exception and not errors(at)
    at.slider(key="p_t_spine").set_value(0.3).run()  # 0.5 + 0.3 + 0.3 > 1 under the first spine node
    assert not at.exception
    assert len(errors(at)) == 1 and "exclusive model" in errors(at)[0] and "summing to 1.1" in errors(at)[0]
    assert at.get("vega_lite_chart")  # the rest of the page still draws
    at.slider(key="p_t_spine").set_value(0.2).run()
    assert not errors(at)
    acc = Acceptance.parse(0.5, 0.05, p_t_spine=0.2, p_t_chain=0.05)
    assert metrics(at)["exact E[tau]"] == f"{exact_yield(tree, acc).expected_tau:.4f}"


def test_uploaded_topology_survives_a_rule_switch(at):
    # found in review: switching the rule away and back dropped the sidebar's uploaded file
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("spine.json", json.dumps(tree.to_dict()).encode(),
                                                       "application/json")).run()
    expected_tau = f"{exact_yield(tree, Acceptance.parse(0.5, 0.05)).expected_tau:.4f}"
    assert metrics(at)["exact E[tau]"] == expected_tau
    at.selectbox(key="rule").set_value("paper").run()
    assert metrics(at)["exact E[tau]"] != expected_tau
    at.selectbox(key="rule").set_value("uploaded topology").run()
    assert not at.exception and not errors(at)
    assert metrics(at)["exact E[tau]"] == expected_tau
    assert any(c.value.startswith("Using spine.json, uploaded before it was hidden") for c in at.sidebar.caption)


def test_export_offers_tree_choices_without_a_spine(downloads, at):
    open_tab(at, "Export")
    assert any("Not for this tree" in c.value for c in at.caption)  # the default optimal tree has a spine
    at.selectbox(key="rule").set_value("transition-only").run()
    assert not at.exception and not errors(at)
    assert len(at.get("download_button")) == 2
    assert any("goose choices import" in c.value for c in at.caption)
    # the choices download is the rank paths of the tree in the topology download
    tree = topology_from_dict(json.loads(downloads["topology-transition-only-B60.json"]))
    assert json.loads(downloads["choices-transition-only-B60.json"]) == choices_from_topology(tree)


def test_bad_rule_is_a_message_and_the_rest_works(at):
    at.slider(key="top_k").set_value(3)
    at.selectbox(key="rule").set_value("isotropic:5").run()
    assert not at.exception
    assert any("K=5 must be between 1 and top_k=3" in e for e in errors(at))
    assert "exact E[tau]" not in metrics(at)
    assert len(at.get("vega_lite_chart")) >= 3  # curves, widths and the heatmap still drawn
    assert [w.value for w in open_tab(at, "Export").warning] == [
        "No valid tree to export (rule 'isotropic:5': K=5 must be between 1 and top_k=3): change the What-if "
        "parameters."]


def test_uploaded_topology_and_exclusive_violation(at):
    crowded = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("crowded.json", json.dumps(crowded.to_dict()).encode(),
                                                       "application/json"))
    at.slider(key="p_s").set_value(0.5)
    at.slider(key="p_t").set_value(0.2).run()
    assert not at.exception and not errors(at)
    assert metrics(at)["exact E[tau]"] == f"{exact_yield(crowded, Acceptance.parse(0.5, 0.2)).expected_tau:.4f}"
    at.slider(key="p_s").set_value(0.7).run()  # 0.7 + 0.2 + 0.2 > 1 at the root
    assert not at.exception
    assert any("exclusive model" in e and "summing to 1.1" in e for e in errors(at))
    assert at.get("vega_lite_chart")  # the rest of the page still draws
    at.radio(key="model").set_value("independent").run()  # no such condition there
    assert not errors(at)


def test_uploaded_tree_choices_are_scored_and_exported_back(downloads, at):
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("medusa.json", b"[[0], [1], [0, 0], [0, 1]]",
                                                       "application/json"))
    at.slider(key="p_t").set_value(0.2).run()
    assert not at.exception and not errors(at)
    tree = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1), (1, "transition", 0),
                                (1, "transition", 1)])
    assert metrics(at)["exact E[tau]"] == f"{exact_yield(tree, Acceptance.parse(0.5, 0.2)).expected_tau:.4f}"
    best = build_topology("optimal", Acceptance.parse(0.5, 0.2), budget=4).predicted_tau
    mine = exact_yield(tree, Acceptance.parse(0.5, 0.2)).expected_tau
    assert any(c.value.startswith(f"The optimal tree of 4 nodes within the sidebar's limits: E[tau] = {best:.4f}; "
                                  f"this tree {mine / best - 1:+.1%}") for c in at.caption)
    assert len(open_tab(at, "Export").get("download_button")) == 2  # no spine: the choices download is offered
    assert json.loads(downloads["choices-uploaded-B4.json"]) == [[0], [1], [0, 0], [0, 1]]  # the upload, back


def test_uploaded_regime_file_shows_its_own_prediction(at):
    data = (Path(APP).parent.parent / REGIME_EXPORT).read_bytes()
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("regimes.json", data, "application/json"))
    at.slider(key="p_s").set_value(0.7).run()
    assert not at.exception and not errors(at)
    tau = json.loads(data)["regime_prediction"]["tau"]
    assert any(i.value.startswith("A regime file") and f"predicts tau {tau:.3f}" in i.value for i in at.info)
    assert "exact E[tau]" in metrics(at)  # the file's own tree is still scored


def test_bad_topology_upload_is_a_message(at):
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("bad.json", b"{\"schema\": 1}", "application/json")).run()
    assert not at.exception
    assert any("bad.json" in e and "unknown schema" in e for e in errors(at))
    assert "exact E[tau]" in metrics(at)  # falls back to the optimal tree


def test_uploaded_tree_above_5000_nodes_is_drawn(at):
    """goose optimize goes up to budget 10000; altair alone refuses over 5000 rows. One spine of
    10000 nodes: 10001 tree rows and a pmf of 10002 taus (drawn only where P(tau) >= 1e-12)."""
    chain = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(10_000)], max_spine=10_001)
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("chain.json", json.dumps(chain.to_dict()).encode(),
                                                       "application/json")).run()
    assert not at.exception and not errors(at)
    acc = Acceptance.parse(0.5, 0.05)
    assert metrics(at)["exact E[tau]"] == f"{exact_yield(chain, acc).expected_tau:.4f}"
    assert metrics(at)["tree"] == "10000 nodes"
    assert any(c.value.startswith("Drawn up to tau = ") for c in at.caption)


def test_uploaded_regime_file_with_a_huge_number_is_still_scored(at):
    """10**400 is a JSON integer no float holds: the file's own-prediction note is left out."""
    data = json.loads((Path(APP).parents[1] / REGIME_EXPORT).read_text())
    data["regime_prediction"]["tau"] = 10**400
    data.pop("predicted_tau", None)
    at.selectbox(key="rule").set_value("uploaded topology").run()
    at.file_uploader(key="topology_upload").set_value(("regimes.json", json.dumps(data).encode(),
                                                       "application/json")).run()
    assert not at.exception and not errors(at)
    assert not [i.value for i in at.info if "A regime file" in i.value]
    assert "exact E[tau]" in metrics(at)


@pytest.fixture(scope="module")
def trace_bytes(tmp_path_factory) -> bytes:
    tree = build_topology("optimal", Acceptance.parse(0.55, 0.07), budget=10).topology
    path = tmp_path_factory.mktemp("app-traces") / "t.parquet"
    write_synthetic(path, SyntheticSpec(0.55, 0.07, (tree,), prompts=10, cycles=50), seed=5)
    return path.read_bytes()


def upload_and_fit(at, name: str, data: bytes, tmp_path):
    """Upload one trace file in the Traces tab; return the library's fit of the same bytes."""
    open_tab(at, "Traces")
    at.radio(key="trace_source").set_value("upload parquet files").run()
    at.file_uploader(key="trace_upload").set_value([(name, data, "application/octet-stream")]).run()
    assert not at.exception and not errors(at)
    (tmp_path / name).write_bytes(data)
    return fit_traces([tmp_path / name], n_boot=300, seed=0).overall


def test_traces_upload_shows_the_fit(at, trace_bytes, tmp_path):
    fit = upload_and_fit(at, "t.parquet", trace_bytes, tmp_path)
    shown, shown_delta = metrics(at), deltas(at)
    assert shown["fitted p_s"] == f"{fit.p_s.estimate:.4f}"
    assert shown_delta["fitted p_s"] == f"95% CI {fit.p_s.ci95[0]:.4f} .. {fit.p_s.ci95[1]:.4f}"
    assert shown["fitted p_t"] == f"{fit.p_t.estimate:.4f}"
    assert shown_delta["fitted p_t"] == f"95% CI {fit.p_t.ci95[0]:.4f} .. {fit.p_t.ci95[1]:.4f}"
    assert shown_delta["p_s / p_t"] == f"95% CI {fit.ratio.ci95[0]:.2f} .. {fit.ratio.ci95[1]:.2f}"
    assert any("bound holds" in s.value for s in at.success)


@pytest.fixture(scope="module")
def parent_trace_bytes(tmp_path_factory) -> bytes:
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (1, "spine", 0),
                                (1, "transition", 0), (2, "transition", 0)])
    path = tmp_path_factory.mktemp("app-parent-traces") / "p.parquet"
    write_synthetic(path, SyntheticSpec(0.6, 0.2, (tree,), prompts=10, cycles=60, p_t_spine=0.05, p_t_chain=0.6),
                    seed=2)
    return path.read_bytes()


def test_traces_fit_loads_p_t_by_parent_into_the_sidebar(at, parent_trace_bytes, tmp_path):
    fit = upload_and_fit(at, "p.parquet", parent_trace_bytes, tmp_path)
    root, spine, chain = (fit.parent(s).p_t.estimate for s in ("root", "spine", "transition"))
    assert spine < root < chain  # true 0.05 < 0.2 < 0.6: three distinct values to load
    at.button(key="trace_load_acceptance").click().run()
    assert not at.exception and not errors(at)
    open_tab(at, "What-if")
    assert at.checkbox(key="by_parent").value
    # on the sliders' steps (found in review: unrounded values gave E[tau] 11.8730 where the values
    # the sliders showed give 11.5757)
    p_s, root, spine, chain = (on_slider(fit.p_s.estimate, 0.01), on_slider(root, 0.005), on_slider(spine, 0.005),
                               on_slider(chain, 0.005))
    assert (at.slider(key="p_s").value, at.slider(key="p_t").value) == (p_s, root)
    assert (at.slider(key="p_t_spine").value, at.slider(key="p_t_chain").value) == (spine, chain)
    assert_whatif_numbers(at, expected(p_s, root, p_t_spine=spine, p_t_chain=chain))


def test_load_caption_names_the_stand_ins():
    # found in review: a parent the traces never reached showed the pooled p_t as if fitted there,
    # and a NaN p_s (no spine node) was loaded as 0 without a word
    row = pd.Series({"p_s": float("nan"), "p_t": 0.12, "p_t_root": 0.2, "p_t_root_n": 50, "p_t_spine": float("nan"),
                     "p_t_spine_n": 0, "p_t_transition": 0.6, "p_t_transition_n": 9})
    assert load_caption(row, "g") == (
        "Fitted (g; p_t by parent pooled over rank): p_s: no spine node in these traces (the slider is left as it "
        "is); p_t 0.2000 under the root, under a spine node none reached (the pooled p_t 0.1200 stands in), "
        "0.6000 under a transition node. Loading rounds them to the sliders' steps (0.01 for p_s, 0.005 for p_t).")
    assert (on_slider(0.9123, 0.01), on_slider(0.1538, 0.005), on_slider(-0.1, 0.005), on_slider(0.7, 0.005, 0.5)) == (
        0.91, 0.155, 0.0, 0.5)


def test_load_leaves_a_slider_alone_for_a_nan():
    # no spine node in the traces: p_s is NaN and stays as the user set it (it was loaded as 0)
    import streamlit as st

    from app.sections.sidebar import load_acceptance
    st.session_state.clear()
    st.session_state["p_s"] = 0.77
    load_acceptance(float("nan"), 0.2123, float("nan"), 0.6)
    assert {k: st.session_state[k] for k in ("p_s", "p_t", "p_t_chain", "by_parent")} == {
        "p_s": 0.77, "p_t": 0.21, "p_t_chain": 0.6, "by_parent": True}
    assert "p_t_spine" not in st.session_state
    st.session_state.clear()


@pytest.mark.parametrize("name, data, message", [
    ("empty.parquet", b"", "empty.parquet: the file is empty"),
    ("junk.parquet", b"PAR1 definitely not parquet", "junk.parquet: not a readable parquet file"),
])
def test_traces_bad_upload_is_a_message(at, name, data, message):
    upload_traces(at, [(name, data)])
    assert not at.exception
    assert any(message in e for e in errors(at))
    assert "exact E[tau]" in metrics(open_tab(at, "What-if"))  # the What-if tab is unaffected


def upload_traces(at: AppTest, files: list[tuple[str, bytes]]) -> None:
    open_tab(at, "Traces")
    at.radio(key="trace_source").set_value("upload parquet files").run()
    at.file_uploader(key="trace_upload").set_value([(n, d, "application/octet-stream") for n, d in files]).run()


def test_traces_same_trace_twice_is_a_message(at, trace_bytes):
    """As `goose fit-acceptance`: a copy under another name would count its cycles twice."""
    upload_traces(at, [("a.parquet", trace_bytes), ("b.parquet", trace_bytes)])
    assert not at.exception
    assert errors(at) == ["cannot fit these traces: b.parquet: the same trace as a.parquet (an identical parquet "
                          "footer): its cycles would count twice"]
    assert "fitted p_s" not in metrics(at)


def test_traces_roots_only_is_a_message(at, tmp_path):
    """Traces of the root alone (ar runs): the CLI's one line, not NaN estimates."""
    path = tmp_path / "ar.parquet"
    write_synthetic(path, SyntheticSpec(0.6, 0.1, (Topology.from_nodes([(-1, "root", 0)]),), prompts=4, cycles=20),
                    seed=2)
    upload_traces(at, [("ar.parquet", path.read_bytes())])
    assert not at.exception
    assert errors(at) == ["cannot fit these traces: ar.parquet: the traces reach no drafted node (roots only: ar "
                          "runs?), so p_s and p_t cannot be estimated"]
    assert "fitted p_s" not in metrics(at)


PROFILE = {"schema": "goose-latency/1", "device": "test", "model": "m", "dtype": "float32",
           "sizes": [1, 8, 32, 128], "seconds": [0.020, 0.021, 0.026, 0.060], "draft_s": 0.0005}


def _upload_profile(at: AppTest, data: bytes, name: str = "p.json") -> None:
    open_tab(at, "Cost")
    at.selectbox(key="latency_choice").set_value("upload a profile").run()
    at.file_uploader(key="latency_upload").set_value((name, data, "application/json")).run()


def test_cost_tab_best_budget_is_the_librarys(at):
    from goose_theory.latency import cost_aware, latency_from_dict

    _upload_profile(at, json.dumps(PROFILE).encode())
    assert not at.exception and not errors(at)
    profile = latency_from_dict(PROFILE)
    acc = Acceptance.parse(0.5, 0.05)
    results = {rule: cost_aware(acc, profile, rule=rule)  # every budget, as goose optimize --latency
               for rule in at.multiselect(key="cost_rules").value}
    rule, best = max(results.items(), key=lambda kv: kv[1].best.predicted_tau / profile.cycle_seconds(kv[1].best.budget))
    shown = metrics(at)
    assert shown["best budget"] == str(best.best.budget)
    assert deltas(at)["best budget"] == f"rule {rule}"
    assert shown["predicted E[tau] there"] == f"{best.best.predicted_tau:.4f}"
    row = next(r for r in best.table if r["budget"] == best.best.budget)  # the speed at the best budget itself
    assert shown["predicted speedup vs AR"] == f"{row['speedup_vs_ar']:.3f}x"


@pytest.mark.parametrize("data, message", [
    (b"", "p.json: the file is empty"),
    (json.dumps({**PROFILE, "seconds": [0.1, 0.2]}).encode(), "sizes and seconds must be non-empty lists of the same length"),
    (b"{\"sizes\": 3}", "unknown schema"),
])
def test_cost_tab_bad_profile_is_a_message(at, data, message):
    _upload_profile(at, data)
    assert not at.exception
    assert any(message in e for e in errors(at))
    assert "exact E[tau]" in metrics(open_tab(at, "What-if"))


def test_cost_tab_names_a_rule_it_cannot_build(at):
    # found in review: top_k 2 made the default rule isotropic:3 fail and the tab go blank
    at.slider(key="top_k").set_value(2).run()
    _upload_profile(at, json.dumps(PROFILE).encode())
    assert not at.exception and not errors(at)
    assert [w.value for w in at.warning] == [
        "left out: rule 'isotropic:3': K=3 must be between 1 and top_k=2"]
    assert "best budget" in metrics(at)


def test_cost_tab_takes_p_t_by_parent(at):
    from goose_theory.latency import cost_aware, latency_from_dict

    _upload_profile(at, json.dumps(PROFILE).encode())
    at.multiselect(key="cost_rules").set_value(["optimal"])
    at.checkbox(key="by_parent").check().run()
    at.slider(key="p_t_spine").set_value(0.02)
    at.slider(key="p_t_chain").set_value(0.5).run()
    assert not at.exception and not errors(at)
    profile = latency_from_dict(PROFILE)
    acc = Acceptance.parse(0.5, 0.05, p_t_spine=0.02, p_t_chain=0.5)
    best = cost_aware(acc, profile, rule="optimal").best
    assert metrics(at)["best budget"] == str(best.budget)
    assert metrics(at)["predicted E[tau] there"] == f"{best.predicted_tau:.4f}"


def test_cost_tab_profile_without_size_1_says_no_baseline(at):
    """`goose profile-latency --sizes 8,16` measures no t(1): no speedup against AR to show."""
    from goose_theory.latency import LatencyProfile

    profile = LatencyProfile(sizes=(8, 16), seconds=(0.021, 0.023), draft_s=0.0005, device="test")
    _upload_profile(at, json.dumps(profile.to_dict()).encode())
    assert not at.exception and not errors(at)
    assert metrics(at)["predicted speedup vs AR"] == "n/a"
    assert any("no AR baseline" in i.value for i in at.info)
    assert "best budget" in metrics(at)


def test_cost_tab_offers_the_shipped_profiles(at):
    from app.sections.cost import shipped_profiles
    from goose_theory.latency import load_latency

    names = [p.name for p in shipped_profiles()]
    open_tab(at, "Cost")
    assert len(names) >= 3 and at.selectbox(key="latency_choice").options[:len(names)] == names
    for path in shipped_profiles():  # each one a valid profile of the page's kind, and rendered
        load_latency(str(path))
        at.selectbox(key="latency_choice").set_value(path.name).run()
        assert not at.exception and not errors(at) and "best budget" in metrics(at)


def test_only_the_open_tab_runs(at):
    """A slider moved on the What-if tab draws nothing of the closed tabs (no fit, no budgets, no
    downloads); opening one draws it and not the What-if tab."""
    at.slider(key="p_s").set_value(0.6).run()
    assert "exact E[tau]" in metrics(at) and not at.get("download_button")
    assert not ({"fitted p_s", "best budget"} & set(metrics(at)))
    open_tab(at, "Cost")
    assert "best budget" in metrics(at) and "exact E[tau]" not in metrics(at)


def test_closed_tabs_keep_their_widgets_and_uploads(at):
    at.select_slider(key="heatmap_budget").set_value(40).run()
    _upload_profile(at, json.dumps(PROFILE).encode())
    at.multiselect(key="cost_rules").set_value(["optimal", "linear"]).run()
    shown = metrics(at)
    open_tab(at, "What-if")
    at.slider(key="p_t").set_value(0.06).run()  # a rerun that draws neither the Cost widgets nor the uploader
    assert at.select_slider(key="heatmap_budget").value == 40
    open_tab(at, "Cost")
    assert not at.exception and not errors(at)
    assert at.selectbox(key="latency_choice").value == "upload a profile"
    assert at.multiselect(key="cost_rules").value == ["optimal", "linear"]
    assert any(c.value.startswith("Using p.json, uploaded before it was hidden") for c in at.caption)
    assert metrics(at)["best budget"] and metrics(at) != shown  # p_t moved: the kept profile priced the new trees
    at.slider(key="p_t").set_value(0.05).run()
    assert metrics(at) == shown
    at.button(key="forget_latency_upload").click().run()
    assert "best budget" not in metrics(at)
    assert any(i.value.startswith("Upload a latency profile") for i in at.info)


def test_traces_upload_outlives_a_closed_tab(at, trace_bytes):
    upload_traces(at, [("t.parquet", trace_bytes)])
    fitted = metrics(at)
    assert "fitted p_s" in fitted
    open_tab(at, "Cost")
    open_tab(at, "Traces")
    assert at.radio(key="trace_source").value == "upload parquet files"
    assert metrics(at) == fitted
    assert any(c.value.startswith("Using t.parquet, uploaded before") for c in at.caption)
    at.button(key="forget_trace_upload").click().run()
    assert "fitted p_s" not in metrics(at)


def test_traces_removed_from_the_uploader_are_forgotten(at, trace_bytes):
    upload_traces(at, [("t.parquet", trace_bytes)])
    at.file_uploader(key="trace_upload").set_value([]).run()  # the user removes the file, the tab open
    assert "fitted p_s" not in metrics(open_tab(open_tab(at, "Cost"), "Traces"))
    assert not any(c.value.startswith("Using t.parquet") for c in at.caption)


def test_long_lived_objects_are_frozen_after_a_run(monkeypatch):
    """The page freezes what has come to stay (the first run's imports and the like) once the
    oldest generation holds more than FREEZE_AT objects, garbage collected first, so a full
    collection does not walk them on some later interaction; a run that adds little freezes nothing."""
    from app.sections import common

    app = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not app.exception and gc.get_freeze_count() > 10_000  # the real thing: the imports are frozen
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(common, "FREEZE_AT", 10**9)
    app.slider(key="p_s").set_value(0.52).run()
    assert calls == []
    monkeypatch.setattr(common, "FREEZE_AT", -1)
    app.slider(key="p_s").set_value(0.61).run()
    assert calls == ["collect", "freeze"]
