"""``goose validate``: bad input is one line and exit code 2, nothing written; and the command end to
end on the real model (``slow``). Checks shared with ``goose loop`` are tested here with both commands.

The fast tests fail before any model loads (the ``no_model`` fixture makes sure of it)."""
from __future__ import annotations

import json
import shutil

import pytest

from goose_runtime.cli import main
from tests.clirun import check_validation_trace, fails, fitted_inputs


def test_validate_names_the_topology_whose_fit_trace_is_unreadable(capsys, tmp_path, no_model):
    # the trace's own error did not say where it came from, and it came after the model load
    from goose_theory.topology import Topology, save_topology
    (tmp_path / "notes.parquet").write_text("not parquet")
    topo = tmp_path / "t.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]).with_meta(
        provenance={"traces": [str(tmp_path / "notes.parquet")]}), topo)
    fails(capsys, ["validate", "--topology", str(topo), "--bench", "stdlib", "--limit", "1"],
           f"--topology {topo}: provenance.traces: {tmp_path / 'notes.parquet'}: not a readable parquet file")


@pytest.mark.parametrize("command", [["loop"], ["validate", "--topology", "t.json"]])
@pytest.mark.parametrize("flag", ["--threads", "--limit"])
def test_counts_below_one_are_refused_before_the_model_loads(capsys, tmp_path, no_model, command, flag):
    fails(capsys, [*command, flag, "0", "--out-dir" if command == ["loop"] else "--out", str(tmp_path / "out")],
           f"{flag} must be at least 1, got 0")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["loop"], ["validate", "--topology", "t.json"]])
def test_max_new_tokens_below_one_is_refused_before_the_model_loads(capsys, tmp_path, no_model, command):
    fails(capsys, [*command, "--max-new-tokens", "0", "--out-dir" if command == ["loop"] else "--out",
                    str(tmp_path / "out")], "--max-new-tokens must be at least 1, got 0")
    assert not (tmp_path / "out").exists()


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
    check_validation_trace(tmp_path / "traces" / "validation-stdlib.parquet", rows)


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
    row, ranged = display_row(topo), display_row(ValidationRow(**{**topo.to_dict(), "predicted_low": 3.51,
                                                                  "predicted_high": 4.286}))  # the file's interval
    assert row["measured [95% CI]"] == "3.902 [2.44, 6.25]" and row["error"] == "-1.8%" and row["noise"] == "+-64%"
    assert ranged["predicted [95% CI]"] == "3.830 [3.51, 4.29]" and (row["predicted [95% CI]"], row["realised"]) == ("3.830", "4.480")
    assert row["vs goose@B [95% CI]"] == "+0.0% [-3.7%, +3.9%]" and row["= ar"] == "yes" and row["speedup"] == "2.95x"
    ar = ValidationRow("stdlib", "ar", 0, nan, nan, 1.0, nan, nan, nan, 37.6, 1.0, False, 1, 128, predicted_low=1.2,
                       predicted_high=1.4)  # an interval without its prediction (a hand edit) is not printed alone
    row = display_row(ar)
    assert row["predicted [95% CI]"] == row["realised"] == row["error"] == row["noise"] == row["vs goose@B [95% CI]"] == ""
    assert display_row(topo, "goose+prior@B")["vs goose+prior@B [95% CI]"] == "+0.0% [-3.7%, +3.9%]"  # --prior's baseline
    assert row["psi"] == "" and row["measured [95% CI]"] == "1.000" and row["= ar"] == "NO"
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
    fails(capsys, ["validate", "--topology", str(tmp_path / "a/tree.json"), str(tmp_path / "b/tree.json"),
                    "--out", str(tmp_path / "out.json")], "both labelled 'topology:tree'")
    assert not (tmp_path / "out.json").exists()
    fails(capsys, ["validate", "--topology", str(tmp_path / "absent.json")], "absent.json")  # a missing file too


@pytest.mark.parametrize("argv, message", [
    (["loop", "--latency", ""], "--latency is empty"),  # fitted, loaded the model, used the cached profile
    (["loop", "--refresh-latency", "--latency", ""], "--latency is empty"),
    (["validate", "--topology", ""], "--topology is empty"),
    (["validate", "--topology", "t.json", "--model", ""], "--model is empty"),
])
def test_empty_path_flags_are_refused_before_any_work(capsys, tmp_path, no_model, argv, message):
    fails(capsys, [*argv, "--out-dir" if argv[0] == "loop" else "--out", str(tmp_path / "out")], message)
    assert not (tmp_path / "out").exists()


def test_validate_refuses_an_out_that_is_one_of_its_topologies(capsys, tmp_path, no_model):
    # the table's JSON would replace the topology file it validated
    from goose_theory.topology import Topology, save_topology
    topo = tmp_path / "t.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]), topo)
    before = topo.read_bytes()
    fails(capsys, ["validate", "--topology", str(topo), "--out", str(topo)], "is also --topology")
    assert topo.read_bytes() == before


@pytest.mark.parametrize("command", [["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib"],
                                     ["validate", "--topology", "t.json"]])
def test_a_model_folder_without_config_json_is_refused_before_the_fit(capsys, tmp_path, no_model, command):
    """`goose loop --model emptydir` fitted first and failed at the load (three lines on stderr)."""
    (tmp_path / "emptydir").mkdir()
    fails(capsys, [*command, "--model", str(tmp_path / "emptydir"), "--out-dir" if command[0] == "loop" else
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
    fails(capsys, ["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--trace-dir",
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
    out, err = capsys.readouterr()  # --no-holdout said "held-out" and its rows looked like a held-out check
    assert json.loads(out)["held_out"] is False and "held-out" not in err.split("validating on ")[1].split("\n")[0]
    assert err.rstrip().endswith("note: --no-holdout: the prompts may be ones the fit used, so predicted against "
                                 "measured tau is no held-out check")


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


def _fresh_set(tmp_path, name: str = "fresh") -> str:
    import json
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"abc abc {i}"}) + "\n" for i in range(2)))
    return str(path)


def test_validate_refuses_a_set_with_no_held_out_prompt_before_the_model_loads(capsys, tmp_path, no_model):
    """Every prompt of the set was fitted: validate ran nothing (an all-NaN table, --out written with
    0 prompts) or, with --trace-dir, failed with a traceback after the earlier sets' traces were written."""
    topo, bench, _ = fitted_inputs(tmp_path)
    message = (f"--bench {bench}: no held-out prompts (all 2 are in the fit traces of {topo}); "
               "--no-holdout runs them anyway")
    for sets, extra in ((bench, []), (f"{_fresh_set(tmp_path)},{bench}", ["--trace-dir", str(tmp_path / "td")])):
        fails(capsys, ["validate", "--topology", topo, "--bench", sets, "--limit", "1", "--out",
                        str(tmp_path / "v.json"), *extra], message)
        assert not (tmp_path / "v.json").exists() and not (tmp_path / "td").exists()
    with pytest.raises(AssertionError, match="before the model loads"):  # --no-holdout: they run (the model loads)
        main(["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--no-holdout"])


def _validate_argv(topo: str, bench: str, *extra: str) -> list[str]:
    return ["validate", "--topology", topo, "--bench", bench, "--limit", "1", "--max-new-tokens", "4", *extra]


@pytest.mark.parametrize("case", ["out_is_trace", "out_is_trace_dir", "out_above_trace_dir", "out_is_bench",
                                  "out_is_fit_trace", "trace_is_fit_trace"])
def test_validate_refuses_outputs_that_replace_its_inputs_or_each_other(capsys, tmp_path, no_model, case):
    """Each ran to the end and replaced an input or its own trace (or failed after the run: --out a
    folder the traces made); now one line before the model loads, every file as it was."""
    topo, _, fit_trace = fitted_inputs(tmp_path, name="fresh")  # the fit holds g/p..., the set q0, q1: held out
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
    fails(capsys, _validate_argv(topo, bench, *argv), message)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before and not td.exists()


def test_validate_reruns_into_a_trace_dir_holding_its_own_earlier_trace(tmp_path, no_model):
    # only a fit trace under validate's name is refused: the last run's validation trace is replaced
    topo, _, _ = fitted_inputs(tmp_path, name="other")
    bench = _fresh_set(tmp_path)
    (tmp_path / "td").mkdir()
    shutil.copy(tmp_path / "fit" / "other.parquet", tmp_path / "td" / "validation-fresh.parquet")
    with pytest.raises(AssertionError, match="before the model loads"):
        main(_validate_argv(topo, bench, "--trace-dir", str(tmp_path / "td"), "--out", str(tmp_path / "v.json")))


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
    fails(capsys, ["validate", "--topology", str(deep), "--bench", f"{tmp_path / 'a.jsonl'},{tmp_path / 'long.jsonl'}",
                    "--limit", "1", "--max-new-tokens", "8", "--no-holdout", "--trace-dir", str(tmp_path / "vt")],
           "prompt 'z' of long has 2000 tokens; with 8 new tokens and 52 positions for a drafted tree it does not fit")
    assert not (tmp_path / "vt").exists()
