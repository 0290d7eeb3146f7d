"""``goose loop`` (the main job): bad input is one line and exit code 2, nothing written, before the
fit or the model load where it can be; the two-regime export's notes; and the loop end to end on one
set of the real model (``slow``; the full loop runs in `make run`).

The fast tests fail before any model loads (the ``no_model`` fixture makes sure of it)."""
from __future__ import annotations

import pathlib
import shutil

import pytest

from goose_runtime.cli import main
from tests.clirun import check_validation_trace, fails, fitted_inputs
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


def test_loop_refuses_one_trace_under_two_names(capsys, tmp_path, no_model):
    # a copy's cycles would count twice in the fit, and narrow every interval with it
    for name in ("a.parquet", "b.parquet"):
        shutil.copy("traces/stdlib-b8.parquet", tmp_path / name)
    fails(capsys, ["loop", "--traces", str(tmp_path), "--out-dir", str(tmp_path / "out")],
           f"--traces: {tmp_path / 'b.parquet'}: the same trace as {tmp_path / 'a.parquet'}")
    assert not (tmp_path / "out").exists()


def test_loop_refresh_latency_refuses_an_explicit_latency_file(capsys, tmp_path, no_model):
    fails(capsys, ["loop", "--refresh-latency", "--latency", str(tmp_path / "l.json"), "--out-dir", str(tmp_path)],
           "--refresh-latency re-measures the cached profile; it does not apply with --latency FILE")


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


def test_loop_fits_only_the_files_of_the_sets_asked_for(capsys, tmp_path, no_model, monkeypatch):
    # `goose loop --bench stdlib` on traces/ wrote topology-humaneval.json and -mtbench.json too
    import goose_theory.fit
    fitted = []

    def record(files, **kwargs):
        fitted.extend(files)
        raise AssertionError("stop after the inputs")
    monkeypatch.setattr(goose_theory.fit, "fit_traces", record)
    for name in ("humaneval-b8", "stdlib-b8", "stdlib"):
        shutil.copy(f"traces/{name}.parquet", tmp_path / f"{name}.parquet")
    with pytest.raises(AssertionError, match="stop after the inputs"):
        main(["loop", "--traces", str(tmp_path), "--bench", "stdlib", "--out-dir", str(tmp_path / "o")])
    assert sorted(pathlib.Path(f).name for f in fitted) == ["stdlib-b8.parquet", "stdlib.parquet"]


def test_loop_matches_a_jsonl_set_by_its_stem(tmp_path, no_model):
    # traces label a JSONL set by its file stem: --bench some/dir/stdlib.jsonl is the traces'
    # "stdlib", so the guard lets it through and the loop goes on to load the model
    jsonl = tmp_path / "stdlib.jsonl"
    jsonl.write_text('{"prompt": "def f(x):"}\n')
    with pytest.raises(AssertionError, match="before the model loads"):
        main(["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", str(jsonl), "--out-dir", str(tmp_path / "o")])


@pytest.mark.slow  # the main job end to end on one set, small: CI runs the tests, not `make run`
@pytest.mark.parametrize("prior", [False, True], ids=["plain", "prior"])  # `goose loop`; `make run`'s
def test_loop_end_to_end_on_one_set(capsys, tmp_path, prior):
    import json

    latency = _latency_file(tmp_path)  # a given profile: nothing is measured, the budget is fixed by it
    out = tmp_path / "run"
    extra = ["--prior", "--traces", str(pathlib.Path(__file__).parents[1] / "traces" / "prior")] if prior else []
    code = main(["loop", "--bench", "stdlib", "--limit", "1", "--max-new-tokens", "16", "--latency", str(latency),
                 "--out-dir", str(out), "--regime-draws", "3", "--json", *extra])
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
    assert not list(out.glob("topology-humaneval*")) and not list(out.glob("topology-mtbench*"))  # stdlib only
    check_validation_trace(out / "validation-stdlib.parquet", report["rows"])
    regimes = json.loads((out / "topology-stdlib-regimes.json").read_text())
    assert regimes["budget"] == json.loads((out / "topology-stdlib.json").read_text())["budget"]
    assert "unmatched" in regimes["regimes"]
    [row] = [r for r in report["rows"] if r["method"] == f"topology:topology-stdlib-regimes{suffix}"]  # its interval
    assert [row["predicted_low"], row["predicted_high"]] == regimes["predicted_ci95"] and row["predicted_low"] >= 1
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
    fails(capsys, ["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib", "--limit", "1",
                    "--latency", _latency_file(tmp_path), "--out-dir", str(out)], f"--out-dir: {out / name} is a directory")
    assert [p.name for p in out.iterdir()] == [name]


@pytest.mark.parametrize("flag, value, message", [("--model", "README.md", "is a file, not a model folder"),
                                                  ("--model", "no/such/folder", "does not exist"),
                                                  ("--regime-draws", "-2", "--regime-draws: -2 is not in 0..10000"),
                                                  ("--sample-top-p", "0.9", "--sample-top-p applies with --temperature"),
                                                  ("--temperature", "-1", "--temperature must be 0 (greedy) or in"),
                                                  ("--frequency-penalty", "-3", "--frequency-penalty must be in [-2, 2]")])
def test_loop_refuses_a_bad_model_or_draw_count_before_the_fit(capsys, tmp_path, no_model, flag, value, message):
    fails(capsys, ["loop", "--traces", "traces/stdlib-b8.parquet", "--bench", "stdlib", flag, value,
                    "--out-dir", str(tmp_path / "out")], message)  # one line: no "[goose] fitting" before it
    assert not (tmp_path / "out").exists()


def test_loop_refuses_a_bad_latency_file_before_the_model_loads(capsys, tmp_path, no_model):
    bad = tmp_path / "lat.json"
    bad.write_text('{"schema": "goose-latency/1", "sizes": [1, 2], "seconds": [0.02]}')
    fails(capsys, ["loop", "--latency", str(bad), "--out-dir", str(tmp_path / "out")], "missing key 'draft_s'")
    assert not (tmp_path / "out").exists()


def test_loop_refuses_two_entries_of_one_set_and_a_missing_file(capsys, tmp_path, no_model):
    # stdlib and a file stdlib.jsonl are both the traces' "stdlib": one would silently replace the other
    jsonl = tmp_path / "stdlib.jsonl"
    jsonl.write_text('{"prompt": "def f(x):"}\n')
    fails(capsys, ["loop", "--bench", f"stdlib,{jsonl}", "--out-dir", str(tmp_path / "out")],
           f"'stdlib' and '{jsonl}' are both the set 'stdlib'")
    fails(capsys, ["loop", "--bench", str(tmp_path / "nope.jsonl"), "--out-dir", str(tmp_path / "out")], "nope.jsonl")
    assert not (tmp_path / "out").exists()


def _exported(budget: int) -> tuple:
    """The loop's regime fit of the shipped stdlib traces at ``budget`` (made before any file is written)."""
    from goose_runtime.fit_cli import regime_exports
    return regime_exports(["traces/stdlib-b8.parquet"], bench="stdlib", budget=budget, context="test")


def _saved(exported: tuple, path) -> list[str]:
    """``exported``'s two files as the loop writes them (fit_files.write_report): [single, regime file]."""
    from goose_theory.regimefile import save_regime_topologies
    return [str(path), save_regime_topologies(exported[0], exported[1], str(path))]


def test_the_replay_pick_loads_the_prompt_set_as_given_not_its_label(tmp_path, monkeypatch):
    # a JSONL set is labelled by its stem in traces, but only its path loads its prompts
    import goose_runtime.replayfit as replayfit
    from goose_runtime.loop_cli import _regime_topologies
    seen = []
    monkeypatch.setattr(replayfit, "pick_by_replay", lambda bundle, pair, bench, **kw: seen.append(bench))
    exported = _exported(8)
    paths = _regime_topologies(exported, "stdlib", _saved(exported, tmp_path / "topology-stdlib.json"), 8,
                               bundle=object(), config=None, prompt_set="sets/stdlib.jsonl")
    assert seen == ["sets/stdlib.jsonl"] and len(paths) == 2


def test_the_replay_pick_is_saved_with_its_own_interval(tmp_path, monkeypatch):
    # a variant's prediction is its own: the file's predicted_ci95 is dropped, the loop's interval put in
    import goose_runtime.replayfit as replayfit
    from goose_runtime.loop_cli import _regime_topologies
    from goose_theory.regimefile import without_interval
    from goose_theory.topology import load_topology
    exported = _exported(8)
    row = {"matched": "one", "spine": 5, "transitions": 3, "spine_scale": 1.0, "replayed_tau": 2.0}
    pick = without_interval(exported[1]).with_meta(replay_choice=1)
    monkeypatch.setattr(replayfit, "pick_by_replay", lambda bundle, pair, bench, **kw: (pick, [row, row]))
    paths = _regime_topologies(exported, "stdlib", _saved(exported, tmp_path / "topology-stdlib.json"), 8,
                               bundle=object(), interval=lambda t: t.with_meta(predicted_ci95=[1.5, 2.5]))
    assert len(paths) == 3 and load_topology(paths[2]).meta["predicted_ci95"] == [1.5, 2.5]


def test_the_loop_notes_a_fit_far_from_the_exported_budget(tmp_path, capsys):
    # rates harvested by smaller trees run low (docs/two-regime.md section 14): the loop says so
    from goose_runtime.loop_cli import _regime_topologies
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
    from goose_runtime.loop_cli import _regime_topologies
    for prior in (True, False):
        exported = _exported(8)
        _regime_topologies(exported, "stdlib", _saved(exported, tmp_path / f"topology-stdlib-{prior}.json"), 8,
                           prior=prior)
        err = capsys.readouterr().err
        assert ("note: fitted on traces recorded without the prior (goose@8, iso:2@8), validated with it" in err) is prior


def test_loop_refuses_a_set_with_no_held_out_prompt_before_the_fit(capsys, tmp_path, no_model, monkeypatch):
    """The loop fitted, loaded the model, wrote report.md, the charts and the topologies, then failed
    with a traceback (nothing to record) at the validation trace."""
    import goose_theory.fit

    def no_fit(*args, **kwargs):
        raise AssertionError("the traces were fitted before the held-out prompts were checked")
    monkeypatch.setattr(goose_theory.fit, "fit_traces", no_fit)
    _, bench, trace = fitted_inputs(tmp_path)
    out = tmp_path / "out"
    fails(capsys, ["loop", "--traces", str(tmp_path / "fit" / "*.parquet"), "--bench", bench, "--limit", "1",
                    "--latency", _latency_file(tmp_path), "--out-dir", str(out)],
           f"--bench {bench}: no held-out prompts (all 2 are in the fit traces of --traces {tmp_path / 'fit'}/*.parquet)")
    assert not out.exists()


@pytest.mark.parametrize("spec", ["folder", "glob"])
def test_loop_refuses_an_out_dir_whose_validation_traces_the_traces_would_fit(capsys, tmp_path, no_model, spec):
    """--out-dir = the --traces folder was accepted: the next run fitted its own validation-*.parquet."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy("traces/stdlib-b8.parquet", folder / "stdlib.parquet")
    traces = str(folder) if spec == "folder" else str(folder / "*.parquet")
    fails(capsys, ["loop", "--traces", traces, "--bench", "stdlib", "--limit", "1", "--latency",
                    _latency_file(tmp_path), "--out-dir", str(folder)],
           f"--out-dir {folder}: its validation trace validation-stdlib.parquet would be one of the --traces {traces}")
    assert [p.name for p in folder.iterdir()] == ["stdlib.parquet"]

