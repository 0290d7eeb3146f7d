"""linear_plan: the MKL/oneDNN crossover is measured on the model's own linears, cached per CPU,
overridable from the environment, and applied to every tuned linear."""
from __future__ import annotations

import json
import os
import pathlib

import pytest
import torch

import goose_runtime.linear_plan as plan_mod
from goose_runtime.cpu_speed import OneDnnLinear, onednn_available, set_stock_rows, tune_for_cpu
from goose_runtime.linear_plan import SCHEMA, measure_stock_rows, plan_linears, plan_path, stock_rows_from_times
from goose_runtime.model import tiny_random_bundle

pytestmark = [pytest.mark.skipif(not onednn_available(), reason="torch build without oneDNN"),
              pytest.mark.usefixtures("quiet_host")]  # a quiet host unless a test says otherwise


def tuned_model(seed: int = 0):
    model = tiny_random_bundle(seed=seed).model
    tune_for_cpu(model)
    return model


def stock_rows_of(model) -> set[int]:
    return {m._stock_rows for m in model.modules() if isinstance(m, OneDnnLinear)}


@pytest.mark.parametrize("stock, onednn, expected", [
    ((30, 31, 40, 45), (38, 39, 40.5, 41), 3),   # MKL faster up to 3 rows (an Intel host here)
    ((47, 53, 57, 66), (40, 40, 41, 45), 0),     # oneDNN faster from 1 row (the AMD host)
    ((30, 45, 35, 50), (38, 39, 40, 41), 1),     # only a contiguous run from 1 row counts
    ((30, 31, 32, 33), (38, 39, 40, 41), 4),     # MKL faster everywhere measured
    ((30, 31, 40, 45), (30, 39, 41, 46), 0),     # a tie is not faster
])
def test_stock_rows_from_times(stock, onednn, expected):
    assert stock_rows_from_times((1, 2, 3, 4), stock_ms=stock, onednn_ms=onednn) == expected


def test_stock_rows_send_few_row_inputs_to_f_linear_and_the_rest_to_onednn(monkeypatch):
    model = tuned_model(seed=1)
    layer = next(m for m in model.modules() if isinstance(m, OneDnnLinear))
    assert set_stock_rows(model, 2) == 15 and stock_rows_of(model) == {2}
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a[0].shape) or real(*a))
    with torch.inference_mode():
        for rows in (1, 2):
            x = torch.randn(1, rows, layer.in_features)
            assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
        assert not calls
        x = torch.randn(1, 3, layer.in_features)
        got, ref = layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias)
    assert len(calls) == 1 and calls[0] == x.shape and torch.allclose(got, ref, atol=1e-5, rtol=0)


def test_set_stock_rows_rejects_bad_counts():
    model = tuned_model()
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="stock rows must be an integer >= 0"):
            set_stock_rows(model, bad)
    assert stock_rows_of(model) == {0}


def test_measure_stock_rows_times_both_paths_at_every_row_count():
    model = tuned_model(seed=2)
    k, table = measure_stock_rows(model, rows=(1, 2, 4), repeats=2)
    assert table["rows"] == [1, 2, 4] and len(table["stock_ms"]) == len(table["onednn_ms"]) == 3
    assert all(t > 0 for t in table["stock_ms"] + table["onednn_ms"])
    assert k == stock_rows_from_times((1, 2, 4), stock_ms=table["stock_ms"], onednn_ms=table["onednn_ms"])


def test_a_plan_measured_on_a_busy_host_serves_the_process_but_is_not_cached(monkeypatch, tmp_path):
    # 6 Dec: a plan measured beside test runs chose MKL for one row on a Zen 4 (ar's step 2x slower), cached for good
    monkeypatch.delenv("GOOSE_STOCK_ROWS", raising=False)
    monkeypatch.setattr(plan_mod, "host_busy", lambda: True)
    calls = []
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(1, calls))
    first = plan_linears(tuned_model(), cache_dir=str(tmp_path), model_name="m")
    assert first["source"] == "measured, busy host: not cached" and os.listdir(tmp_path) == []
    model = tuned_model()
    assert plan_linears(model, cache_dir=str(tmp_path), model_name="m")["stock_rows"] == 1 and len(calls) == 1
    assert stock_rows_of(model) == {1}  # once per process, then the same plan
    monkeypatch.setattr(plan_mod, "host_busy", lambda: False)  # quiet again: a fresh measurement is cached
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(2, calls))
    again = plan_linears(tuned_model(), cache_dir=str(tmp_path), model_name="m", refresh=True)
    assert again["source"] == "measured" and again["stock_rows"] == 2 and os.path.exists(again["file"])


def test_host_busy_reads_the_load_and_a_platform_without_one_is_quiet(monkeypatch):
    monkeypatch.undo()  # the real host_busy, not the quiet_host fixture's
    monkeypatch.setattr(plan_mod.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(plan_mod.os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    assert plan_mod.host_busy()
    monkeypatch.setattr(plan_mod.os, "getloadavg", lambda: (1.5, 3.0, 3.0))
    assert not plan_mod.host_busy()
    monkeypatch.delattr(plan_mod.os, "getloadavg")  # Windows
    assert not plan_mod.host_busy()


def fixed_measure(k: int, calls: list):
    def measure(model, **kwargs):
        calls.append(1)
        return k, {"rows": [1, 2], "stock_ms": [1.0, 2.0], "onednn_ms": [1.5, 1.5]}
    return measure


def test_plan_measures_once_then_reads_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("GOOSE_STOCK_ROWS", raising=False)
    calls = []
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(1, calls))
    first = plan_linears(tuned_model(), cache_dir=str(tmp_path), model_name="m")
    assert first["source"] == "measured" and first["stock_rows"] == 1 and len(calls) == 1
    data = json.loads(pathlib.Path(first["file"]).read_text())
    assert data["schema"] == SCHEMA and data["stock_rows"] == 1 and data["threads"] == torch.get_num_threads()
    model = tuned_model()
    again = plan_linears(model, cache_dir=str(tmp_path), model_name="m")
    assert again["source"] == "cached" and again["stock_rows"] == 1 and len(calls) == 1
    assert stock_rows_of(model) == {1} and again["file"] == plan_path(str(tmp_path), "m")
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(2, calls))  # --refresh-latency: measured again
    fresh = plan_linears(model, cache_dir=str(tmp_path), model_name="m", refresh=True)
    assert fresh["source"] == "measured" and fresh["stock_rows"] == 2 and len(calls) == 2
    assert plan_linears(tuned_model(), cache_dir=str(tmp_path), model_name="m")["stock_rows"] == 2  # and cached


@pytest.mark.parametrize("text", ["not json", '{"schema": "other", "stock_rows": 2}', '{"schema": "goose-linear-plan/1", "stock_rows": -1}',
                                  '{"schema": "goose-linear-plan/1", "stock_rows": true}', "[]"])
def test_a_bad_cache_file_is_measured_again_and_replaced(monkeypatch, tmp_path, text):
    monkeypatch.delenv("GOOSE_STOCK_ROWS", raising=False)
    path = plan_path(str(tmp_path), "m")
    with open(path, "w") as fh:
        fh.write(text)
    calls = []
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(2, calls))
    info = plan_linears(tuned_model(), cache_dir=str(tmp_path), model_name="m")
    assert info["source"] == "measured" and len(calls) == 1
    assert json.loads(pathlib.Path(path).read_text())["stock_rows"] == 2
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # no temp file left beside it


def test_an_unwritable_cache_folder_only_costs_a_measurement(monkeypatch, tmp_path):
    monkeypatch.delenv("GOOSE_STOCK_ROWS", raising=False)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    calls = []
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(3, calls))
    model = tuned_model()
    info = plan_linears(model, cache_dir=str(blocker / "sub"), model_name="m")
    assert info["stock_rows"] == 3 and stock_rows_of(model) == {3}


def test_a_failed_cache_write_only_costs_a_measurement(monkeypatch, tmp_path):
    # a full disk: atomic_output names the file in an OutputPathError, which the cache must swallow too
    import goose_theory.topology as topology_mod
    monkeypatch.delenv("GOOSE_STOCK_ROWS", raising=False)
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(3, []))
    def full(path, text):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(topology_mod, "write_text", full)
    model = tuned_model()
    assert plan_linears(model, cache_dir=str(tmp_path), model_name="m")["stock_rows"] == 3
    assert os.listdir(tmp_path) == []  # and no temp file left


def test_the_environment_pins_the_plan_without_measuring(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOSE_STOCK_ROWS", "4")
    calls = []
    monkeypatch.setattr(plan_mod, "measure_stock_rows", fixed_measure(1, calls))
    model = tuned_model()
    info = plan_linears(model, cache_dir=str(tmp_path), model_name="m")
    assert info["source"] == "env" and info["stock_rows"] == 4 and stock_rows_of(model) == {4}
    assert not calls and not os.listdir(tmp_path)


@pytest.mark.parametrize("text", ["-1", "two", "1.5"])
def test_a_bad_environment_value_is_one_clear_error(monkeypatch, tmp_path, text):
    monkeypatch.setenv("GOOSE_STOCK_ROWS", text)
    with pytest.raises(ValueError, match="GOOSE_STOCK_ROWS must be an integer >= 0"):
        plan_linears(tuned_model(), cache_dir=str(tmp_path), model_name="m")


def test_an_untuned_model_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOSE_STOCK_ROWS", "2")
    model = tiny_random_bundle(seed=3).model  # never tuned: plain nn.Linear
    info = plan_linears(model, cache_dir=str(tmp_path), model_name="m")
    assert info["source"] == "untuned" and info["stock_rows"] == 0 and not os.listdir(tmp_path)


def test_the_cache_key_follows_the_thread_count(tmp_path):
    threads = torch.get_num_threads()
    try:
        first = plan_path(str(tmp_path), "m")
        torch.set_num_threads(1 if threads != 1 else 2)
        assert plan_path(str(tmp_path), "m") != first
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("fields, expected", [
    ({"cpu family": "25", "model": "1", "stepping": "1", "flags": "fpu sse2 avx avx2 fma"}, "25/1/1 avx2"),
    ({"cpu family": "26", "model": "2", "stepping": "0", "flags": "avx2 avx512f avx512bw"}, "26/2/0 avx512"),
    ({"cpu family": "6", "model": "207", "flags": "sse2"}, "6/207/? no-avx2"),
    ({}, "?"),
])
def test_cpu_id_tells_apart_hosts_of_one_model_name(monkeypatch, fields, expected):
    """Two AMD EPYC hosts read "AMD EPYC" alike; records carry family/model/stepping and the ISA."""
    monkeypatch.setattr(plan_mod, "cpu_fields", lambda *names: {k: v for k, v in fields.items() if k in names})
    assert plan_mod.cpu_id() == expected
    info = plan_linears(tiny_random_bundle(seed=3).model, cache_dir="unused", model_name="m")
    assert info["cpu_id"] == expected
