"""validate's and loop's checks before the model loads (the CLI tests drive them end to end; the held-out
selection's refusal of a missing fit trace is driven through the CLI here)."""
from __future__ import annotations

import os

from goose_runtime.prompts import load_prompts
from goose_runtime.validate_inputs import fitted_prompt_ids, holdout_prompts, picked_up_by, validation_trace
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
