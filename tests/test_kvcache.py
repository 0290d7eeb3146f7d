"""kvcache.py: the shared-buffer cache against plain concatenation (the reference), compaction."""
from __future__ import annotations

import doctest
import random

import pytest
import torch

import goose_runtime.kvcache as kvcache_module
from goose_runtime.kvcache import KVStore, compact, new_cache


def test_doctest():
    assert doctest.testmod(kvcache_module).failed == 0


def _states(n: int, layer: int, step: int, heads: int = 2, dim: int = 3):
    base = torch.arange(n * heads * dim, dtype=torch.float32).view(1, heads, n, dim)
    return base + 1000 * layer + 100000 * step, -(base + 1000 * layer + 100000 * step)


def test_growth_across_capacity_keeps_every_layer_equal_to_concatenation(monkeypatch):
    monkeypatch.setattr(KVStore, "initial_capacity", 4)
    cache, ref = new_cache(3), [[None, None] for _ in range(3)]
    for step, n in enumerate([3, 1, 5, 2, 9]):       # crosses capacities 4, 8, 16, 32 mid-forward
        for layer in range(3):
            k, v = _states(n, layer, step)
            got_k, got_v = cache.update(k, v, layer)
            ref[layer] = [k if ref[layer][0] is None else torch.cat([ref[layer][0], k], -2),
                          v if ref[layer][1] is None else torch.cat([ref[layer][1], v], -2)]
            assert torch.equal(got_k, ref[layer][0]) and torch.equal(got_v, ref[layer][1])
    for layer in range(3):
        assert torch.equal(cache.layers[layer].keys, ref[layer][0])
        assert cache.layers[layer].get_seq_length() == 20


@pytest.mark.parametrize("seed", range(5))
def test_compact_equals_selecting_the_path_in_every_layer(seed):
    rng = random.Random(seed)
    past, n_tree = 6, 9
    path = [0] + sorted(rng.sample(range(1, n_tree), rng.randrange(0, 5)))
    cache = new_cache(2)
    refs = []
    for layer in range(2):
        k, v = _states(past + n_tree, layer, 0)
        cache.update(k, v, layer)
        keep = list(range(past)) + [past + node for node in path]
        refs.append((k[:, :, keep], v[:, :, keep]))
    compact(cache, past, path)
    for layer, (k, v) in enumerate(refs):
        assert torch.equal(cache.layers[layer].keys, k) and torch.equal(cache.layers[layer].values, v)


def test_crop_reset_and_bad_input():
    cache = new_cache(1)
    k, v = _states(5, 0, 0)
    cache.update(k, v, 0)
    cache.crop(-2)
    assert torch.equal(cache.layers[0].keys, k[:, :, :3])
    with pytest.raises(ValueError, match="negative"):
        cache.layers[0].crop(2)
    with pytest.raises(AttributeError, match="view"):
        cache.layers[0].keys = k
    with pytest.raises(ValueError, match="batch size 1"):
        new_cache(1).update(torch.zeros(2, 1, 1, 1), torch.zeros(2, 1, 1, 1), 0)
    with pytest.raises(ValueError, match="batch size 1"):   # also once the buffers exist
        cache.update(torch.zeros(2, 2, 1, 3), torch.zeros(2, 2, 1, 3), 0)
    with pytest.raises(ValueError, match="num_layers"):
        new_cache(0)


def test_crop_past_the_start_empties_the_cache():
    cache = new_cache(1)
    cache.update(*_states(5, 0, 0), 0)
    cache.crop(-8)  # more than it holds: empty, not a negative length
    assert cache.get_seq_length() == 0 and cache.layers[0].keys.shape[-2] == 0
