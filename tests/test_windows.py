"""Sliding-window masks: the layout read from a config, the narrowing against a direct rule, refusals."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from goose_runtime.verify import MaskBuilder
from goose_runtime.windows import FULL, SLIDING, Layout, UnsupportedLayers, layout_of, masks_for, narrowed


@pytest.mark.parametrize("config, layout", [
    (dict(), Layout(None, False)),  # Llama: no window at all
    (dict(sliding_window=None), Layout(None, False)),
    (dict(model_type="falcon", alibi=False), Layout(None, False)),  # rotary Falcon
    (dict(sliding_window=4096), Layout(4096, False)),  # Mistral: every layer
    (dict(layer_types=[FULL, FULL], sliding_window=4096), Layout(None, False)),  # Qwen2 without use_sliding_window
    (dict(layer_types=[SLIDING, FULL], sliding_window=512), Layout(512, True)),  # Gemma 2/3
])
def test_layout_follows_the_config(config, layout):
    assert layout_of(SimpleNamespace(**config)) == layout


@pytest.mark.parametrize("config, needle", [
    (dict(layer_types=[FULL, "linear_attention"]), "'linear_attention'"),
    (dict(layer_types=["chunked_attention", FULL]), "'chunked_attention'"),
    (dict(layer_types=[SLIDING], sliding_window=None), "sliding_window is None"),
    (dict(sliding_window=0), "not a positive integer"),
    (dict(model_type="bloom"), "ALiBi"),
    (dict(model_type="falcon", alibi=True), "ALiBi"),
    (dict(model_type="mpt", attn_config=SimpleNamespace(alibi=True)), "ALiBi"),
])
def test_layers_a_tree_cannot_pass_are_refused(config, needle):
    with pytest.raises(UnsupportedLayers, match=needle):
        layout_of(SimpleNamespace(**config))


def test_narrowing_matches_the_rule_key_by_key():
    # a tree of 5 nodes after 20 cached tokens; window 6: transformers' rule is j > i - window
    parent, past, window = [-1, 0, 1, 0, 3], 20, 6
    depth = [0, 1, 2, 1, 2]
    positions = torch.tensor([past + d for d in depth])
    tree = MaskBuilder(torch.float32, torch.device("cpu")).tree_mask(parent, past)
    out = narrowed(tree, positions, window=window)[0, 0].numpy() == 0
    keys = list(range(past)) + [past + d for d in depth]
    for i, p in enumerate(positions.tolist()):
        for j, k in enumerate(keys):
            was_visible = tree[0, 0, i, j].item() == 0
            assert out[i, j] == (was_visible and k > p - window), (i, j)
    assert np.array_equal(out[:, past:], tree[0, 0, :, past:].numpy() == 0)  # the tree's own part is untouched


def test_a_window_longer_than_the_context_changes_nothing():
    mask = MaskBuilder(torch.float32, torch.device("cpu")).causal_mask(5, past=3)
    assert narrowed(mask, torch.arange(3, 8), window=100) is mask
    assert masks_for(Layout(None, False), mask, torch.arange(3, 8)) is mask


@pytest.mark.parametrize("window", [7, 8, 9])
def test_the_shape_shortcut_agrees_with_the_rule_at_its_edge(window):
    # 8 keys (positions 0..7): window 8 or more hides nothing (decided from the shape, no device sync); 7 hides key 0 from 7
    mask = MaskBuilder(torch.float32, torch.device("cpu")).causal_mask(3, past=5)
    out = narrowed(mask, torch.arange(5, 8), window=window)[0, 0] == 0
    want = [[j <= i and j > i - window for j in range(8)] for i in range(5, 8)]
    assert out.tolist() == want
    assert (window >= 8) == (narrowed(mask, torch.arange(5, 8), window=window) is mask)


def test_per_layer_models_get_both_masks():
    mask = MaskBuilder(torch.float32, torch.device("cpu")).causal_mask(8)
    both = masks_for(Layout(2, True), mask, torch.arange(8))
    assert set(both) == {FULL, SLIDING} and both[FULL] is mask
    assert (both[SLIDING][0, 0] == 0).sum(dim=1).tolist() == [1, 2, 2, 2, 2, 2, 2, 2]


def test_load_model_refuses_recurrent_layers_in_one_line(tmp_path):
    # refused from the config alone, before the tokenizer and the weights load
    from transformers import LlamaConfig

    from goose_runtime.model import ModelLoadError, load_model
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2)
    config.layer_types = [FULL, "linear_attention"]  # what a hybrid (Mamba / GDN) model declares
    config.save_pretrained(tmp_path / "hybrid")
    with pytest.raises(ModelLoadError, match="layers of type 'linear_attention' cannot verify") as info:
        load_model(str(tmp_path / "hybrid"), device="cpu")
    assert "\n" not in str(info.value)
