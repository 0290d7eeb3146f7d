"""``goose loop`` / ``goose validate``: bad input is one line and exit code 2, nothing written; and both
commands end to end on the real model (``slow``; the full loop also runs in `make run`).

The fast tests fail before any model loads (the ``no_model`` fixture makes sure of it)."""
from __future__ import annotations

import pathlib
import shutil

import pytest

from goose_runtime.cli import main
from tests.conftest import thresholded_trace_copy


def _latency_file(tmp_path) -> str:
    """A given latency profile: the loop measures nothing and writes no profile into the user's
    goose cache (a measured one would be cached there and used by the next `make run`)."""
    from goose_theory.latency import LatencyProfile, save_latency
    path = tmp_path / "latency.json"
    save_latency(LatencyProfile(sizes=(1, 2, 4, 8, 16, 32, 64), seconds=(0.020, 0.0202, 0.0205, 0.022, 0.026, 0.034, 0.05),
                                draft_s=0.0004), path)
    return str(path)


@pytest.mark.slow  # the two-regime fit runs after the model loads (the latency profile needs it)
def test_loop_refuses_traces_recorded_with_min_score(capsys, tmp_path):
    for bench in ("humaneval", "mtbench", "stdlib"):
        thresholded_trace_copy(f"traces/{bench}-b8.parquet", tmp_path / f"{bench}.parquet")
    code = main(["loop", "--traces", str(tmp_path / "*.parquet"), "--out-dir", str(tmp_path / "out"),
                 "--latency", _latency_file(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: two-regime fit") and "recorded with --min-score" in err[-1]
    assert not (tmp_path / "out").exists()  # every set is fitted before the report is written


def test_loop_without_traces(capsys, tmp_path, no_model):
    assert main(["loop", "--traces", str(tmp_path / "none-*.parquet"), "--out", str(tmp_path / "out")]) == 2
    assert "none-*.parquet: no files match (record them with" in capsys.readouterr().err


def _fails(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and message in err, err


def test_loop_refuses_one_trace_under_two_names(capsys, tmp_path, no_model):
    # a copy's cycles would count twice in the fit, and narrow every interval with it
    for name in ("a.parquet", "b.parquet"):
        shutil.copy("traces/stdlib-b8.parquet", tmp_path / name)
    _fails(capsys, ["loop", "--traces", str(tmp_path), "--out-dir", str(tmp_path / "out")],
           f"--traces: {tmp_path / 'b.parquet'}: the same trace as {tmp_path / 'a.parquet'}")
    assert not (tmp_path / "out").exists()


def test_validate_names_the_topology_whose_fit_trace_is_unreadable(capsys, tmp_path, no_model):
    # the trace's own error did not say where it came from, and it came after the model load
    from goose_theory.topology import Topology, save_topology
    (tmp_path / "notes.parquet").write_text("not parquet")
    topo = tmp_path / "t.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]).with_meta(
        provenance={"traces": [str(tmp_path / "notes.parquet")]}), topo)
    _fails(capsys, ["validate", "--topology", str(topo), "--bench", "stdlib", "--limit", "1"],
           f"--topology {topo}: provenance.traces: {tmp_path / 'notes.parquet'}: not a readable parquet file")


def test_loop_refresh_latency_refuses_an_explicit_latency_file(capsys, tmp_path, no_model):
    _fails(capsys, ["loop", "--refresh-latency", "--latency", str(tmp_path / "l.json"), "--out-dir", str(tmp_path)],
           "--refresh-latency re-measures the cached profile; it does not apply with --latency FILE")


@pytest.mark.parametrize("command", [["loop"], ["validate", "--topology", "t.json"]])
@pytest.mark.parametrize("flag", ["--threads", "--limit"])
def test_counts_below_one_are_refused_before_the_model_loads(capsys, tmp_path, no_model, command, flag):
    _fails(capsys, [*command, flag, "0", "--out-dir" if command == ["loop"] else "--out", str(tmp_path / "out")],
           f"{flag} must be at least 1, got 0")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["loop"], ["validate", "--topology", "t.json"]])
def test_max_new_tokens_below_one_is_refused_before_the_model_loads(capsys, tmp_path, no_model, command):
    _fails(capsys, [*command, "--max-new-tokens", "0", "--out-dir" if command == ["loop"] else "--out",
                    str(tmp_path / "out")], "--max-new-tokens must be at least 1, got 0")
    assert not (tmp_path / "out").exists()


def test_loop_with_traces_of_other_sets_writes_nothing(capsys, tmp_path, no_model):
    out = tmp_path / "out"
    code = main(["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "humaneval", "--out-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == "error: the traces hold no prompt set 'humaneval' (they hold stdlib)"
    assert not out.exists()
    # a set that does not exist is refused even beside one the traces hold (not silently left out)
    code = main(["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib,typo", "--out-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: unknown prompt set 'typo'")   # refused even before the fit
    assert not out.exists()
    # and one that exists but is not in the traces, beside one that is
    code = main(["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib,mtbench", "--out-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == "error: the traces hold no prompt set 'mtbench' (they hold stdlib)"
    assert not out.exists()


def test_loop_refuses_a_set_the_traces_lack_before_fitting(capsys, tmp_path, no_model, monkeypatch):
    import goose_theory.fit

    def no_fit(*args, **kwargs):
        raise AssertionError("the traces were fitted before the prompt sets were checked")
    monkeypatch.setattr(goose_theory.fit, "fit_traces", no_fit)
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text('{"prompt": "def f(x):"}\n')
    code = main(["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", str(jsonl), "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: the traces hold no prompt set {str(jsonl)!r} (they hold stdlib)"]
    assert not (tmp_path / "o").exists()


def test_loop_matches_a_jsonl_set_by_its_stem(tmp_path, no_model):
    # traces label a JSONL set by its file stem: --bench some/dir/stdlib.jsonl is the traces'
    # "stdlib", so the guard lets it through and the loop goes on to load the model
    jsonl = tmp_path / "stdlib.jsonl"
    jsonl.write_text('{"prompt": "def f(x):"}\n')
    with pytest.raises(AssertionError, match="before the model loads"):
        main(["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", str(jsonl), "--out-dir", str(tmp_path / "o")])


@pytest.mark.slow  # the real model: goose validate end to end, as README's "Using it" shows it
def test_validate_runs_a_topology_against_goose_and_ar(capsys, tmp_path):
    import json

    from goose_theory.acceptance import Acceptance
    from goose_theory.optimize import build_topology
    from goose_theory.topology import save_topology
    topo = tmp_path / "tree.json"
    save_topology(build_topology("optimal", Acceptance.parse(0.8, 0.2), budget=4).topology, topo)
    out = tmp_path / "validation.json"
    code = main(["validate", "--topology", str(topo), "--bench", "stdlib", "--limit", "1", "--max-new-tokens", "12",
                 "--out", str(out), "--trace-dir", str(tmp_path / "traces"), "--json"])
    assert code == 0, capsys.readouterr().err
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["method"] for r in rows} >= {"ar", "goose@4", "topology:tree"} and all(r["lossless"] for r in rows)
    assert json.loads(out.read_text())["rows"] == rows
    tree, = (r for r in rows if r["method"] == "topology:tree")
    assert isinstance(tree["vs_goose_pct"], float)  # against goose@4 on the same prompt (one: no interval)
    _check_validation_trace(tmp_path / "traces" / "validation-stdlib.parquet", rows)


@pytest.mark.slow  # the prior is built once per model into the goose cache (test_lossless builds it too)
def test_validate_with_the_prior_runs_goose_and_the_topology_with_it(capsys, tmp_path):
    import json

    from goose_theory.acceptance import Acceptance
    from goose_theory.optimize import build_topology
    from goose_theory.topology import save_topology
    topo = tmp_path / "tree.json"
    save_topology(build_topology("optimal", Acceptance.parse(0.8, 0.2), budget=4).topology, topo)
    code = main(["validate", "--topology", str(topo), "--bench", "mtbench", "--limit", "1", "--max-new-tokens", "16",
                 "--prior", "--json"])
    assert code == 0, capsys.readouterr().err
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["method"] for r in rows} == {"ar", "goose+prior@4", "goose+prior", "goose", "topology:tree+prior"}
    assert all(r["lossless"] for r in rows)


def _check_validation_trace(path, rows) -> None:
    """The run's trace is a valid trace file whose methods and per-method tau are the table's."""
    from goose_theory.traceio import open_trace, trace_metadata
    pf = open_trace(path)
    table = pf.read().to_pandas()
    roots = table[table["node"] == 0]
    assert set(roots["method"]) == {r["method"] for r in rows}
    for r in rows:
        mine = roots[roots["method"] == r["method"]]
        assert mine["tau"].sum() / len(mine) == pytest.approx(r["measured_tau"])
    config = trace_metadata(pf)["config"]
    assert config["holdout"] is True and set(config["prompt_ids"]) == set(roots["prompt_id"])


@pytest.mark.slow  # the main job end to end on one set, small: CI runs the tests, not `make run`
@pytest.mark.parametrize("prior", [False, True], ids=["plain", "prior"])  # `goose loop`; `make run`'s
def test_loop_end_to_end_on_one_set(capsys, tmp_path, prior):
    import json

    latency = _latency_file(tmp_path)  # a given profile: nothing is measured, the budget is fixed by it
    out = tmp_path / "run"
    extra = ["--prior", "--traces", str(pathlib.Path(__file__).parents[1] / "traces" / "prior")] if prior else []
    code = main(["loop", "--bench", "stdlib", "--limit", "1", "--max-new-tokens", "16", "--latency", str(latency),
                 "--out-dir", str(out), "--json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "the prior (" not in captured.err  # no prior-mismatch note: each kind of traces fits its own loop
    report = json.loads(captured.out)
    saved = json.loads((out / "validation.json").read_text())
    assert saved["rows"] == report["rows"] and saved["latency"] == latency
    methods = {r["method"] for r in report["rows"]}
    suffix = "+prior" if prior else ""
    assert {"ar", "goose", f"topology:topology-stdlib{suffix}", f"topology:topology-stdlib-regimes{suffix}"} <= methods
    assert ("goose+prior" in methods) == prior
    assert all(r["lossless"] for r in report["rows"]) and (out / "report.md").exists()
    _check_validation_trace(out / "validation-stdlib.parquet", report["rows"])
    regimes = json.loads((out / "topology-stdlib-regimes.json").read_text())
    assert regimes["budget"] == json.loads((out / "topology-stdlib.json").read_text())["budget"]
    assert "unmatched" in regimes["regimes"]
    # report.md names the regime exports, and no longer says the set's file holds the recommended tree
    text = (out / "report.md").read_text()
    assert f"one tree, predicted tau {json.loads((out / 'topology-stdlib.json').read_text())['predicted_tau']:.3f}" in text
    assert f"-> {out / 'topology-stdlib-regimes.json'}" in text and f"-> {out / 'topology-stdlib.json'}\n" not in text
    # the exported files and goose are replayed on the fitted prompts' texts (the shipped stdlib traces)
    # (with the prior, goose@60 as published is neither predicted nor replayed: the fit is of +prior drafting)
    for row in report["rows"]:
        if row["method"] == "ar" or (prior and row["method"] == "goose"):
            assert row["replayed_tau"] is None and row["predicted_tau"] is None  # JSON has no NaN
        else:
            assert 1 <= row["replayed_tau"] <= 16 and isinstance(row["replayed_error_pct"], float)


@pytest.mark.parametrize("name", ["validation-stdlib.parquet", "validation.json"])
def test_loop_refuses_a_blocked_output_file_before_the_fit(capsys, tmp_path, no_model, name):
    """A folder where the validation trace or table goes: refused before the fit and the model load
    (it was refused only after them, 50 s in), not after the minutes of validation either."""
    out = tmp_path / "run"
    (out / name).mkdir(parents=True)
    _fails(capsys, ["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib", "--limit", "1",
                    "--latency", _latency_file(tmp_path), "--out-dir", str(out)], f"--out-dir: {out / name} is a directory")
    assert [p.name for p in out.iterdir()] == [name]


@pytest.mark.parametrize("flag, value, message", [("--model", "README.md", "is a file, not a model folder"),
                                                  ("--model", "no/such/folder", "does not exist")])
def test_loop_refuses_a_bad_model_before_the_fit(capsys, tmp_path, no_model, flag, value, message):
    _fails(capsys, ["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib", flag, value,
                    "--out-dir", str(tmp_path / "out")], message)  # one line: no "[goose] fitting" before it
    assert not (tmp_path / "out").exists()


def test_loop_refuses_a_bad_latency_file_before_the_model_loads(capsys, tmp_path, no_model):
    bad = tmp_path / "lat.json"
    bad.write_text('{"schema": "goose-latency/1", "sizes": [1, 2], "seconds": [0.02]}')
    _fails(capsys, ["loop", "--latency", str(bad), "--out-dir", str(tmp_path / "out")], "missing key 'draft_s'")
    assert not (tmp_path / "out").exists()


def test_loop_refuses_two_entries_of_one_set_and_a_missing_file(capsys, tmp_path, no_model):
    # stdlib and a file stdlib.jsonl are both the traces' "stdlib": one would silently replace the other
    jsonl = tmp_path / "stdlib.jsonl"
    jsonl.write_text('{"prompt": "def f(x):"}\n')
    _fails(capsys, ["loop", "--bench", f"stdlib,{jsonl}", "--out-dir", str(tmp_path / "out")],
           f"'stdlib' and '{jsonl}' are both the set 'stdlib'")
    _fails(capsys, ["loop", "--bench", str(tmp_path / "nope.jsonl"), "--out-dir", str(tmp_path / "out")], "nope.jsonl")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # the real model records traces of a JSONL set, then validate holds their prompts out
def test_validate_holds_out_the_fitted_prompts_of_a_jsonl_set(capsys, tmp_path):
    import json

    from goose_runtime.fit_cli import main as fit_main
    rows = [json.dumps({"id": f"q{i}", "prompt": f"def f{i}(x):\n    return x + {i}\n"}) + "\n" for i in range(3)]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    fitted, full = tmp_path / "a" / "mine.jsonl", tmp_path / "b" / "mine.jsonl"   # both are the set "mine"
    fitted.write_text("".join(rows[:2]))
    full.write_text("".join(rows))
    trace = tmp_path / "mine.parquet"
    assert main(["decode", "--method", "goose@8", "--bench", str(fitted), "--max-new-tokens", "16",
                 "--trace-out", str(trace)]) == 0
    assert fit_main([str(trace), "--out", str(tmp_path / "fit")]) == 0
    capsys.readouterr()
    topo = next((tmp_path / "fit").glob("topology-*.json"))
    assert main(["validate", "--topology", str(topo), "--bench", str(full), "--limit", "5",
                 "--max-new-tokens", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["rows"]
    assert {r["prompts"] for r in out} == {1}   # q0 and q1 were fitted: only q2 is held out


def test_display_row_puts_intervals_inline_and_blanks_what_does_not_apply():
    from goose_runtime.validate import ValidationRow
    from goose_runtime.validate_cli import display_row
    nan = float("nan")
    topo = ValidationRow("stdlib", "topology:t", 16, 3.83, 4.48, 3.902, 2.44, 6.25, -1.846, 110.8, 2.95, True, 5, 160,
                         0.66, 7.2, 2.1, 64.4, 0.0, -3.7, 3.9)
    row = display_row(topo)
    assert row["measured [95% CI]"] == "3.902 [2.44, 6.25]" and row["error"] == "-1.8%" and row["noise"] == "+-64%"
    assert row["predicted"] == "3.830" and row["realised"] == "4.480"
    assert row["vs goose@B [95% CI]"] == "+0.0% [-3.7%, +3.9%]" and row["speedup"] == "2.95x" and row["= ar"] == "yes"
    ar = ValidationRow("stdlib", "ar", 0, nan, nan, 1.0, nan, nan, nan, 37.6, 1.0, False, 1, 128)
    row = display_row(ar)
    assert row["predicted"] == row["realised"] == row["error"] == row["noise"] == row["vs goose@B [95% CI]"] == ""
    assert display_row(topo, "goose+prior@B")["vs goose+prior@B [95% CI]"] == "+0.0% [-3.7%, +3.9%]"  # --prior's baseline
    assert row["psi"] == ""
    assert row["measured [95% CI]"] == "1.000" and row["= ar"] == "NO"
    one = ValidationRow("stdlib", "topology:t", 16, 3.83, 4.48, 3.902, nan, nan, -1.846, 110.8, 2.95, True, 1, 160,
                        0.66, nan, 2.1, 64.4, -11.8, nan, nan)  # one prompt: no interval anywhere
    assert display_row(one)["vs goose@B [95% CI]"] == "-11.8%" and display_row(one)["measured [95% CI]"] == "3.902"
    jsonl = ValidationRow("/data/sets/my-set.jsonl", "ar", 0, nan, nan, 1.0, nan, nan, nan, 37.6, 1.0, True, 1, 128)
    assert display_row(jsonl)["set"] == "my-set"  # a JSONL set by its label, as its traces name it (not its path)


def test_validate_refuses_two_topology_files_of_one_name(capsys, tmp_path, no_model):
    from goose_theory.topology import Topology, save_topology
    for folder, nodes in (("a", [(-1, "root", 0), (0, "spine", 0)]), ("b", [(-1, "root", 0), (0, "transition", 0)])):
        (tmp_path / folder).mkdir()
        save_topology(Topology.from_nodes(nodes), tmp_path / folder / "tree.json")
    _fails(capsys, ["validate", "--topology", str(tmp_path / "a/tree.json"), str(tmp_path / "b/tree.json"),
                    "--out", str(tmp_path / "out.json")], "both labelled 'topology:tree'")
    assert not (tmp_path / "out.json").exists()
    _fails(capsys, ["validate", "--topology", str(tmp_path / "absent.json")], "absent.json")  # a missing file too


def _exported(budget: int) -> tuple:
    """The loop's regime fit of the shipped stdlib traces at ``budget`` (made before any file is written)."""
    from goose_runtime.fit_cli import regime_exports
    return regime_exports(["traces/stdlib-b8.parquet"], bench="stdlib", budget=budget, context="test")


def _saved(exported: tuple, path) -> list[str]:
    """``exported``'s two files as the loop writes them (fit_report.write_report): [single, regime file]."""
    from goose_theory.regimefile import save_regime_topologies
    return [str(path), save_regime_topologies(exported[0], exported[1], str(path))]


def test_the_replay_pick_loads_the_prompt_set_as_given_not_its_label(tmp_path, monkeypatch):
    # a JSONL set is labelled by its stem in traces, but only its path loads its prompts
    import goose_runtime.replayfit as replayfit
    from goose_runtime.validate_cli import _regime_topologies
    seen = []
    monkeypatch.setattr(replayfit, "pick_by_replay", lambda bundle, pair, bench, **kw: seen.append(bench))
    exported = _exported(8)
    paths = _regime_topologies(exported, "stdlib", _saved(exported, tmp_path / "topology-stdlib.json"), 8,
                               bundle=object(), config=None, prompt_set="sets/stdlib.jsonl")
    assert seen == ["sets/stdlib.jsonl"] and len(paths) == 2


def test_the_loop_notes_a_fit_far_from_the_exported_budget(tmp_path, capsys):
    # rates harvested by smaller trees run low (docs/two-regime.md section 14): the loop says so
    from goose_runtime.validate_cli import _regime_topologies
    from goose_theory.topology import load_topology
    for budget, noted in ((15, True), (10, False)):
        exported = _exported(budget)
        paths = _regime_topologies(exported, "stdlib", _saved(exported, tmp_path / f"topology-stdlib-{budget}.json"),
                                   budget)
        assert load_topology(paths[1]).meta["provenance"]["regime_budgets"] == [8, 8]  # goose@8, iso:2@8
        err = capsys.readouterr().err
        assert ("note: fitted on traces at budget 8, exported at 15" in err) is noted


def test_the_loop_notes_traces_recorded_without_the_prior_when_it_validates_with_it(tmp_path, capsys):
    # the prior fills slots a table alone leaves empty, so fit and validation must agree on it
    from goose_runtime.validate_cli import _regime_topologies
    for prior in (True, False):
        exported = _exported(8)
        _regime_topologies(exported, "stdlib", _saved(exported, tmp_path / f"topology-stdlib-{prior}.json"), 8,
                           prior=prior)
        err = capsys.readouterr().err
        assert ("note: fitted on traces recorded without the prior (goose@8, iso:2@8), validated with it" in err) is prior


@pytest.mark.parametrize("argv, message", [
    (["loop", "--latency", ""], "--latency is empty"),  # fitted, loaded the model, used the cached profile
    (["loop", "--refresh-latency", "--latency", ""], "--latency is empty"),
    (["validate", "--topology", ""], "--topology is empty"),
    (["validate", "--topology", "t.json", "--model", ""], "--model is empty"),
])
def test_empty_path_flags_are_refused_before_any_work(capsys, tmp_path, no_model, argv, message):
    _fails(capsys, [*argv, "--out-dir" if argv[0] == "loop" else "--out", str(tmp_path / "out")], message)
    assert not (tmp_path / "out").exists()


def test_validate_refuses_an_out_that_is_one_of_its_topologies(capsys, tmp_path, no_model):
    # the table's JSON would replace the topology file it validated
    from goose_theory.topology import Topology, save_topology
    topo = tmp_path / "t.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]), topo)
    before = topo.read_bytes()
    _fails(capsys, ["validate", "--topology", str(topo), "--out", str(topo)], "is also --topology")
    assert topo.read_bytes() == before


@pytest.mark.parametrize("command", [["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib"],
                                     ["validate", "--topology", "t.json"]])
def test_a_model_folder_without_config_json_is_refused_before_the_fit(capsys, tmp_path, no_model, command):
    """`goose loop --model emptydir` fitted first and failed at the load (three lines on stderr)."""
    (tmp_path / "emptydir").mkdir()
    _fails(capsys, [*command, "--model", str(tmp_path / "emptydir"), "--out-dir" if command[0] == "loop" else
                    "--trace-dir", str(tmp_path / "out")], "holds no config.json, so it is not a model folder")
    assert not (tmp_path / "out").exists()


def _tiny_validate_inputs(tmp_path) -> tuple[str, str]:
    import json

    from goose_theory.topology import Topology, save_topology
    topo, bench = tmp_path / "tree.json", tmp_path / "set.jsonl"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)]), topo)
    bench.write_text("".join(json.dumps({"id": i, "prompt": f"abc abc abc {i}"}) + "\n" for i in "ab"))
    return str(topo), str(bench)


def test_validate_leaves_no_trace_dir_when_the_run_fails(capsys, tmp_path, monkeypatch):
    """The trace folder was made before the model load, and stayed behind when that failed."""
    import goose_runtime.model as model_mod

    def fail(*args, **kwargs):
        raise model_mod.ModelLoadError("cannot load model 'x': broken weights")
    monkeypatch.setattr(model_mod, "load_model", fail)
    topo, bench = _tiny_validate_inputs(tmp_path)
    _fails(capsys, ["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--trace-dir",
                    str(tmp_path / "new")], "broken weights")
    assert not (tmp_path / "new").exists()


def test_validate_makes_the_trace_dir_with_its_first_trace(capsys, tmp_path, monkeypatch):
    import goose_runtime.model as model_mod

    bundle = model_mod.tiny_random_bundle(seed=1)
    monkeypatch.setattr(model_mod, "load_model", lambda *a, **k: bundle)
    topo, bench = _tiny_validate_inputs(tmp_path)
    assert main(["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--max-new-tokens", "6",
                 "--no-holdout", "--trace-dir", str(tmp_path / "new" / "deep"), "--json"]) == 0, capsys.readouterr().err
    assert [p.name for p in (tmp_path / "new" / "deep").iterdir()] == ["validation-set.parquet"]



def test_validate_notes_fit_traces_of_another_model(capsys, tmp_path, monkeypatch):
    import goose_runtime.model as model_mod
    from goose_theory.topology import load_topology, save_topology

    bundle = model_mod.tiny_random_bundle(seed=1)
    monkeypatch.setattr(model_mod, "load_model", lambda *a, **k: bundle)
    topo, bench = _tiny_validate_inputs(tmp_path)  # fitted, by its provenance, on the shipped SmolLM2 trace
    save_topology(load_topology(topo).with_meta(provenance={"traces": ["traces/stdlib-b8.parquet"]}), topo)
    assert main(["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--max-new-tokens", "6",
                 "--trace-dir", str(tmp_path / "v"), "--json"]) == 0
    assert (f"note: the fit traces were decoded with model SmolLM2-135M-Instruct, this run with {bundle.name}"
            in capsys.readouterr().err)

def _fitted_inputs(tmp_path, name: str = "held") -> tuple[str, str, str]:
    """(topology, JSONL set, fit trace): a topology whose provenance trace holds every prompt of the
    set ``name`` (ids g/p00000, g/p00001), so holding them out leaves none."""
    import json

    from goose_theory.synthetic import SyntheticSpec, write_synthetic
    from goose_theory.topology import Topology, save_topology
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    (tmp_path / "fit").mkdir(exist_ok=True)
    trace, topo = tmp_path / "fit" / f"{name}.parquet", tmp_path / "fit" / "topology.json"
    bench = tmp_path / f"{name}.jsonl"
    write_synthetic(trace, SyntheticSpec(0.6, 0.1, (tree,), prompts=2, cycles=5, benchmark=name, prompt_group="g"),
                    seed=1)
    save_topology(tree.with_meta(provenance={"traces": [str(trace)]}), topo)
    bench.write_text("".join(json.dumps({"id": f"g/p{i:05d}", "prompt": f"print({i})"}) + "\n" for i in range(2)))
    return str(topo), str(bench), str(trace)


def _fresh_set(tmp_path, name: str = "fresh") -> str:
    import json
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"abc abc {i}"}) + "\n" for i in range(2)))
    return str(path)


def test_validate_refuses_a_set_with_no_held_out_prompt_before_the_model_loads(capsys, tmp_path, no_model):
    """Every prompt of the set was fitted: validate ran nothing (an all-NaN table, --out written with
    0 prompts) or, with --trace-dir, failed with a traceback after the earlier sets' traces were written."""
    topo, bench, _ = _fitted_inputs(tmp_path)
    message = (f"--bench {bench}: no held-out prompts (all 2 are in the fit traces of {topo}); "
               "--no-holdout runs them anyway")
    for sets, extra in ((bench, []), (f"{_fresh_set(tmp_path)},{bench}", ["--trace-dir", str(tmp_path / "td")])):
        _fails(capsys, ["validate", "--topology", topo, "--bench", sets, "--limit", "1", "--out",
                        str(tmp_path / "v.json"), *extra], message)
        assert not (tmp_path / "v.json").exists() and not (tmp_path / "td").exists()
    with pytest.raises(AssertionError, match="before the model loads"):  # --no-holdout: they run (the model loads)
        main(["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--no-holdout"])


def test_loop_refuses_a_set_with_no_held_out_prompt_before_the_fit(capsys, tmp_path, no_model, monkeypatch):
    """The loop fitted, loaded the model, wrote report.md, the charts and the topologies, then failed
    with a traceback (nothing to record) at the validation trace."""
    import goose_theory.fit

    def no_fit(*args, **kwargs):
        raise AssertionError("the traces were fitted before the held-out prompts were checked")
    monkeypatch.setattr(goose_theory.fit, "fit_traces", no_fit)
    _, bench, trace = _fitted_inputs(tmp_path)
    out = tmp_path / "out"
    _fails(capsys, ["loop", "--traces", str(tmp_path / "fit" / "*.parquet"), "--bench", bench, "--limit", "1",
                    "--latency", _latency_file(tmp_path), "--out-dir", str(out)],
           f"--bench {bench}: no held-out prompts (all 2 are in the fit traces of --traces {tmp_path / 'fit'}/*.parquet)")
    assert not out.exists()


def _validate_argv(topo: str, bench: str, *extra: str) -> list[str]:
    return ["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--max-new-tokens", "4", *extra]


@pytest.mark.parametrize("case", ["out_is_trace", "out_is_trace_dir", "out_above_trace_dir", "out_is_bench",
                                  "out_is_fit_trace", "trace_is_fit_trace"])
def test_validate_refuses_outputs_that_replace_its_inputs_or_each_other(capsys, tmp_path, no_model, case):
    """Each ran to the end and replaced an input or its own trace (or failed after the run: --out a
    folder the traces made); now one line before the model loads, every file as it was."""
    topo, _, fit_trace = _fitted_inputs(tmp_path, name="fresh")  # the fit holds g/p..., the set q0, q1: held out
    bench = _fresh_set(tmp_path)
    named = tmp_path / "fit" / "validation-fresh.parquet"  # a fit trace under the name validate gives its own
    shutil.copy(fit_trace, named)
    from goose_theory.topology import load_topology, save_topology
    save_topology(load_topology(topo).with_meta(provenance={"traces": [fit_trace, str(named)]}), topo)
    td = tmp_path / "td"
    argv, message = {
        "out_is_trace": (["--out", str(td / "validation-fresh.parquet"), "--trace-dir", str(td)],
                         f"is also the validation trace of set 'fresh' in --trace-dir {td}"),
        "out_is_trace_dir": (["--out", str(td), "--trace-dir", str(td)], f"--out {td} is also --trace-dir {td}"),
        "out_above_trace_dir": (["--out", str(td), "--trace-dir", str(td / "deeper")],
                                f"--out {td} is also --trace-dir"),
        "out_is_bench": (["--out", bench], f"--out {bench} is also --bench"),
        "out_is_fit_trace": (["--out", fit_trace], f"--out {fit_trace} is also a fit trace of --topology {topo}"),
        "trace_is_fit_trace": (["--trace-dir", str(tmp_path / "fit")],
                               f"the validation trace {named} is also a fit trace"),
    }[case]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    _fails(capsys, _validate_argv(topo, bench, *argv), message)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before and not td.exists()


def test_validate_reruns_into_a_trace_dir_holding_its_own_earlier_trace(tmp_path, no_model):
    # only a fit trace under validate's name is refused: the last run's validation trace is replaced
    topo, _, _ = _fitted_inputs(tmp_path, name="other")
    bench = _fresh_set(tmp_path)
    (tmp_path / "td").mkdir()
    shutil.copy(tmp_path / "fit" / "other.parquet", tmp_path / "td" / "validation-fresh.parquet")
    with pytest.raises(AssertionError, match="before the model loads"):
        main(_validate_argv(topo, bench, "--trace-dir", str(tmp_path / "td"), "--out", str(tmp_path / "v.json")))


@pytest.mark.parametrize("spec", ["folder", "glob"])
def test_loop_refuses_an_out_dir_whose_validation_traces_the_traces_would_fit(capsys, tmp_path, no_model, spec):
    """--out-dir = the --traces folder was accepted: the next run fitted its own validation-*.parquet."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy("traces/stdlib-b8.parquet", folder / "stdlib.parquet")
    traces = str(folder) if spec == "folder" else str(folder / "*.parquet")
    _fails(capsys, ["loop", "--traces", traces, "--bench", "stdlib", "--limit", "1", "--latency",
                    _latency_file(tmp_path), "--out-dir", str(folder)],
           f"--out-dir {folder}: its validation trace validation-stdlib.parquet would be one of the --traces {traces}")
    assert [p.name for p in folder.iterdir()] == ["stdlib.parquet"]


def test_a_shuffled_set_holds_out_the_prompts_fitted_on_its_source():
    # humaneval-shuffled is humaneval's prompts in another order (same ids, same texts): the fitted
    # HumanEval/0..15 of the shipped traces were run as held out (review, 3 Dec)
    from goose_runtime.prompts import load_prompts
    from goose_runtime.validate import fitted_prompt_ids, holdout_prompts

    fitted = fitted_prompt_ids(["traces/humaneval-b8.parquet"], "humaneval")
    assert len(fitted) == 16 and fitted_prompt_ids(["traces/humaneval-b8.parquet"], "humaneval-shuffled") == fitted
    held = holdout_prompts("humaneval-shuffled", ["traces/humaneval-b8.parquet"], limit=200)
    assert len(held) == len(load_prompts("humaneval")) - 16 and not {p.id for p in held} & fitted


def test_validate_refuses_to_hold_out_with_a_missing_fit_trace(capsys, tmp_path, no_model):
    # a moved topology's provenance names traces that are gone: their prompts ran, reported as held
    # out with a noise band (review, 3 Dec); now refused, and --no-holdout is the way to run them
    from goose_theory.topology import Topology, save_topology
    topo = tmp_path / "t.json"
    gone = tmp_path / "elsewhere" / "stdlib-b8.parquet"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]).with_meta(
        provenance={"traces": [str(gone)]}), topo)
    _fails(capsys, ["validate", "--topology", str(topo), "--bench", "stdlib", "--limit", "1"],
           f"{topo}: its fit trace {gone} is missing, so its prompts cannot be held out; --no-holdout runs")


def test_validate_checks_room_for_its_deepest_tree_before_the_first_set(capsys, tmp_path, monkeypatch):
    # a 50-deep spine needs 52 positions past the new tokens; the pre-check left 32, so the first set
    # ran and wrote its trace before the second failed (review, 3 Dec)
    import json

    import goose_runtime.model as model_mod
    from goose_theory.topology import Topology, save_topology

    bundle = model_mod.tiny_random_bundle(seed=1)  # context 2048, byte tokens
    monkeypatch.setattr(model_mod, "load_model", lambda *a, **k: bundle)
    deep = tmp_path / "deep.json"
    save_topology(Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(50)], max_spine=50), deep)
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "a", "prompt": "abc abc"}) + "\n")
    (tmp_path / "long.jsonl").write_text(json.dumps({"id": "z", "prompt": "x" * 2000}) + "\n")
    _fails(capsys, ["validate", "--topology", str(deep), "--bench", f"{tmp_path / 'a.jsonl'},{tmp_path / 'long.jsonl'}",
                    "--limit", "1", "--max-new-tokens", "8", "--no-holdout", "--trace-dir", str(tmp_path / "vt")],
           "prompt 'z' has 2000 tokens; with 8 new tokens and 52 positions for a drafted tree it does not fit")
    assert not (tmp_path / "vt").exists()
