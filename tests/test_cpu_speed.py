"""tune_for_cpu: the oneDNN linears give the stock logits to fp32 rounding, and the same greedy tokens."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from goose_runtime.cpu_speed import OneDnnLinear, onednn_available, tune_for_cpu, untune
from goose_runtime.kvcache import cache_for
from goose_runtime.model import tiny_random_bundle
from goose_runtime.profile import ternary_parents
from goose_runtime.verify import MaskBuilder, forward

pytestmark = pytest.mark.skipif(not onednn_available(), reason="torch build without oneDNN")


def _tree_logits(model, prefix: list[int], q: int, seed: int) -> torch.Tensor:
    """Logits of a q-node tree forward after ``prefix`` in a growable cache, as the decoder runs it."""
    masks = MaskBuilder(torch.float32, torch.device("cpu"))
    cache = cache_for(model)
    n = len(prefix)
    with torch.inference_mode():
        forward(model, torch.tensor(prefix), torch.arange(n), masks.causal_mask(n), cache)
        parent = ternary_parents(q)
        depth = [0] * q
        for i in range(1, q):
            depth[i] = depth[parent[i]] + 1
        tokens = torch.randint(0, model.config.vocab_size, (q,), generator=torch.Generator().manual_seed(seed))
        return forward(model, tokens, torch.tensor(depth) + n, masks.tree_mask(parent, n), cache).clone()


def _greedy(model, prefix: list[int], steps: int) -> list[int]:
    ids = list(prefix)
    with torch.inference_mode():
        for _ in range(steps):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prefix):]


@pytest.mark.parametrize("q", [1, 2, 5, 8, 17, 32])
def test_tuned_logits_equal_stock_within_fp32_rounding(q):
    model = tiny_random_bundle(seed=3).model
    prefix = [(7 * i + 3) % 500 for i in range(40)]
    ref = _tree_logits(model, prefix, q, seed=q)
    info = tune_for_cpu(model)
    assert info["applied"] and info["linears"] == 2 * 7 + 1  # q k v o gate up down per layer + lm_head
    got = _tree_logits(model, prefix, q, seed=q)
    assert got.shape == ref.shape == (q, 512)
    assert torch.allclose(got, ref, atol=1e-5, rtol=0)
    untune(model)
    assert torch.equal(_tree_logits(model, prefix, q, seed=q), ref)


def test_tuned_greedy_decoding_gives_the_same_tokens():
    model = tiny_random_bundle(seed=4).model
    prefix = [(11 * i + 5) % 500 for i in range(24)]
    ref = _greedy(model, prefix, steps=24)
    tune_for_cpu(model)
    assert _greedy(model, prefix, steps=24) == ref


def test_tuned_linear_really_takes_the_onednn_path(monkeypatch):
    model = tiny_random_bundle(seed=5).model
    tune_for_cpu(model)
    calls = []
    real = torch.ops.mkldnn._linear_pointwise

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", spy)
    with torch.inference_mode():
        model(input_ids=torch.tensor([[5, 6, 7]]))
    assert len(calls) == 15


def test_idempotent_and_keeps_parameters_and_tied_weights():
    model = tiny_random_bundle(seed=6).model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = tune_for_cpu(model)
    second = tune_for_cpu(model)
    assert first["linears"] == 15 and first["packed_mb"] > 0
    assert second["applied"] and second["linears"] == 0
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert sum(isinstance(m, OneDnnLinear) for m in model.modules()) == 15
    assert untune(model) == 15 and not any(isinstance(m, OneDnnLinear) for m in model.modules())


def test_repacks_after_an_in_place_weight_change():
    layer = nn.Linear(16, 8)
    tune_for_cpu(layer)
    x = torch.randn(3, 16)
    with torch.no_grad():
        layer.weight.mul_(2.0)
    with torch.inference_mode():
        got = layer(x)
    assert torch.allclose(got, torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-6, rtol=0)


def test_gradients_still_flow_through_the_dense_weight():
    layer = nn.Linear(16, 8)
    tune_for_cpu(layer)
    layer(torch.randn(4, 16)).sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0


def test_no_op_outside_cpu_fp32():
    model = tiny_random_bundle(seed=7).model.to(torch.bfloat16)
    info = tune_for_cpu(model)
    assert not info["applied"] and "bfloat16" in info["reason"] and info["linears"] == 0
    assert not any(isinstance(m, OneDnnLinear) for m in model.modules())


def test_environment_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv("GOOSE_CPU_TUNE", "0")
    model = tiny_random_bundle(seed=8).model
    info = tune_for_cpu(model)
    assert not info["applied"] and info["reason"] == "GOOSE_CPU_TUNE=0"
    assert not any(isinstance(m, OneDnnLinear) for m in model.modules())
