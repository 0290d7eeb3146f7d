"""profile-latency: verification latency per size, draft overhead, the goose-latency/1 JSON."""
from __future__ import annotations

import json

import pytest
import torch

import goose_runtime.model as model_mod
from goose_runtime.cli import main
from goose_runtime.profile import draft_overhead, profile_latency, ternary_parents, verify_latency
from goose_theory.latency import load_latency

pytestmark = pytest.mark.usefixtures("quiet_host")  # what is cached must not depend on the machine's load


@pytest.fixture(scope="module")
def bundle():
    return model_mod.tiny_random_bundle(seed=2)


def test_ternary_parents():
    assert ternary_parents(1) == [-1]
    assert ternary_parents(6) == [-1, 0, 0, 0, 1, 1]


def test_verify_latency_positive_per_size(bundle):
    seconds = verify_latency(bundle, sizes=(1, 8, 64), repeats=2, prefix_len=32)
    assert len(seconds) == 3 and all(s > 0 for s in seconds)


def test_verify_latency_rejects_bad_arguments(bundle):
    with pytest.raises(ValueError):
        verify_latency(bundle, sizes=(0, 4), repeats=1)
    with pytest.raises(ValueError):
        verify_latency(bundle, sizes=(4,), repeats=0)


def test_draft_overhead_non_negative(bundle):
    a, b = draft_overhead(bundle, prompt_ids=[5, 6, 7, 5, 6, 7, 5, 6], max_new_tokens=12, budget=8)
    assert a >= 0 and b >= 0 and a + 8 * b > 0


def test_profile_latency_builds_a_valid_profile(bundle):
    prof = profile_latency(bundle, sizes=(4, 1, 2, 4), repeats=1, prefix_len=16, draft_tokens=8)
    assert prof.sizes == (1, 2, 4) and len(prof.seconds) == 3
    assert prof.model == "tiny-random" and prof.dtype == "float32" and prof.device.startswith("cpu")


def test_cli_writes_latency_json(capsys, tmp_path, bundle, monkeypatch):
    monkeypatch.setattr(model_mod, "load_model", lambda name="default", **kw: bundle)
    out = tmp_path / "lat.json"
    assert main(["profile-latency", "--sizes", "1,2,8", "--repeats", "1", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    prof = load_latency(out)
    assert list(prof.sizes) == report["sizes"] == [1, 2, 8]
    assert list(prof.seconds) == pytest.approx(report["seconds"])
    assert json.loads(out.read_text())["schema"] == "goose-latency/1"


def test_cli_table_names_its_ratio_and_the_sizes_it_added(capsys, tmp_path, bundle, monkeypatch):
    # --sizes 4,8 showed size 4 as "1.000 x decode step"; --sizes 4,2,1 measured 3 too, unremarked (walkthrough)
    import dataclasses
    monkeypatch.setattr(model_mod, "load_model", lambda name="default", **kw: dataclasses.replace(
        bundle, linears={**(bundle.linears or {}), "stock_rows": 2}))
    assert main(["profile-latency", "--sizes", "4,8", "--repeats", "1", "--out", str(tmp_path / "a.json")]) == 0
    out, err = capsys.readouterr()
    assert "x size 4" in out and "x decode step" not in out and "added" not in err
    assert main(["profile-latency", "--sizes", "1,4", "--repeats", "1", "--out", str(tmp_path / "b.json")]) == 0
    out, err = capsys.readouterr()
    assert "x decode step" in out and "note: sizes 2, 3 added: the linears switch from MKL to oneDNN there" in err
    assert load_latency(tmp_path / "b.json").sizes == (1, 2, 3, 4)


@pytest.mark.parametrize("sizes", ["1,x", "0,4", ""])
def test_cli_bad_sizes(capsys, tmp_path, sizes):
    out = tmp_path / "lat.json"
    assert main(["profile-latency", "--sizes", sizes, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --sizes") and len(err.splitlines()) == 1
    assert not out.exists()


def test_device_profile_reuses_the_cached_file_and_says_its_age(monkeypatch, tmp_path):
    import os
    import time
    from types import SimpleNamespace

    from goose_runtime.linear_plan import cpu_digest
    from goose_runtime.profile import PROFILE_REVISION, device_profile
    from goose_theory.latency import LatencyProfile, save_latency

    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    stub = SimpleNamespace(name="m", device=torch.device("cpu"))
    path = tmp_path / f"latency-m-cpu{torch.get_num_threads()}t-{cpu_digest()}-float32-r{PROFILE_REVISION}.json"
    save_latency(LatencyProfile(sizes=(1, 9), seconds=(0.02, 0.03)), path)
    two_hours_ago = time.time() - 7200
    os.utime(path, (two_hours_ago, two_hours_ago))
    said = []
    profile, used = device_profile(stub, dtype="float32", log=said.append)
    assert used == str(path) and profile.seconds == (0.02, 0.03)
    assert len(said) == 1 and "measured 2.0 h ago" in said[0]


def test_device_profile_measures_once_then_reuses_until_refresh(monkeypatch, tmp_path, bundle):
    import os

    import goose_runtime.profile as profile_mod

    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    calls = []
    real = profile_mod.profile_latency
    monkeypatch.setattr(profile_mod, "profile_latency", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    said = []
    first, path = profile_mod.device_profile(bundle, dtype="float32", log=said.append)
    assert path == profile_mod.cached_profile_path(bundle, dtype="float32") and os.path.exists(path)
    assert len(calls) == 1 and "(once; cached)" in said[-1]
    os.utime(path, (1e9, 1e9))  # an old file: a rewrite shows as a new mtime
    again, _ = profile_mod.device_profile(bundle, dtype="float32", log=said.append)
    assert len(calls) == 1 and again == first and os.path.getmtime(path) == 1e9
    assert "--refresh-latency re-measures it" in said[-1] and "delete" not in said[-1]
    fresh, same_path = profile_mod.device_profile(bundle, dtype="float32", refresh=True, log=said.append)
    assert len(calls) == 2 and same_path == path and os.path.getmtime(path) > 1e9
    assert "re-measuring" in said[-1] and load_latency(path) == fresh
    assert [f for f in os.listdir(tmp_path) if f.startswith(".tmp")] == []  # the atomic write left no temp file


def test_device_profile_refresh_never_overwrites_an_explicit_file(tmp_path, bundle):
    from goose_runtime.profile import device_profile
    from goose_theory.latency import LatencyError, LatencyProfile, save_latency

    given = tmp_path / "mine.json"
    save_latency(LatencyProfile(sizes=(1, 9), seconds=(0.02, 0.03)), given)
    before = given.read_text()
    assert device_profile(bundle, dtype="float32", path=str(given))[0].seconds == (0.02, 0.03)
    with pytest.raises(LatencyError, match="never overwrites the given file"):
        device_profile(bundle, dtype="float32", path=str(given), refresh=True)
    assert given.read_text() == before


def test_with_crossover_adds_the_sizes_where_the_linears_switch_kernels():
    from types import SimpleNamespace

    from goose_runtime.profile import with_crossover

    def at(k):
        return SimpleNamespace(linears={"stock_rows": k})

    assert with_crossover((1, 2, 4, 8), at(3)) == (1, 2, 3, 4, 8)
    assert with_crossover((1, 2, 4, 8), at(0)) == (1, 2, 4, 8)
    assert with_crossover((1, 8), at(8)) == (1, 8)  # the step lies outside the measured range
    assert with_crossover((4, 2, 1), SimpleNamespace(linears=None)) == (1, 2, 4)
    assert with_crossover((1, 16), SimpleNamespace()) == (1, 16)  # a bundle without a plan


def test_device_profile_refuses_an_empty_path(tmp_path, bundle, monkeypatch):
    """``path=''`` is a file given, not "use the cached profile": with refresh it re-measured and
    overwrote the cache (fuzzing, `--refresh-latency --latency ''`)."""
    import goose_runtime.profile as profile_mod
    from goose_theory.latency import LatencyError

    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(profile_mod, "profile_latency", lambda *a, **k: pytest.fail("nothing is measured"))
    for refresh in (False, True):
        with pytest.raises(LatencyError, match="^the latency profile path is empty$"):
            profile_mod.device_profile(bundle, dtype="float32", path="", refresh=refresh)
    assert list(tmp_path.iterdir()) == []


def test_a_profile_measured_on_a_busy_host_serves_the_process_but_is_not_cached(monkeypatch, tmp_path, bundle):
    """As the linear plan (6 Dec): timings taken beside other work would price every later run's trees."""
    import goose_runtime.linear_plan as plan_mod
    import goose_runtime.profile as profile_mod
    from goose_theory.latency import LatencyProfile

    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(plan_mod, "host_busy", lambda: True)
    busy, quiet = LatencyProfile(sizes=(1, 9), seconds=(0.05, 0.09)), LatencyProfile(sizes=(1, 9), seconds=(0.02, 0.03))
    calls = []
    monkeypatch.setattr(profile_mod, "profile_latency", lambda *a, **kw: calls.append(1) or busy)
    said = []
    assert profile_mod.device_profile(bundle, dtype="float32", log=said.append) == (busy, "")
    assert list(tmp_path.iterdir()) == [] and "not cached" in said[-1]
    assert profile_mod.device_profile(bundle, dtype="float32") == (busy, "") and len(calls) == 1  # once per process
    monkeypatch.setattr(plan_mod, "host_busy", lambda: False)  # quiet again: --refresh-latency measures and caches
    monkeypatch.setattr(profile_mod, "profile_latency", lambda *a, **kw: calls.append(1) or quiet)
    profile, path = profile_mod.device_profile(bundle, dtype="float32", refresh=True)
    assert profile == quiet and load_latency(path) == quiet and len(calls) == 2
    monkeypatch.setattr(plan_mod, "host_busy", lambda: True)  # a busy refresh leaves the cached profile in place
    monkeypatch.setattr(profile_mod, "profile_latency", lambda *a, **kw: calls.append(1) or busy)
    assert profile_mod.device_profile(bundle, dtype="float32", refresh=True, log=said.append) == (busy, "")
    assert load_latency(path) == quiet and "the cached one stays" in said[-1]
