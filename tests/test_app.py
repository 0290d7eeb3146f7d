"""The explorer page under streamlit.testing's AppTest: the What-if tab and the sidebar, uploads
and exports of trees, and what every tab shares (only the open one runs; closed tabs keep their
state; long-lived objects are frozen). The Traces and Cost tabs: test_app_traces.py, test_app_cost.py."""
from __future__ import annotations

import gc
import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from apptest import (APP, PROFILE, REGIME_EXPORT, TIMEOUT, assert_whatif_numbers, at, deltas,  # noqa: F401 (fixtures)
                     downloads, errors, expected, metrics, open_tab, unfrozen_heap, upload_profile)
from goose_theory.acceptance import Acceptance
from goose_theory.choices import choices_from_topology
from goose_theory.optimize import build_topology
from goose_theory.topology import Topology, topology_from_dict
from goose_theory.yields import exact_yield


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


def test_unplaced_nodes_warning_names_the_limits_that_bind(at):
    at.slider(key="p_s").set_value(1.0)
    at.slider(key="budget").set_value(60).run()  # exclusive: p_s = 1 leaves no room for any transition node
    (text,) = [w.value for w in at.warning]
    assert text.startswith("40 node(s) of the budget did not fit") and "larger top-K cannot fill" in text
    at.radio(key="model").set_value("independent")
    at.slider(key="max_depth").set_value(2)
    at.slider(key="top_k").set_value(2).run()  # 2 + 2*2 + 2*2*... : far fewer than 60 candidate nodes
    (text,) = [w.value for w in at.warning]
    assert "raise one of them" in text and "exclusive" not in text
    at.slider(key="budget").set_value(1).run()
    assert metrics(at)["tree"] == "1 node"  # was "1 nodes"


def test_short_trees_of_the_paper_rule_and_uniform_levels_are_explained(at):
    # diff review, 6 Dec: at B = 60 the paper rule's stranded node read "raise max depth, max spine or top-K"
    at.selectbox(key="rule").set_value("paper")
    at.slider(key="budget").set_value(60).run()
    assert [w.value[:58] for w in at.warning] == ["1 node(s) of the budget went unused: the paper's split giv"]
    at.selectbox(key="rule").set_value("uniform-levels")
    at.slider(key="budget").set_value(59).run()  # no uniform tree of 59 nodes: 10 + 10 x 4 = 50 (app review)
    assert any(i.value.startswith("uniform-levels: every node of a level") and " of its 59 nodes" in i.value for i in at.info)


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
    # the rule curves stay the sidebar's, and say so (walkthrough: they silently drew another tree's budget)
    assert any(c.value.endswith("the uploaded tree is not among them.") for c in at.main.caption)
    at.selectbox(key="rule").set_value("paper").run()
    assert not any("uploaded tree is not among" in c.value for c in at.main.caption)
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
    assert "exact E[tau]" in metrics(at)  # falls back to the optimal tree, and says so (walkthrough: it did not)
    assert any("Until a file loads, the optimal tree is shown." in i.value for i in at.sidebar.info)


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
    upload_profile(at, json.dumps(PROFILE).encode())
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
