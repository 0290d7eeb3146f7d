"""goose decode: JSON contracts, traces, summaries, method suffixes (bad input: test_decode_cli_errors.py).

Fast tests swap the real model for the tiny random one (conftest's `tiny`); the ones marked slow
use the embedded default model on a few prompts with few new tokens.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from goose_runtime.cli import main
from tests.clirun import run_json
from goose_theory.topology import Topology, save_topology
from goose_theory.traceio import open_trace, trace_metadata

NODES = [(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (1, "spine", 0), (1, "transition", 0)]


@pytest.fixture()
def jsonl(tmp_path):
    path = tmp_path / "set.jsonl"
    rows = [{"id": "a", "prompt": "abc abc abc abc abc abc"}, {"id": "b", "prompt": "the cat sat on the mat"},
            {"id": "c", "prompt": "xyz"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_prompt_json_has_every_method_and_is_lossless(capsys, tiny):
    out = run_json(capsys, ["decode", "--method", "goose", "--compare", "pld,tr", "--prompt", "abc abc abc abc",
                            "--max-new-tokens", "12", "--json"])
    assert list(out["methods"]) == ["goose", "pld", "tr", "ar"]  # ar added for the speedup
    ar = out["methods"]["ar"]
    assert len(ar["token_ids"]) == 12 and ar["tau"] == 1.0 and ar["speedup_vs_ar"] == pytest.approx(1.0)
    for name, m in out["methods"].items():
        assert m["token_ids"] == ar["token_ids"] and m["matches_ar"], name
        assert m["tokens_per_s"] > 0 and m["tau"] >= 1.0
    assert out["token_ids"] == out["methods"]["goose"]["token_ids"] and out["method"] == "goose"
    # the table's columns are in the JSON too, and the run-level fields --bench has (walkthrough, 5 Dec)
    goose = out["methods"]["goose"]
    assert {"mean_nodes", "draft_ms", "verify_ms", "cycles"} <= set(goose) and goose["mean_nodes"] > 0
    assert out["speedup_vs_ar"] == goose["speedup_vs_ar"] and out["all_match_ar"] is True
    assert out["text"] == tiny.tokenizer.decode(out["token_ids"], skip_special_tokens=True)


def test_auto_method_with_a_latency_file(capsys, tiny, tmp_path):
    from goose_theory.latency import LatencyProfile, save_latency
    profile = tmp_path / "lat.json"
    save_latency(LatencyProfile(sizes=(1, 2, 64), seconds=(0.02, 0.021, 0.03)), profile)
    out = run_json(capsys, ["decode", "--method", "auto", "--prompt", "abc abc abc abc", "--max-new-tokens", "12",
                            "--latency", str(profile), "--json"])
    assert out["methods"]["auto"]["token_ids"] == out["methods"]["ar"]["token_ids"]
    assert out["methods"]["auto"]["matches_ar"]
    assert main(["decode", "--method", "auto", "--prompt", "abc", "--latency", str(tmp_path / "none.json")]) == 2
    assert "none.json: no such file" in capsys.readouterr().err
    # a profile that stops at 16 tokens caps auto at 15 nodes, said (the README says up to 63; walkthrough);
    # one that reaches 64 tokens does not
    for top, note in ((64, False), (16, True)):
        save_latency(LatencyProfile(sizes=(1, 2, top), seconds=(0.02, 0.021, 0.03)), profile)
        assert main(["decode", "--method", "auto", "--prompt", "abc abc", "--max-new-tokens", "4",
                     "--latency", str(profile), "--json"]) == 0
        assert (("note: auto's trees stop at 15 nodes (budget 63 asked): the latency profile measures trees of at "
                 "most 16 tokens") in capsys.readouterr().err) == note


def test_refresh_latency_re_measures_the_cached_profile(capsys, tiny, tmp_path, monkeypatch, quiet_host):
    from goose_runtime import profile as profile_mod
    from goose_theory.latency import LatencyProfile, load_latency, save_latency

    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    cached = profile_mod.cached_profile_path(tiny, dtype="float32")
    save_latency(LatencyProfile(sizes=(1, 64), seconds=(0.02, 0.03)), cached)
    calls = []
    fresh = LatencyProfile(sizes=(1, 64), seconds=(0.01, 0.05))
    monkeypatch.setattr(profile_mod, "profile_latency", lambda bundle, **kw: calls.append(kw) or fresh)
    argv = ["decode", "--method", "auto", "--prompt", "abc abc abc", "--max-new-tokens", "6", "--json"]
    assert run_json(capsys, argv)["methods"]["auto"]["matches_ar"] and calls == []  # the cached file is used
    assert run_json(capsys, argv + ["--refresh-latency"])["methods"]["auto"]["matches_ar"]
    assert len(calls) == 1 and load_latency(cached).seconds == (0.01, 0.05)


def test_bench_json_summaries_and_trace(capsys, tiny, jsonl, tmp_path):
    trace = tmp_path / "run.parquet"
    out = run_json(capsys, ["decode", "--method", "iso:3", "--compare", "ar,pld", "--bench", jsonl, "--limit", "2",
                            "--max-new-tokens", "10", "--budget", "8", "--trace-out", str(trace), "--json"])
    assert out["prompts"] == 2 and out["all_match_ar"] is True and out["benchmark"] == "set"  # the label, as the rows
    assert set(out["methods"]) == {"iso:3@8", "ar", "pld@8"}
    iso = out["methods"]["iso:3@8"]
    assert iso["new_tokens"] == 20 and iso["tau"] >= 1.0 and iso["mean_nodes"] <= 8
    assert out["tau"] == iso["tau"] and out["speedup_vs_ar"] == iso["speedup_vs_ar"]
    pf = open_trace(trace)
    assert out["trace_rows"] == pf.metadata.num_rows
    df = pq.read_table(trace).to_pandas()
    assert set(df.method) == {"iso:3@8", "ar", "pld@8"} and set(df.prompt_id) == {"a", "b"}
    assert df.groupby(["method", "prompt_id", "cycle"]).tau.first().groupby("method").sum().to_dict() == \
        {"iso:3@8": 20, "ar": 20, "pld@8": 20}
    # the matcher's confidence is recorded where there is a matcher, and only for an actual match
    assert df.groupby("method").confident.apply(lambda c: c.isna().all()).to_dict() == \
        {"iso:3@8": True, "ar": True, "pld@8": False}
    assert not (df.confident.eq(True) & (df.spine_avail == 0)).any()
    meta = trace_metadata(pf)
    assert meta["config"]["reset_adjacency"] is True and meta["config"]["decode"]["max_new_tokens"] == 10
    assert meta["config"]["benchmark"] == "set" and set(df.benchmark) == {"set"}  # the label, not the path
    assert meta["config"]["keep_history"] is False and out["keep_history"] is False
    assert [m["label"] for m in meta["config"]["methods"]] == ["iso:3@8", "ar", "pld@8"]
    assert [m["score"] for m in meta["config"]["methods"]] == ["logit"] * 3 and out["min_score"] == 0.0


def test_min_score_is_reported_and_recorded_for_goose_only(capsys, tiny, tmp_path):
    trace = tmp_path / "run.parquet"
    out = run_json(capsys, ["decode", "--method", "goose@8", "--compare", "ar,tr", "--prompt", "abcabcabc",
                            "--max-new-tokens", "8", "--min-score", "0.001", "--trace-out", str(trace), "--json"])
    assert out["min_score"] == 0.001 and all(m["matches_ar"] for m in out["methods"].values())
    methods = {m["label"]: m for m in trace_metadata(open_trace(trace))["config"]["methods"]}
    assert methods["goose@8"]["score"] == "prob" and methods["goose@8"]["min_score"] == 0.001
    assert methods["goose@8"]["branch_power"] == 1.0 and out["branch_power"] == 1.0
    assert methods["tr"]["score"] == "logit" and "min_score" not in methods["tr"]


def test_sampling_is_reported_recorded_and_lossless(capsys, tiny, tmp_path):
    trace = tmp_path / "run.parquet"
    args = ["decode", "--method", "goose@8", "--compare", "pld,tr", "--prompt", "abcabcabc", "--max-new-tokens", "12"]
    out = run_json(capsys, args + ["--temperature", "1.5", "--seed", "7", "--trace-out", str(trace), "--json"])
    assert out["temperature"] == 1.5 and out["seed"] == 7 and out["all_match_ar"] is True
    decode = trace_metadata(open_trace(trace))["config"]["decode"]
    assert decode["temperature"] == 1.5 and decode["seed"] == 7
    greedy = run_json(capsys, args + ["--json"])
    assert greedy["temperature"] == 0.0 and greedy["token_ids"] != out["token_ids"]
    assert (greedy["sample_top_k"], greedy["sample_top_p"], greedy["sample_min_p"]) == (0, 1.0, 0.0)
    cut = run_json(capsys, args + ["--temperature", "1.5", "--seed", "7", "--sample-top-k", "5", "--sample-top-p",
                                   "0.8", "--sample-min-p", "0.05", "--trace-out", str(trace), "--json"])
    assert (cut["sample_top_k"], cut["sample_top_p"], cut["sample_min_p"], cut["all_match_ar"]) == (5, 0.8, 0.05, True)
    decode = trace_metadata(open_trace(trace))["config"]["decode"]
    assert (decode["sample_top_k"], decode["sample_top_p"], decode["sample_min_p"]) == (5, 0.8, 0.05)


@pytest.mark.parametrize("flag, field, value, off", [("--repetition-penalty", "repetition_penalty", 3.0, 1.0),
                                                     ("--frequency-penalty", "frequency_penalty", 1.5, 0.0),
                                                     ("--presence-penalty", "presence_penalty", -2.0, 0.0),
                                                     ("--no-repeat-ngram-size", "no_repeat_ngram_size", 2, 0)])
def test_a_penalty_is_reported_recorded_and_lossless(capsys, tiny, tmp_path, flag, field, value, off):
    trace = tmp_path / "run.parquet"
    args = ["decode", "--method", "goose@8", "--compare", "pld,tr", "--prompt", "abcabcabc", "--max-new-tokens", "16",
            "--json"]
    out = run_json(capsys, args + [flag, str(value), "--trace-out", str(trace)])
    assert out[field] == value and out["all_match_ar"] is True
    assert trace_metadata(open_trace(trace))["config"]["decode"][field] == value
    plain = run_json(capsys, args)
    assert plain[field] == off and plain["token_ids"] != out["token_ids"]


def test_a_prompt_trace_names_its_text(capsys, tiny, tmp_path):
    # the fit resamples by (benchmark, prompt_id): two --prompt texts must not share an id, and
    # the same text decoded again must keep it
    ids = []
    for i, text in enumerate(("abcabcabc", "xyz xyz", "abcabcabc")):
        trace = tmp_path / f"run{i}.parquet"
        run_json(capsys, ["decode", "--method", "pld", "--prompt", text, "--max-new-tokens", "4",
                          "--trace-out", str(trace), "--json"])
        ids.append(set(open_trace(trace).read(columns=["prompt_id"]).column("prompt_id").to_pylist()))
    assert len(ids[0]) == 1 and ids[0] == ids[2] != ids[1] and next(iter(ids[0])).startswith("prompt-")


def test_budget_suffix_labels_round_trip(capsys, tiny):
    out = run_json(capsys, ["decode", "--method", "goose@8", "--compare", "goose,goose@60,ar", "--prompt", "ab ab ab",
                            "--max-new-tokens", "6", "--json"])
    assert list(out["methods"]) == ["goose@8", "goose", "ar"]  # goose@60 is goose (the default budget)
    assert all(m["matches_ar"] for m in out["methods"].values())


def test_prior_suffix_builds_the_prior_once_and_stays_lossless(capsys, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    argv = ["decode", "--method", "goose+prior@8", "--compare", "goose@8", "--prompt", "ab cd ef gh",
            "--max-new-tokens", "8", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert list(out["methods"]) == ["goose+prior@8", "goose@8", "ar"]
    assert all(m["matches_ar"] for m in out["methods"].values())
    assert "building the model's successor prior" in captured.err and len(list(tmp_path.rglob("*.npz"))) == 1
    assert main(argv) == 0  # the prior is held now (in memory, and on disk): no second build
    assert "successor prior" not in capsys.readouterr().err


def test_store_suffix_builds_the_store_once_and_traces_its_guesses(capsys, tiny, tmp_path, monkeypatch):
    import pandas as pd
    from goose_runtime.fit_cli import main as fit_main
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("ab cd ef gh ij kl mn " * 40, encoding="utf-8")
    trace = tmp_path / "t.parquet"
    argv = ["decode", "--method", "goose+store@4", "--compare", "auto+store,goose@4", "--prompt", "ab cd ef gh",
            "--max-new-tokens", "12", "--store-corpus", str(corpus), "--json"]
    assert main([*argv, "--trace-out", str(trace)]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert list(out["methods"]) == ["goose+store@4", "auto+store", "goose@4", "ar"]
    assert all(m["matches_ar"] for m in out["methods"].values())
    assert captured.err.count("building the retrieval store") == 1
    assert len(list((tmp_path / "cache" / "stores").glob("store-*.npz"))) == 1
    nodes = pd.read_parquet(trace)
    from goose_runtime.config import DecodeConfig
    guesses = nodes[(nodes.method == "goose+store@4") & (nodes["rank"] == DecodeConfig().top_k)]
    assert len(guesses) > 0 and (guesses.source == "transition").all() and (guesses.parent == 0).all()
    assert fit_main([str(trace), "--json"]) == 0  # the fit reads the guesses as rank-10 transitions
    capsys.readouterr()
    assert main(argv) == 0 and "retrieval store" not in capsys.readouterr().err  # held in memory now


def test_table_output_and_keep_adjacency(capsys, tiny, jsonl):
    assert main(["decode", "--method", "tr", "--bench", jsonl, "--max-new-tokens", "6", "--keep-adjacency"]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "tau" in out and "tokens/s" in out
    lines = out.splitlines()
    notes = [line for line in lines if line.startswith("note: ")]  # a tiny model's timings may add the load note
    assert {line.split()[0] for line in lines[2:lines.index(notes[0])]} == {"tr", "ar"}
    assert "too few for a steady speedup" in notes[0]  # 6 tokens a prompt
    assert main(["decode", "--method", "tr", "--bench", jsonl, "--max-new-tokens", "6", "--temperature", "0.5",
                 "--seed", "4", "--sample-min-p", "0.1", "--presence-penalty", "0.5"]) == 0
    out = capsys.readouterr().out  # a sampled or penalised run names its setting above the table
    assert out.splitlines()[0] == "decoded at temperature 0.5 min-p 0.1 presence penalty 0.5, seed 4"


def test_keep_history_is_applied_reported_and_recorded(capsys, tiny, jsonl, tmp_path):
    trace = tmp_path / "run.parquet"
    out = run_json(capsys, ["decode", "--method", "pld", "--bench", jsonl, "--max-new-tokens", "10",
                            "--keep-history", "--trace-out", str(trace), "--json"])
    assert out["keep_history"] is True and out["all_match_ar"] is True
    meta = trace_metadata(open_trace(trace))
    assert meta["config"]["keep_history"] is True and meta["config"]["decode"]["keep_history"] is True


def test_keep_history_help_names_the_decoders_cap(capsys):
    # the CLI spells the cap out (it imports no torch to build its parser): keep it the decoder's
    from goose_runtime.config import HISTORY_TOKENS
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    assert f"newest {HISTORY_TOKENS >> 10}k tokens" in " ".join(capsys.readouterr().out.split())


def test_topology_method_from_file(capsys, tiny, tmp_path):
    path = tmp_path / "shape.json"
    save_topology(Topology.from_nodes(NODES), path)
    out = run_json(capsys, ["decode", "--method", "topology", "--topology", str(path), "--prompt", "ab ab ab ab",
                            "--max-new-tokens", "8", "--json"])
    assert "topology:shape" in out["methods"] and out["methods"]["topology:shape"]["matches_ar"]


@pytest.mark.slow
def test_real_model_bench_lossless(capsys):
    out = run_json(capsys, ["decode", "--method", "goose", "--compare", "ar,pld,tr,iso:3,mixed-iso:3",
                            "--bench", "humaneval", "--limit", "1", "--max-new-tokens", "40", "--threads", "1",
                            "--json"])
    assert out["all_match_ar"] is True and out["model"] == "SmolLM2-135M-Instruct"
    assert all(m["new_tokens"] == out["methods"]["ar"]["new_tokens"] for m in out["methods"].values())
    assert out["methods"]["goose"]["tau"] > 1.0


def test_registering_the_commands_imports_no_torch():
    # nor numba (0.2 s) nor the regime modules: `goose --help` and every command pay for what registers
    code = ("import sys\nfrom goose_runtime.cli import build_parser\nbuild_parser()\n"
            "print(','.join(m for m in ('torch', 'transformers', 'numba', 'goose_theory.regimefile') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_a_tree_with_ranks_past_the_adjacency_table_is_named_before_decoding(capsys, tiny, tmp_path):
    # fuzz review, 7 Dec: ranks 32765-32767 decoded as ar at tau 1.0 without a word
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 40)]),
                  tmp_path / "far.json")
    assert main(["decode", "--method", f"topology:{tmp_path / 'far.json'}", "--prompt", "abc abc",
                 "--max-new-tokens", "4"]) == 0
    err = capsys.readouterr().err
    assert "note: topology:far has 1 transition node(s) of rank 40-40: the adjacency table keeps the top 10" in err
