"""goose record-traces (and profile-latency's argument checks): one parquet file per prompt set,
the shipped runs of your --model, bad input refused before the model loads."""
from __future__ import annotations

import os

import pyarrow.parquet as pq

import goose_runtime.model as model_mod
from goose_runtime import record_cli
from goose_runtime.cli import main
from tests.clirun import fails


def test_record_traces_writes_one_file_per_bench(capsys, tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(record_cli, "RECORD_BENCHES", ("humaneval", "mtbench"))
    monkeypatch.setattr(record_cli, "RECORD_METHODS", ("ar", "pld", "goose"))
    assert main(["record-traces", "--out-dir", str(tmp_path), "--limit", "1", "--max-new-tokens", "6"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["humaneval.parquet", "mtbench.parquet"]
    df = pq.read_table(tmp_path / "mtbench.parquet").to_pandas()
    assert set(df.method) == {"ar", "pld", "goose"} and set(df.benchmark) == {"mtbench"}
    assert "humaneval.parquet" in capsys.readouterr().out


def test_record_traces_records_your_model(capsys, tmp_path, monkeypatch):
    bundle, asked = model_mod.tiny_random_bundle(seed=1), []
    monkeypatch.setattr(model_mod, "load_model", lambda name="default", **kw: asked.append((name, kw)) or bundle)
    monkeypatch.setattr(record_cli, "RECORD_BENCHES", ("mtbench",))
    monkeypatch.setattr(record_cli, "RECORD_METHODS", ("ar", "goose@4"))
    assert main(["record-traces", "--model", "org/mine", "--dtype", "bfloat16", "--out-dir", str(tmp_path),
                 "--limit", "1", "--max-new-tokens", "4"]) == 0
    assert asked == [("org/mine", {"device": "cpu", "dtype": "bfloat16"})]
    assert pq.read_metadata(tmp_path / "mtbench.parquet").metadata[b"model"] == bundle.name.encode()
    fails(capsys, ["record-traces", "--model", str(tmp_path / "nope"), "--out-dir", str(tmp_path / "o")],
           "does not exist")
    assert not (tmp_path / "o").exists()


def test_record_traces_samples_at_the_setting_given(capsys, tiny, tmp_path, monkeypatch):
    from goose_theory.traceio import open_trace, trace_metadata

    monkeypatch.setattr(record_cli, "RECORD_BENCHES", ("mtbench",))
    monkeypatch.setattr(record_cli, "RECORD_METHODS", ("ar", "goose"))
    assert main(["record-traces", "--out-dir", str(tmp_path), "--limit", "1", "--max-new-tokens", "6",
                 "--temperature", "0.8", "--seed", "3", "--sample-top-p", "0.9", "--sample-min-p", "0.02",
                 "--frequency-penalty", "0.4", "--presence-penalty", "-0.2"]) == 0
    decode = trace_metadata(open_trace(tmp_path / "mtbench.parquet"))["config"]["decode"]
    keys = ("temperature", "seed", "sample_top_k", "sample_top_p", "sample_min_p", "frequency_penalty", "presence_penalty")
    assert tuple(decode[k] for k in keys) == (0.8, 3, 0, 0.9, 0.02, 0.4, -0.2)
    capsys.readouterr()
    for argv, message in ((["--sample-top-k", "4"], "--sample-top-k applies with --temperature > 0 only"),
                          (["--temperature", "1", "--sample-top-p", "2"], "--sample-top-p must be in (0, 1]"),
                          (["--presence-penalty", "2.5"], "--presence-penalty must be in [-2, 2]")):
        fails(capsys, ["record-traces", "--out-dir", str(tmp_path / "o"), *argv], message)
    assert not (tmp_path / "o").exists()


def test_record_traces_rejects_bad_limit(capsys, tmp_path):
    fails(capsys, ["record-traces", "--out-dir", str(tmp_path), "--limit", "0"], "--limit must be at least 1")
    assert os.listdir(tmp_path) == []


def test_record_traces_checks_every_output_file_before_recording(capsys, tmp_path, no_model):
    """A folder where the last set's file goes failed after minutes of recording, with the other
    sets' files written (fuzzing); now one line before the model loads."""
    (tmp_path / "stdlib.parquet").mkdir()
    fails(capsys, ["record-traces", "--out-dir", str(tmp_path)], f"--out-dir: {tmp_path / 'stdlib.parquet'} is a directory")
    assert [p.name for p in tmp_path.iterdir()] == ["stdlib.parquet"]


def test_profile_latency_bad_input_before_the_model_loads(capsys, tmp_path, no_model):
    fails(capsys, ["profile-latency", "--out", str(tmp_path)], "--out: ")
    fails(capsys, ["profile-latency", "--repeats", "100000", "--out", str(tmp_path / "l.json")],
           "--repeats must be at most 1000, got 100000")
    for sizes, message in (("1,x", "--sizes must be comma-separated integers, got '1,x'"),
                           ("0,4", "--sizes must be integers in 1.."), ("", "--sizes")):
        fails(capsys, ["profile-latency", "--sizes", sizes, "--out", str(tmp_path / "l.json")], message)
    assert list(tmp_path.iterdir()) == []
