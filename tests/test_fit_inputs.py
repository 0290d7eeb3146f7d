"""The fit traces goose loop / goose validate read, checked before any long work."""
from __future__ import annotations

import shutil

import pytest

from goose_runtime.fit_inputs import (fit_metadata, note_model_mismatch, note_sampling, note_token_cap, trace_copies,
                                      trace_files, trace_sets)
from goose_theory.cli_util import UsageError
from goose_theory.traceio import check_trace


def test_validate_says_when_the_fit_traces_ran_another_length(capsys):
    note_token_cap(fit_metadata(["traces/stdlib-b8.parquet"]), 128)
    assert capsys.readouterr().err == ""
    metas = fit_metadata(["traces/stdlib-b8.parquet", "traces/stdlib-b8.parquet"])
    assert len(metas) == 1  # a file named twice is read once
    note_token_cap(metas, 32)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "decoded with --max-new-tokens 128, this run with 32" in err



def test_validate_says_when_the_fit_traces_ran_another_model_or_dtype(capsys):
    note_model_mismatch(fit_metadata(["traces/stdlib-b8.parquet"]), model="SmolLM2-135M-Instruct", dtype="float32")
    assert capsys.readouterr().err == ""
    metas = fit_metadata(["traces/stdlib-b8.parquet", "missing.parquet"])  # an unreadable one is left out
    note_model_mismatch(metas, model="org/other", dtype="bfloat16")
    assert capsys.readouterr().err.splitlines() == [
        "[goose] note: the fit traces were decoded with model SmolLM2-135M-Instruct, this run with org/other: "
        "the predictions describe the traces' model",
        "[goose] note: the fit traces were decoded with dtype float32, this run with bfloat16: the predictions "
        "describe the traces' dtype"]


def test_sampled_traces_are_named_when_pooled_or_validated_greedily(capsys):
    greedy = fit_metadata(["traces/stdlib-b8.parquet"])  # shipped before sampling: no temperature key, greedy
    note_sampling(greedy, this_run={"temperature": 0.0})
    note_sampling(greedy)
    assert capsys.readouterr().err == ""

    def sampled(**decode):
        return {**greedy[0], "config": {**greedy[0]["config"], "decode": {**greedy[0]["config"]["decode"], **decode}}}

    note_sampling([sampled(temperature=0.8)], this_run={"temperature": 0.0})
    note_sampling([sampled(temperature=0.8)])  # fit-acceptance: one setting, nothing to say
    assert capsys.readouterr().err.splitlines() == [
        "[goose] note: the fit traces were decoded at temperature 0.8, this run at 0 (greedy): the "
        "predictions describe the traces' sampling"]
    note_sampling(greedy + [sampled(temperature=0.8)])
    assert "decoded at temperatures 0 (greedy), 0.8 and are fitted together" in capsys.readouterr().err
    # a top-k / top-p cut is part of the setting; under greedy decoding it changes nothing
    cut = sampled(temperature=0.8, sample_top_k=40, sample_top_p=0.9)
    note_sampling([cut], this_run={"temperature": 0.8, "sample_top_k": 40, "sample_top_p": 0.9, "seed": 5})
    note_sampling(greedy + [sampled(temperature=0.0, sample_top_p=0.5)])
    assert capsys.readouterr().err == ""
    note_sampling([cut], this_run={"temperature": 0.8, "sample_top_k": 0, "sample_top_p": 1.0})
    assert capsys.readouterr().err.splitlines() == [
        "[goose] note: the fit traces were decoded at temperature 0.8 top-k 40 top-p 0.9, this run at 0.8: the "
        "predictions describe the traces' sampling"]
    note_sampling([cut, sampled(temperature=0.8, sample_top_p=0.9)])
    assert "temperatures 0.8 top-p 0.9, 0.8 top-k 40 top-p 0.9 and are fitted together" in capsys.readouterr().err
    # min-p too; a trace from before min-p (no key) had none
    note_sampling([cut], this_run={"temperature": 0.8, "sample_top_k": 40, "sample_top_p": 0.9, "sample_min_p": 0.0})
    assert capsys.readouterr().err == ""
    note_sampling([cut], this_run={"temperature": 0.8, "sample_top_k": 40, "sample_top_p": 0.9, "sample_min_p": 0.1})
    assert "this run at 0.8 top-k 40 top-p 0.9 min-p 0.1: the" in capsys.readouterr().err
    # a repetition penalty changes greedy's tokens too
    note_sampling(greedy, this_run={"temperature": 0.0, "repetition_penalty": 1.2})
    assert "decoded at temperature 0 (greedy), this run at 0 (greedy) repetition penalty 1.2: the" in capsys.readouterr().err
    note_sampling(greedy, this_run={"temperature": 0.0, "frequency_penalty": 0.5, "presence_penalty": -1.0})
    assert "this run at 0 (greedy) frequency penalty 0.5 presence penalty -1: the" in capsys.readouterr().err


def test_copies_are_found_by_their_footer_not_their_name(tmp_path):
    shutil.copy("traces/stdlib-b8.parquet", tmp_path / "copy.parquet")
    infos = [check_trace(p) for p in ("traces/stdlib-b8.parquet", "traces/mtbench-b8.parquet", tmp_path / "copy.parquet")]
    assert [(c.path, o.path) for c, o in trace_copies(infos)] == [(str(tmp_path / "copy.parquet"), "traces/stdlib-b8.parquet")]
    assert trace_copies(infos[:2]) == []


def test_trace_files_reads_a_folder_or_a_glob(tmp_path):
    assert trace_files("traces/prior") == sorted(trace_files("traces/prior/*.parquet"))
    with pytest.raises(UsageError, match="directory holds no \\*.parquet files"):
        trace_files(str(tmp_path))
    odd = tmp_path / "runs[1]"  # a folder or file whose name holds glob characters is itself
    odd.mkdir()
    shutil.copy("traces/prior/stdlib-b8.parquet", odd / "s[1].parquet")
    assert trace_files(str(odd)) == trace_files(str(odd / "s[1].parquet")) == [str(odd / "s[1].parquet")]


def test_trace_sets_names_the_prompt_sets_the_files_hold():
    assert trace_sets(["traces/stdlib-b8.parquet"]) == ["stdlib"]
    assert trace_sets(trace_files("traces/prior") + ["traces/stdlib-b8.parquet"]) == ["humaneval", "mtbench", "stdlib"]


def test_a_missing_traces_path_names_the_folder_it_was_looked_for_in(tmp_path, monkeypatch):
    # goose loop outside the project folder said "error: traces: no such file" (walkthrough, 5 Dec)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=rf"^--traces traces: no such file or folder in {tmp_path} \(the project "):
        trace_files("traces")


def test_fit_says_when_its_latency_profile_is_another_models(capsys, tmp_path):
    # practitioner review, 6 Dec: a profile of "llama-8b" priced SmolLM2's traces (budget 41) without a word
    import json

    from goose_runtime.fit_cli import main
    from pathlib import Path
    profile = json.loads(Path("app/latency/cpu-amd-epyc-2threads-fp32_2026-12-02.json").read_text())
    assert main(["traces/stdlib-b8.parquet", "--latency", "app/latency/cpu-amd-epyc-2threads-fp32_2026-12-02.json",
                 "--json"]) == 0
    assert "--latency" not in capsys.readouterr().err  # the same model and dtype: nothing to say
    other = tmp_path / "lat.json"
    other.write_text(json.dumps({**profile, "model": "llama-8b", "dtype": "bfloat16"}))
    assert main(["traces/stdlib-b8.parquet", "--latency", str(other), "--json"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"[goose] note: --latency {other} was measured with model llama-8b, the traces decoded with "
        "SmolLM2-135M-Instruct: the cost-aware budget prices their trees with its forward times",
        f"[goose] note: --latency {other} was measured with dtype bfloat16, the traces decoded with float32: "
        "the cost-aware budget prices their trees with its forward times"]


def test_skip_bad_skips_a_glob_or_folder_without_traces_as_it_skips_a_missing_file(tmp_path, capsys):
    # fuzzing (7 Dec): `fit-acceptance good.parquet 'nomatch*.parquet' --skip-bad` stopped with exit 2
    from goose_runtime.fit_cli import main
    from goose_runtime.fit_inputs import expand_paths

    empty, nothing = tmp_path / "empty", str(tmp_path / "nomatch*.parquet")
    empty.mkdir()
    with pytest.raises(UsageError, match="no files match"):
        expand_paths(["traces/stdlib-b8.parquet", nothing])
    skipped: list[str] = []
    assert expand_paths(["traces/stdlib-b8.parquet", nothing, str(empty)], skipped=skipped) == ["traces/stdlib-b8.parquet"]
    assert skipped == [f"{nothing}: no files match", f"{empty}: directory holds no *.parquet files"]
    assert main(["traces/stdlib-b8.parquet", nothing, "--skip-bad", "--bootstrap", "20", "--json"]) == 0
    assert capsys.readouterr().err.startswith(f"skipped: {nothing}: no files match\n")
    assert main([nothing, "--skip-bad"]) == 2 and "no usable trace files" in capsys.readouterr().err


def test_a_copy_under_other_labels_is_found_but_a_second_recording_is_not(tmp_path):
    # fuzzing (7 Dec): the same file with another run_id was fitted twice (its footer differs in that column)
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from goose_runtime.fit_inputs import copy_problem

    table = pq.read_table("traces/mtbench-b8.parquet")
    run_id = table.schema.get_field_index("run_id")
    relabelled = table.set_column(run_id, "run_id", pa.array(["other"] * table.num_rows, table.schema.field(run_id).type))
    pq.write_table(relabelled, tmp_path / "relabelled.parquet", compression="snappy")  # another writer's choice
    verify = table.schema.get_field_index("verify_s")
    rerun = relabelled.set_column(verify, "verify_s", pc.multiply(table.column(verify), pa.scalar(1.01, pa.float32())))
    pq.write_table(rerun, tmp_path / "rerun.parquet")  # the same trees decoded again: other timings
    original, copy, second = (check_trace(p) for p in ("traces/mtbench-b8.parquet", tmp_path / "relabelled.parquet",
                                                        tmp_path / "rerun.parquet"))
    assert trace_copies([original, copy, second]) == [(copy, original)]
    assert copy_problem(copy, original) == (f"{copy.path}: the same recording as {original.path} under other labels "
                                            "(every non-text column identical, timings included): its cycles would count twice")
