"""A KV cache that grows in place and compacts to the accepted path in one copy for all layers.

transformers' ``DynamicLayer`` concatenates the whole cache on every forward (O(context) copies per
cycle). Here every layer's K and V live in one buffer per kind, shaped (layers, heads, capacity,
head_dim): the capacity doubles when full (amortised O(1) per token), a forward writes only its new
positions, and a layer's ``keys``/``values`` are views of its slice, derived on access. After
verification :func:`compact` keeps the accepted path: it gathers the accepted nodes' K/V (a
handful of positions) into place for *all layers at once* -- one ``index_select`` and one copy per
kind, where per-layer buffers needed 4 ops per layer (120 on a 30-layer model) -- and drops the
rest by shortening the lengths. When the accepted nodes already sit right after the root (a chain
accepted from its start) nothing is copied at all.

Compromises: batch size 1 only (the decoder verifies one tree at a time); all layers on one device
(no ``device_map`` split across GPUs); growing the capacity briefly holds the old and the new
buffers of every layer; transformers' offloading and beam helpers (``offload``, ``prefetch``,
``reorder_cache``, ``batch_*``) are not supported -- they assign tensors to ``keys``/``values``, which
raises.

Example:
    >>> import torch
    >>> cache = new_cache(num_layers=1)
    >>> k = torch.arange(5.).view(1, 1, 5, 1)
    >>> _ = cache.update(k, k, 0)
    >>> compact(cache, past=1, path=[0, 2, 3])   # keep the root (pos 1) and nodes 2, 3 (pos 3, 4)
    >>> cache.layers[0].keys.flatten().tolist()
    [0.0, 1.0, 3.0, 4.0]
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class KVStore:
    """The K and V buffers of every layer of one cache: (layers, heads, capacity, head_dim) each."""

    initial_capacity = 256

    def __init__(self, num_layers: int) -> None:
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.num_layers = num_layers
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def allocate(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Create the buffers from the first layer's states (their heads, head_dim, dtype, device;
        batch 1, which :meth:`GrowableLayer.update` checks)."""
        _, hk, _, dk = key_states.shape
        _, hv, _, dv = value_states.shape
        self.k = key_states.new_empty((self.num_layers, hk, self.initial_capacity, dk))
        self.v = value_states.new_empty((self.num_layers, hv, self.initial_capacity, dv))

    def reserve(self, needed: int) -> None:
        """Make room for ``needed`` positions in every layer, keeping what the buffers hold (all of
        the old capacity is copied: mid-forward, the layers already updated hold more positions
        than the rest)."""
        old_cap = cap = self.k.shape[2]
        if needed <= cap:
            return
        while cap < needed:
            cap *= 2
        for name in ("k", "v"):
            old = getattr(self, name)
            new = old.new_empty(old.shape[:2] + (cap,) + old.shape[3:])
            new[:, :, :old_cap] = old
            setattr(self, name, new)

    def move(self, src: torch.Tensor, dst_start: int) -> None:
        """In every layer, copy positions ``src`` (ascending, each >= its destination) to
        ``dst_start, dst_start + 1, ...``."""
        n = src.numel()
        src = src.to(self.k.device, non_blocking=True)
        self.k[:, :, dst_start: dst_start + n] = self.k.index_select(2, src)
        self.v[:, :, dst_start: dst_start + n] = self.v.index_select(2, src)


def _buffer_view(kind: str, name: str) -> property:
    """A layer attribute (``keys``/``values``) derived from the store's ``kind`` buffer on access,
    so it is never stale after compact() or a capacity change. transformers' __init__/reset
    assign None (accepted); its offloading and beam helpers assign tensors (unsupported: they raise)."""
    def get(layer: "GrowableLayer") -> torch.Tensor | None:
        if not layer.is_initialized:
            return None
        return getattr(layer.store, kind)[layer.index: layer.index + 1, :, : layer.length]

    def set_(layer: "GrowableLayer", value) -> None:
        if value is not None:
            raise AttributeError(f"GrowableLayer.{name} is a view of the shared KV buffer")
    return property(get, set_)


class GrowableLayer(DynamicLayer):
    """One layer's view of a :class:`KVStore`: slice ``index`` of its buffers, ``length`` positions."""

    keys = _buffer_view("k", "keys")
    values = _buffer_view("v", "values")

    def __init__(self, store: KVStore, index: int) -> None:
        super().__init__()
        self.store, self.index, self.length = store, index, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        if self.store.k is None:
            self.store.allocate(key_states, value_states)
        self.length = 0
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if key_states.shape[0] != 1:
            raise ValueError(f"the goose KV cache holds batch size 1, got {key_states.shape[0]}")
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, start = key_states.shape[-2], self.length
        self.store.reserve(start + n)
        self.store.k[self.index, :, start: start + n] = key_states[0]
        self.store.v[self.index, :, start: start + n] = value_states[0]
        self.length = start + n
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative count of tokens to remove")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        self.length = max(0, self.length + tokens_to_remove)

    def reset(self) -> None:
        self.length = 0


def new_cache(num_layers: int) -> Cache:
    """An empty cache for a model of ``num_layers`` layers (``model.config.num_hidden_layers``)."""
    store = KVStore(num_layers)
    return Cache(layers=[GrowableLayer(store, i) for i in range(num_layers)])


def cache_for(model) -> Cache:
    """An empty cache sized for ``model`` (a transformers causal LM)."""
    return new_cache(model.config.get_text_config().num_hidden_layers)


def compact(cache: Cache, past: int, path: list[int]) -> None:
    """Keep cache positions ``[0, past)`` plus the tree nodes on ``path`` (node i sits at ``past + i``;
    ``path`` starts with the root, node 0, and is increasing)."""
    keep = len(path)
    if any(node != i for i, node in enumerate(path)):
        first = next(i for i, node in enumerate(path) if node != i)  # nodes before it are in place
        src = torch.tensor([past + node for node in path[first:]], dtype=torch.long)
        cache.layers[0].store.move(src, past + first)
    for layer in cache.layers:
        layer.length = past + keep
