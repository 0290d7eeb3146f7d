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


def test_one_forward_tiles_a_mask_once_and_forgets_it_after():
    from goose_runtime import attention

    mask = torch.zeros(1, 1, 4, 9)
    assert attention._tiled(mask, 3) is not attention._tiled(mask, 3)        # outside: a new tile each call
    with attention.one_forward():
        first = attention._tiled(mask, 3)
        assert attention._tiled(mask, 3) is first                            # every layer reuses it
        assert attention._tiled(mask, 2).shape == (1, 1, 8, 9)               # another grouping: tiled anew
        other = torch.zeros(1, 1, 4, 9)
        assert attention._tiled(other, 3) is not first                       # another mask object too
    mask.fill_(-1.0)                                                         # changed after the block:
    assert attention._tiled(mask, 3).min() == -1.0                           # nothing stale is kept
    torch.testing.assert_close(first, torch.zeros(1, 1, 12, 9))


def test_the_forward_with_the_shared_tile_equals_the_one_without(monkeypatch):
    from goose_runtime import attention
    from goose_runtime.kvcache import cache_for

    tiles = []
    real_tiled = attention._tiled
    monkeypatch.setattr(attention, "_tiled", lambda m, g: tiles.append(real_tiled(m, g)) or tiles[-1])
    bundle = tiny_random_bundle()
    model, masks = bundle.model, MaskBuilder(torch.float32, torch.device("cpu"))
    parent = [-1, 0, 0, 1, 1, 2]
    ids = torch.tensor([3, 5, 7, 11, 13, 17])
    pos = torch.tensor([0, 1, 1, 2, 2, 2]) + 4
    outs = []
    for shared in (True, False):
        cache = cache_for(model)
        prefix = torch.tensor([1, 2, 3, 4])
        with torch.inference_mode():
            model(input_ids=prefix[None], attention_mask=masks.causal_mask(4), position_ids=torch.arange(4)[None],
                  cache=cache, use_cache=True)
            kwargs = dict(input_ids=ids[None], attention_mask=masks.tree_mask(parent, 4), position_ids=pos[None],
                          cache=cache, use_cache=True)
            tiles.clear()
            if shared:
                with attention.one_forward():
                    outs.append(model(**kwargs).logits)
            else:
                outs.append(model(**kwargs).logits)
            layers = model.config.num_hidden_layers
            assert len(tiles) == layers >= 2                       # every layer asks for the tile
            distinct = len({id(t) for t in tiles})
            assert distinct == (1 if shared else layers)           # made once, or once per layer
    assert torch.equal(outs[0], outs[1])
