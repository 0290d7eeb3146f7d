"""goose decode's bad input: one line naming the problem and exit 2, refused before the model loads
wherever it can be (bad options, paths, topology files, JSONL lines, a model folder), and NaN
logits that stop decoding in one line. Fast tests use the tiny random model (conftest's `tiny`)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import goose_runtime.model as model_mod
from goose_theory.topology import Topology, save_topology
from tests.clirun import fails


@pytest.mark.parametrize("argv, message", [
    (["--method", "nope", "--prompt", "x"], "unknown method 'nope'"),
    (["--method", "gose+prior", "--prompt", "x"], "unknown method 'gose' (expected one of ar, pld, tr, iso:K, "
     "mixed-iso:K, goose, auto, topology:FILE); did you mean 'goose'?"),
    (["--method", "goose", "--bench", "humanevl"], ".jsonl file; did you mean 'humaneval'?"),
    (["--method", "goose", "--compare", "iso:0", "--prompt", "x"], "K in iso:K"),
    (["--prompt", "   "], "--prompt is empty"),
    (["--bench", "nope"], "unknown prompt set 'nope'"),
    (["--bench", "humaneval", "--limit", "0"], "--limit must be at least 1"),
    (["--prompt", "x", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["--prompt", "x", "--budget", "0"], "--budget must be at least 1, got 0 (a budget of 0 drafts nothing: that is --method ar)"),
    (["--prompt", "x", "--method", "goose@0"], "budget must be a positive integer, got '0' (a budget of 0 drafts nothing: "
                                               "that is method 'ar')"),
    (["--prompt", "x", "--min-score", "1.5"], "--min-score must be in [0, 1)"),
    (["--prompt", "x", "--method", "tr", "--compare", "iso:3", "--min-score", "0.01"], "applies to goose only"),
    (["--prompt", "x", "--branch-power", "0"], "--branch-power must be in (0, 16]"),
    (["--prompt", "x", "--branch-power", "1e308"], "--branch-power must be in (0, 16], got 1e+308"),
    (["--prompt", "x", "--method", "goose@5000"], "budget must be at most 1024, got 5000"),
    (["--prompt", "x", "--method", "goose@-1"], "the budget after '@' must be a positive integer"),
    (["--prompt", "x", "--method", "ar@5"], "ar drafts nothing, so it takes no budget"),
    (["--prompt", "x", "--method", "ar", "--budget", "5"], "--budget applies to the drafting methods, and this run "
     "has only ar"),  # was ignored, while ar@5 was refused
    (["--prompt", "x", "--compare", "ar,,pld"], "--compare: empty entry in 'ar,,pld'"),
    (["--prompt", "x", "--compare", ""], "--compare is empty"),
    (["--prompt", "x", "--threads", "100000"], "--threads must be at most 1024"),
    (["--prompt", "x", "--latency", "l.json"], "--latency applies to the auto method only"),
    (["--prompt", "x", "--method", "goose", "--topology", "t.json"], "--topology is the file of --method topology"),
    (["--prompt", "x", "--method", " Topology+PRIOR", "--topology", "t.json"], "t.json: no such file"),  # read, not refused
    (["--prompt", "x", "--method", "topology+prior@8", "--topology", "t.json"], "t.json: no such file"),
    (["--prompt", "x", "--method", "ar+prior"], "method 'ar' drafts no adjacency candidates"),
    (["--prompt", "x", "--min-score", "-0.5"], "--min-score must be in [0, 1), got -0.5"),
    (["--prompt", "x", "--branch-power", "inf"], "--branch-power must be in (0, 16], got inf"),
    (["--prompt", "x", "--temperature", "-1"], "--temperature must be 0 (greedy) or in (0, 100], got -1.0"),
    (["--prompt", "x", "--temperature", "nan"], "--temperature must be 0 (greedy) or in (0, 100], got nan"),
    (["--prompt", "x", "--temperature", "0.7", "--seed", "-3"], "--seed must be an integer in [0, 2**63), got -3"),
    (["--prompt", "x", "--seed", "4"], "--seed applies with --temperature > 0 only"),
    (["--prompt", "x", "--sample-top-p", "0.9"], "--sample-top-p applies with --temperature > 0 only"),
    (["--prompt", "x", "--sample-top-k", "40"], "--sample-top-k applies with --temperature > 0 only"),
    (["--prompt", "x", "--temperature", "1", "--sample-top-p", "0"], "--sample-top-p must be in (0, 1] (1: no cut), got 0.0"),
    (["--prompt", "x", "--temperature", "1", "--sample-top-p", "nan"], "--sample-top-p must be in (0, 1]"),
    (["--prompt", "x", "--temperature", "1", "--sample-top-k", "-2"], "--sample-top-k must be an integer >= 0"),
    (["--prompt", "x", "--sample-min-p", "0.1"], "--sample-min-p applies with --temperature > 0 only"),
    (["--prompt", "x", "--repetition-penalty", "0"], "--repetition-penalty must be in (0, 100] (1: none), got 0.0"),
    (["--prompt", "x", "--repetition-penalty", "inf"], "--repetition-penalty must be in (0, 100]"),
    (["--prompt", "x", "--frequency-penalty", "2.5"], "--frequency-penalty must be in [-2, 2] (0: none), got 2.5"),
    (["--prompt", "x", "--presence-penalty", "-3"], "--presence-penalty must be in [-2, 2] (0: none), got -3.0"),
    (["--prompt", "x", "--no-repeat-ngram-size", "-1"], "--no-repeat-ngram-size must be an integer in [0, 1024] (0: none), got -1"),
    (["--prompt", "x", "--temperature", "1", "--sample-min-p", "1.5"], "--sample-min-p must be in [0, 1] (0: no cut), got 1.5"),
    (["--prompt", "x", "--temperature", "1", "--sample-min-p", "-0.1"], "--sample-min-p must be in [0, 1]"),
    (["--prompt", "x", "--refresh-latency"], "--refresh-latency applies to the auto method only"),
    (["--prompt", "x", "--method", "auto", "--refresh-latency", "--latency", "l.json"],
     "--refresh-latency re-measures the cached profile; it does not apply with --latency FILE"),
    (["--prompt", "x", "--method", "tr", "--compare", "ar", "--branch-power", "2"], "applies to goose only"),
    (["--prompt", "x" * 3000], "--prompt has 3000 tokens; with 128 new tokens"),  # named as given, not by a hash id
    (["--prompt", "x", "--method", "tr+store"], "'+store' applies to goose and auto only"),
    (["--prompt", "x", "--store-corpus", "."], "--store-corpus applies to +store methods only"),
    (["--prompt", "x", "--method", "goose+store", "--store-corpus", "absent/dir"], "absent/dir: no such file or folder"),
    (["--prompt", "x", "--method", "goose+store", "--store-corpus", ""], "--store-corpus must be paths of files or "
     "folders (an empty one names nothing)"),  # said "a tuple of paths" (fuzzing)
    (["--bench", "stdlib-wide", "--limit", "1", "--method", "goose+store"], "+store on stdlib-wide: its prompts are cut"),
])
def test_bad_input_one_line_exit_2(capsys, tiny, tmp_path, argv, message):
    trace = tmp_path / "t.parquet"
    fails(capsys, ["decode", *argv, "--trace-out", str(trace)], message)
    assert not trace.exists()


def test_output_paths_refused_before_any_work(capsys, tmp_path, no_model):
    """A trace path that could not be written is one line before the model loads, not a traceback
    after the whole run; /dev/null would have been replaced by a plain file by the atomic rename."""
    (tmp_path / "file").write_text("x")
    for path, message in ((tmp_path, "is a directory"), (tmp_path / "file" / "t.parquet", "is not a directory"),
                          ("", "'' is empty"), ("/dev/null", "not a regular file")):
        fails(capsys, ["decode", "--method", "ar", "--prompt", "x", "--trace-out", str(path)], message)
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_bad_topology_and_missing_model(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "goose-topology/1", "nodes": [[0, "spine", 0]]}')
    fails(capsys, ["decode", "--method", f"topology:{bad}", "--prompt", "x"], "bad topology")
    fails(capsys, ["decode", "--method", "ar", "--prompt", "x", "--model", str(tmp_path / "absent")], "does not exist")


def test_bad_jsonl_line_named(capsys, tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"prompt": "ok"}\n{oops\n')
    fails(capsys, ["decode", "--method", "ar", "--bench", str(path)], "broken.jsonl:2")


def test_cli_subprocess_unknown_method_fast():
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([sys.executable, "-m", "goose_runtime.cli", "decode", "--method", "bogus", "--prompt", "x"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["error: unknown method 'bogus' (expected one of ar, pld, tr, iso:K, "
                                                "mixed-iso:K, goose, auto, topology:FILE)"]


@pytest.mark.slow
def test_real_model_prompt_over_context(capsys):
    fails(capsys, ["decode", "--method", "ar", "--prompt", "word " * 9000], "does not fit the model's context")


@pytest.mark.parametrize("method", ["ar", "goose@8"])
def test_nan_logits_stop_decoding_with_one_line(capsys, tiny, tmp_path, method):
    # a model that emits NaN (fp16 overflow) has no argmax to verify against: one line, exit 2,
    # and no trace written (ar's one-row readout is the numba kernel, goose's the torch path here)
    import torch
    with torch.no_grad():
        tiny.model.lm_head.weight[7].fill_(float("nan"))
    trace = tmp_path / "t.parquet"
    try:
        fails(capsys, ["decode", "--method", method, "--prompt", "abc abc", "--max-new-tokens", "4",
                        "--trace-out", str(trace)], "NaN logits")
    finally:
        with torch.no_grad():
            tiny.model.lm_head.weight[7].normal_()
    assert not trace.exists()


def test_two_topology_files_of_one_name_are_refused_before_the_model_loads(capsys, tmp_path, monkeypatch):
    # both would be labelled topology:tree, and one would silently replace the other in the tables
    monkeypatch.setattr(model_mod, "load_model", lambda *a, **k: pytest.fail("refused before the model loads"))
    for folder, nodes in (("a", [(-1, "root", 0), (0, "spine", 0)]), ("b", [(-1, "root", 0), (0, "transition", 0)])):
        (tmp_path / folder).mkdir()
        save_topology(Topology.from_nodes(nodes), tmp_path / folder / "tree.json")
    fails(capsys, ["decode", "--method", f"topology:{tmp_path / 'a/tree.json'}", "--compare",
                    f"topology:{tmp_path / 'b/tree.json'}", "--prompt", "x"], "both labelled 'topology:tree'")


@pytest.mark.parametrize("argv, message", [
    (["--method", "goose", "--latency", ""], "--latency is empty"),  # passed "--latency applies to auto only"
    (["--method", "auto", "--latency", ""], "--latency is empty"),  # used the cached profile
    (["--method", "auto", "--latency", "", "--refresh-latency"], "--latency is empty"),  # re-measured the cache
    (["--method", "goose", "--topology", ""], "--topology is empty"),  # ignored
    (["--method", "ar", "--model", ""], "--model is empty"),
])
def test_empty_path_flags_are_refused_before_the_model_loads(capsys, tmp_path, no_model, argv, message):
    fails(capsys, ["decode", *argv, "--prompt", "x", "--trace-out", str(tmp_path / "t.parquet")], message)
    assert list(tmp_path.iterdir()) == []


def test_a_trace_out_that_is_an_input_is_refused_before_the_model_loads(capsys, tmp_path, no_model):
    # the atomic rename would replace the topology (or profile) the run reads with a parquet trace
    topo = tmp_path / "t.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]), topo)
    before = topo.read_bytes()
    for argv in (["--method", f" topology:{topo} +PRIOR@1"], ["--method", "topology", "--topology", str(topo)]):
        fails(capsys, ["decode", *argv, "--prompt", "x", "--trace-out", str(topo)], "is also --topology")
    assert topo.read_bytes() == before


def test_a_model_folder_without_config_json_is_refused_before_any_work(capsys, tmp_path, no_model):
    """decode and profile-latency never checked --model up front: a folder without config.json (or a
    missing one) failed at the load, profile-latency after its size-1 note (two lines)."""
    empty = tmp_path / "emptydir"
    empty.mkdir()
    for model, message in ((str(empty), "holds no config.json, so it is not a model folder"),
                           (str(tmp_path / "absent"), "does not exist")):
        fails(capsys, ["decode", "--method", "ar", "--prompt", "x", "--model", model], message)
        fails(capsys, ["profile-latency", "--sizes", "8", "--model", model, "--out", str(tmp_path / "l.json")], message)
    assert [p.name for p in tmp_path.iterdir()] == ["emptydir"]
