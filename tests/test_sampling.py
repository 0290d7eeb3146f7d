"""Sampling with a temperature (goose_runtime.sampling): the noise, its distribution, and that every
method emits ar's sampled tokens, on the tiny random model and (slow) on the real default model."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import stats

from goose_runtime.config import ConfigError, DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.readout import NaNLogitsError
from goose_runtime.runner import parse_labeled
from goose_runtime.sampling import PositionNoise, position_noise, prompt_key

TINY_METHODS = ["pld", "tr", "iso:3", "mixed-iso:3", "goose", "goose@8"]


def test_noise_is_fixed_by_seed_and_position_and_differs_between_them():
    a = position_noise(3, 17, 1000)
    assert a.shape == (1000,) and a.dtype == torch.float32 and bool(torch.isfinite(a).all())
    assert torch.equal(a, position_noise(3, 17, 1000))
    assert not torch.equal(a, position_noise(3, 18, 1000)) and not torch.equal(a, position_noise(4, 17, 1000))
    assert not torch.equal(a, position_noise(3, 17, 1000, prompt_key([5, 6])))  # each prompt its own noise


def test_noise_is_standard_gumbel():
    g = torch.cat([position_noise(0, p, 5000) for p in range(20)]).numpy().astype(np.float64)
    assert stats.kstest(g, stats.gumbel_r.cdf).pvalue > 1e-3
    assert abs(g.mean() - np.euler_gamma) < 0.01  # Gumbel(0, 1)'s mean is the Euler-Mascheroni constant


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_sampled_tokens_follow_the_tempered_softmax(temperature):
    # one row of logits sampled at 4000 positions (independent noise each): chi-square against softmax(l / T)
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    noise = PositionNoise(5, temperature, seed=11)
    drawn = [noise.targets(logits, rows=[0], positions=[p])[0] for p in range(4000)]
    expected = torch.softmax(logits[0].double() / temperature, dim=0).numpy() * len(drawn)
    observed = np.bincount(drawn, minlength=5)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    if temperature == 0.5:  # and not the untempered softmax: the test can tell temperatures apart
        flat = torch.softmax(logits[0].double(), dim=0).numpy() * len(drawn)
        assert stats.chisquare(observed, flat).pvalue < 1e-6


def test_rows_of_one_position_share_its_noise_and_rows_are_read_where_asked():
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    noise = PositionNoise(50, 0.7, seed=2, prompt=[3, 4])
    got = noise.targets(logits, rows=[4, 1, 2], positions=[9, 9, 10])
    key = prompt_key([3, 4])
    want = [int(torch.argmax(logits[r] + 0.7 * position_noise(2, p, 50, key))) for r, p in ((4, 9), (1, 9), (2, 10))]
    assert got == want
    noise.forget_before(10)
    assert sorted(noise._noise) == [10]


def test_a_nan_row_is_named():
    logits = torch.zeros(3, 8)
    logits[2, 5] = math.nan
    with pytest.raises(NaNLogitsError):
        PositionNoise(8, 1.0, seed=0).targets(logits, rows=[0, 2], positions=[1, 1])


@pytest.mark.parametrize("field,value", [("temperature", -0.1), ("temperature", math.nan), ("temperature", 101.0),
                                         ("temperature", True), ("seed", -1), ("seed", 1.5), ("seed", 2**63),
                                         ("seed", False)])
def test_config_refuses_bad_sampling_values(field, value):
    with pytest.raises(ConfigError, match=field):
        DecodeConfig(**{field: value})


def test_position_noise_refuses_greedy_and_bad_seeds():
    for temperature, seed in ((0.0, 0), (1.0, -1), (math.inf, 0)):
        with pytest.raises(ValueError, match="sampling needs"):
            PositionNoise(8, temperature, seed)


@pytest.fixture(scope="module")
def tiny():
    return tiny_random_bundle()


@pytest.mark.parametrize("temperature,seed", [(0.7, 0), (1.0, 5), (2.0, 9)])
def test_every_method_emits_ars_sampled_tokens_on_the_tiny_model(sharp, temperature, seed):
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9, 5, 6, 7]
    cfg = DecodeConfig(max_new_tokens=48, temperature=temperature, seed=seed)
    ref = Decoder(sharp, parse_method("ar"), cfg).decode(prompt)
    assert len(ref.token_ids) == 48 and sum(c.tau for c in ref.cycles) == 48
    accepted = 0
    for m in TINY_METHODS:
        res = Decoder(sharp, parse_labeled(m), cfg).decode(prompt)
        assert res.token_ids == ref.token_ids, m
        assert sum(c.tau for c in res.cycles) == len(res.token_ids)
        for c in res.cycles:  # an accepted node matched; a matched node whose parent was accepted was accepted
            assert all(m_ for m_, a in zip(c.match, c.accepted) if a)
        accepted += len(res.token_ids) - len(res.cycles)
    assert accepted > 0  # drafts were accepted: the walk under sampled targets was exercised


def test_the_prompts_of_one_run_are_sampled_independently(tiny):
    # the review's case: with noise keyed by (seed, position) alone these agreed on 29 of 30 tokens
    cfg = DecodeConfig(max_new_tokens=30, temperature=1.0, seed=0)
    a, b = (Decoder(tiny, parse_method("ar"), cfg).decode(p).token_ids for p in ([5, 6, 7], [100, 200, 300]))
    assert sum(x == y for x, y in zip(a, b)) < 5


@pytest.mark.parametrize("temperature", [1e-30, 1e-40, 1e-300])
def test_a_tiny_temperature_decodes_greedily(sharp, temperature):
    # logits + T g: no quotient to overflow (logits / 1e-40 was inf, and max took the first inf)
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9]
    greedy = Decoder(sharp, parse_method("ar"), DecodeConfig(max_new_tokens=24)).decode(prompt).token_ids
    for m in ("ar", "goose"):
        cfg = DecodeConfig(max_new_tokens=24, temperature=temperature, seed=3)
        assert Decoder(sharp, parse_method(m), cfg).decode(prompt).token_ids == greedy, m


def test_auto_topology_history_and_short_runs_stay_lossless(sharp, tmp_path):
    from goose_theory.latency import LatencyProfile
    from goose_theory.topology import Topology, save_topology
    from test_lossless import CPU_PROFILE

    topo = tmp_path / "t.json"
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (1, "spine", 0),
                                       (2, "transition", 0)]), topo)
    prompts = [[5, 6, 7, 5, 6, 7, 5, 6], [9, 8, 7, 9, 8], [4]]
    for n in (1, 3, 40):
        cfg = DecodeConfig(max_new_tokens=n, temperature=0.8, seed=4, latency=LatencyProfile(**CPU_PROFILE))
        ref = [Decoder(sharp, parse_method("ar"), cfg).decode(p).token_ids for p in prompts]
        assert all(len(r) == n for r in ref)
        for spec in ("auto", f"topology:{topo}"):
            dec = Decoder(sharp, parse_method(spec), cfg)
            assert [dec.decode(p).token_ids for p in prompts] == ref, (spec, n)
        history = Decoder(sharp, parse_method("goose"), dataclasses.replace(cfg, keep_history=True))
        for _ in range(2):  # the second round drafts from the first one's outputs
            assert [history.decode(p).token_ids for p in prompts] == ref, n


def test_sampling_changes_the_output_and_the_seed_matters(tiny):
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9]
    greedy = Decoder(tiny, parse_method("ar"), DecodeConfig(max_new_tokens=24)).decode(prompt).token_ids
    runs = {s: Decoder(tiny, parse_method("ar"), DecodeConfig(max_new_tokens=24, temperature=1.0, seed=s))
            .decode(prompt).token_ids for s in (0, 1)}
    assert runs[0] != greedy and runs[0] != runs[1]
    again = Decoder(tiny, parse_method("goose"), DecodeConfig(max_new_tokens=24, temperature=1.0, seed=0))
    assert again.decode(prompt).token_ids == runs[0]


@pytest.mark.slow
@pytest.mark.parametrize("temperature,seed", [(0.3, 0), (0.8, 1)])
def test_every_method_emits_ars_sampled_tokens_on_the_real_model(temperature, seed):
    # the lossless proof of tests/test_lossless.py, sampling: stdlib text nobody here wrote
    from goose_runtime.model import load_model
    from test_lossless import code_prompt, module_docstring

    bundle = load_model("default", device="cpu", dtype="float32")
    passage = module_docstring("heapq.py")[:700]
    prompts = {"code": bundle.tokenizer.encode(code_prompt()),
               "repeat": bundle.tokenizer.encode(passage + "\n\n" + passage[:120])}
    cfg = DecodeConfig(max_new_tokens=64, temperature=temperature, seed=seed)
    greedy = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=64))
    ar = Decoder(bundle, parse_method("ar"), cfg)
    for name, ids in prompts.items():
        ref = ar.decode(ids).token_ids
        assert len(ref) == 64 and (temperature < 0.5 or ref != greedy.decode(ids).token_ids)
        for m in ("pld", "tr", "goose", "goose+prior@8", "mixed-iso:3"):
            res = Decoder(bundle, parse_labeled(m), cfg).decode(ids, prompt_id=name)
            assert res.token_ids == ref, f"{m} diverged from ar on {name} at T={temperature}"
            if m == "goose":  # drafts were accepted: the run really tested speculation
                assert sum(c.tau for c in res.cycles) > 1.3 * len(res.cycles)


def test_validate_samples_records_and_names_greedy_fit_traces(capsys, tmp_path, monkeypatch):
    import json

    import goose_runtime.model as model_mod
    from goose_runtime.cli import main
    from goose_theory.topology import Topology, save_topology
    from goose_theory.traceio import open_trace, trace_metadata

    bundle = tiny_random_bundle(seed=1)
    monkeypatch.setattr(model_mod, "load_model", lambda *a, **k: bundle)
    topo, bench = tmp_path / "tree.json", tmp_path / "set.jsonl"
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    save_topology(tree.with_meta(provenance={"traces": ["traces/stdlib-b8.parquet"]}), topo)  # greedy fit traces
    bench.write_text("".join(json.dumps({"id": i, "prompt": f"abc abc abc {i}"}) + "\n" for i in "ab"))
    assert main(["validate", "--topology", str(topo), "--bench", str(bench), "--limit", "1", "--max-new-tokens", "6",
                 "--temperature", "0.9", "--seed", "2", "--sample-top-p", "0.95", "--trace-dir", str(tmp_path / "v"),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (report["temperature"], report["seed"], report["sample_top_k"], report["sample_top_p"]) == (0.9, 2, 0, 0.95)
    assert "the fit traces were decoded at temperature 0 (greedy), this run at 0.9 top-p 0.95" in err
    decode = trace_metadata(open_trace(tmp_path / "v" / "validation-set.parquet"))["config"]["decode"]
    assert (decode["temperature"], decode["seed"], decode["sample_top_p"]) == (0.9, 2, 0.95)


@pytest.mark.slow  # the loop end to end, sampled, on one set of the real model (greedy fit traces: noted)
def test_the_loop_validates_sampled(capsys, tmp_path):
    import json

    from goose_runtime.cli import main
    from goose_theory.traceio import open_trace, trace_metadata
    from test_loop_cli import _latency_file

    out = tmp_path / "run"
    code = main(["loop", "--bench", "stdlib", "--limit", "1", "--max-new-tokens", "16", "--latency",
                 _latency_file(tmp_path), "--out-dir", str(out), "--regime-draws", "0", "--temperature", "0.7",
                 "--seed", "1", "--sample-top-p", "0.9", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "the fit traces were decoded at temperature 0 (greedy), this run at 0.7 top-p 0.9" in captured.err
    report = json.loads(captured.out)
    assert (report["temperature"], report["seed"], report["sample_top_p"]) == (0.7, 1, 0.9)
    assert all(r["lossless"] for r in report["rows"]) and len(report["rows"]) >= 3
    decode = trace_metadata(open_trace(out / "validation-stdlib.parquet"))["config"]["decode"]
    assert (decode["temperature"], decode["seed"], decode["sample_top_p"]) == (0.7, 1, 0.9)
