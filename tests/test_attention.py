"""attention.py: packed grouped-query tree attention against transformers' SDPA (the reference)."""
from __future__ import annotations

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from goose_runtime.attention import NAME, packed_sdpa, use_packed_attention
from goose_runtime.model import tiny_random_bundle
from goose_runtime.verify import MaskBuilder


class Layer:
    def __init__(self, groups: int) -> None:
        self.num_key_value_groups, self.is_causal, self.training = groups, True, False


@pytest.mark.parametrize("groups,q,past", [(3, 8, 40), (3, 1, 10), (2, 17, 5), (1, 6, 12), (4, 33, 0)])
def test_packed_equals_repeat_kv_sdpa(groups, q, past):
    gen = torch.Generator().manual_seed(groups * 100 + q)
    kv_heads, d = 3, 16
    query = torch.randn(1, kv_heads * groups, q, d, generator=gen)
    key = torch.randn(1, kv_heads, past + q, d, generator=gen)
    value = torch.randn(1, kv_heads, past + q, d, generator=gen)
    parent = [-1] + [torch.randint(0, i, (1,), generator=gen).item() for i in range(1, q)]
    mask = MaskBuilder(torch.float32, torch.device("cpu")).tree_mask(parent, past)
    want, _ = sdpa_attention_forward(Layer(groups), query, key, value, mask, scaling=0.25)
    got, _ = packed_sdpa(Layer(groups), query, key, value, mask, scaling=0.25)
    assert got.shape == want.shape == (1, q, kv_heads * groups, d)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_model_switches_only_from_sdpa():
    bundle = tiny_random_bundle()
    assert bundle.model.config._attn_implementation == NAME   # the bundles use it by default
    bundle.model.set_attn_implementation("eager")
    assert not use_packed_attention(bundle.model)
    assert bundle.model.config._attn_implementation == "eager"
