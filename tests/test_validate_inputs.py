"""validate's and loop's checks before the model loads (the CLI tests drive them end to end; the held-out
selection's refusal of a missing fit trace is driven through the CLI here); what validate says before it
runs: the set a topology was fitted on (the default --bench, and a note where it runs elsewhere), the
successor-prior mismatch, and the held-out count it will run."""
from __future__ import annotations

import json
import os

import pytest

from goose_runtime.cli import main
from goose_runtime.prompts import load_prompts
from goose_runtime.validate_inputs import (fitted_prompt_ids, fitted_set, holdout_prompts, picked_up_by,
                                           topology_notes, validation_trace)
from goose_theory.topology import Topology, load_topology, save_topology
from tests.clirun import fails


def test_validation_trace_is_named_by_the_set(tmp_path):
    assert validation_trace(str(tmp_path), "stdlib") == str(tmp_path / "validation-stdlib.parquet")


def test_picked_up_by_follows_the_traces_rules(tmp_path):
    (tmp_path / "t").mkdir()
    trace = str(tmp_path / "t" / "validation-x.parquet")
    assert picked_up_by(str(tmp_path / "t"), trace) and picked_up_by(str(tmp_path / "t" / "*.parquet"), trace)
    assert picked_up_by(str(tmp_path / "t" / "validation-*.parquet"), trace)
    assert not picked_up_by(str(tmp_path / "t" / "stdlib*.parquet"), trace)
    assert not picked_up_by(str(tmp_path / "*.parquet"), trace) and not picked_up_by(str(tmp_path), trace)
    assert not picked_up_by(str(tmp_path / "t" / "a.parquet"), trace)


def test_picked_up_by_sees_through_symlinked_folders(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "traces")
    glob_spec = str(tmp_path / "traces" / "*.parquet")
    assert picked_up_by(glob_spec, str(tmp_path / "link" / "validation-x.parquet"))  # the out-dir is a link to it
    assert picked_up_by(str(tmp_path / "link" / "*.parquet"), str(tmp_path / "traces" / "validation-x.parquet"))
    assert not picked_up_by(glob_spec, str(tmp_path / "validation-x.parquet"))


def test_picked_up_by_agrees_with_recursive_glob(tmp_path):
    # goose loop reads --traces with glob(recursive=True); its out-dir check must take the same files
    import glob
    files = [tmp_path / p for p in ("v.parquet", "a/v.parquet", "a/b/v.parquet", "a/b/w.txt", "c/x1.parquet")]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
    for pattern in ("**/*.parquet", "a/**/*.parquet", "a/**", "**/b/*", "*/x?.parquet", "a/*/v.parquet", "[ac]/**/v*"):
        spec = str(tmp_path / pattern)
        taken = {p for p in glob.glob(spec, recursive=True) if os.path.isfile(p)}
        assert {str(f) for f in files if picked_up_by(spec, str(f))} == taken, pattern


def test_a_shuffled_set_holds_out_the_prompts_fitted_on_its_source():
    # humaneval-shuffled is humaneval's prompts in another order (same ids, same texts): the fitted
    # HumanEval/0..15 of the shipped traces were run as held out (review, 3 Dec)
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
    fails(capsys, ["validate", "--topology", str(topo), "--bench", "stdlib", "--limit", "1"],
           f"{topo}: its fit trace {gone} is missing, so its prompts cannot be held out; --no-holdout runs")


TREE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])


def _fitted(tmp_path, name: str, **provenance) -> str:
    path = tmp_path / f"{name}.json"
    save_topology(TREE.with_meta(provenance=provenance), path)
    return str(path)


def test_fitted_set_reads_the_provenance_group(tmp_path):
    assert fitted_set(load_topology(_fitted(tmp_path, "h", group_key={"benchmark": "humaneval"}))) == "humaneval"
    assert fitted_set(load_topology(_fitted(tmp_path, "all", group_key={}))) is None
    assert fitted_set(TREE) is None


def test_notes_name_a_file_run_on_another_set_and_a_prior_mismatch(tmp_path):
    # validate scored a HumanEval fit on stdlib, and a +prior regime fit without the prior, unremarked (walkthrough)
    human = _fitted(tmp_path, "h", group_key={"benchmark": "humaneval"},
                    regime_methods=["goose+prior@8", "iso:2+prior@8"])
    loaded = {human: load_topology(human)}
    notes = topology_notes(loaded, ["stdlib", "humaneval-shuffled"], prior=False)
    assert notes[0] == f"{human} was fitted on humaneval prompts; on stdlib its prediction describes another set"
    assert notes[1].startswith(f"{human}: fitted on traces recorded with the prior (goose+prior@8, iso:2+prior@8)")
    assert topology_notes(loaded, ["humaneval"], prior=True) == []  # the shuffled set is the same prompts
    plain = _fitted(tmp_path, "plain")
    assert topology_notes({plain: load_topology(plain)}, ["stdlib"], prior=True) == []  # nothing known: nothing said


def test_validate_defaults_to_the_set_the_topology_was_fitted_on(capsys, tmp_path, no_model):
    human = _fitted(tmp_path, "h", group_key={"benchmark": "mtbench"})
    with pytest.raises(AssertionError, match="before the model loads"):  # no_model: the run stops at the load
        main(["validate", "--topology", human, "--limit", "1", "--max-new-tokens", "4", "--no-holdout"])
    err = capsys.readouterr().err
    assert "--bench mtbench (the sets the topologies were fitted on" in err and "note:" not in err
    plain = _fitted(tmp_path, "plain")  # no set named: stdlib, said
    with pytest.raises(AssertionError, match="before the model loads"):
        main(["validate", "--topology", plain, "--limit", "1", "--max-new-tokens", "4", "--no-holdout"])
    assert "--bench stdlib (the sets the topologies were fitted on; stdlib where none names one)" in capsys.readouterr().err
    # a JSONL set's label (its file is not known): refused; it ran on stdlib with a note (walkthrough)
    own = _fitted(tmp_path, "own", group_key={"benchmark": "my-prompts"})
    fails(capsys, ["validate", "--topology", human, own, "--limit", "1"],
          f"--topology {own} was fitted on the prompt set 'my-prompts', which is not built in: name its JSONL file "
          "with --bench (e.g. --bench my-prompts.jsonl)")


def test_validate_says_how_many_held_out_prompts_it_runs(capsys, tmp_path, monkeypatch):
    # "(100 prompts, ...)" was --limit, on a set holding 12 held-out prompts (walkthrough)
    import goose_runtime.model as model_mod

    bundle = model_mod.tiny_random_bundle(seed=1)
    monkeypatch.setattr(model_mod, "load_model", lambda *a, **k: bundle)
    bench = tmp_path / "set.jsonl"
    bench.write_text("".join(json.dumps({"id": i, "prompt": f"abc abc abc {i}"}) + "\n" for i in "ab"))
    assert main(["validate", "--topology", _fitted(tmp_path, "t"), "--bench", str(bench), "--limit", "5",
                 "--max-new-tokens", "4", "--no-holdout", "--json"]) == 0
    assert "(2 prompts, all the set holds out of --limit 5, 4 new tokens)" in capsys.readouterr().err
