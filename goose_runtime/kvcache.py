"""A KV cache that grows in place and compacts to the accepted path without copying itself.

transformers' ``DynamicLayer`` concatenates the whole cache on every forward (O(context) copies per
cycle). :class:`GrowableLayer` keeps a preallocated buffer per layer (capacity doubles when full,
amortised O(1) per token) and exposes ``keys``/``values`` as views of its filled part, so a forward
writes only its new positions. After verification :func:`compact` keeps the accepted path: it
gathers the accepted nodes' K/V (a handful of positions) into place and drops the rest by
shortening the length -- nothing else moves. When the accepted nodes already sit right after the
root (a chain accepted from its start) nothing is copied at all.

Example:
    >>> import torch
    >>> cache = new_cache()
    >>> k = torch.arange(5.).view(1, 1, 5, 1)
    >>> _ = cache.update(k, k, 0)
    >>> compact(cache, past=1, path=[0, 2, 3])   # keep the root (pos 1) and nodes 2, 3 (pos 3, 4)
    >>> cache.layers[0].keys.flatten().tolist()
    [0.0, 1.0, 3.0, 4.0]
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class GrowableLayer(DynamicLayer):
    """One layer's K/V in a buffer of shape (batch, heads, capacity, head_dim)."""

    initial_capacity = 256

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.length = 0
        shape = list(key_states.shape)
        shape[-2] = self.initial_capacity
        self._kbuf = key_states.new_empty(shape)
        vshape = list(value_states.shape)
        vshape[-2] = self.initial_capacity
        self._vbuf = value_states.new_empty(vshape)
        self._refresh()
        self.is_initialized = True

    def _refresh(self) -> None:
        self.keys = self._kbuf[..., : self.length, :]
        self.values = self._vbuf[..., : self.length, :]

    def _reserve(self, needed: int) -> None:
        cap = self._kbuf.shape[-2]
        if needed <= cap:
            return
        while cap < needed:
            cap *= 2
        for name in ("_kbuf", "_vbuf"):
            old = getattr(self, name)
            shape = list(old.shape)
            shape[-2] = cap
            new = old.new_empty(shape)
            new[..., : self.length, :] = old[..., : self.length, :]
            setattr(self, name, new)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        self._reserve(self.length + n)
        self._kbuf[..., self.length: self.length + n, :] = key_states
        self._vbuf[..., self.length: self.length + n, :] = value_states
        self.length += n
        self._refresh()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative count of tokens to remove")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        self.length = max(0, self.length + tokens_to_remove)
        self._refresh()

    def set_length(self, length: int) -> None:
        self.length = length
        self._refresh()

    def move(self, src: torch.Tensor, dst_start: int) -> None:
        """Copy positions ``src`` (ascending, each >= its destination) to ``dst_start, dst_start+1, ...``."""
        n = src.numel()
        self._kbuf[..., dst_start: dst_start + n, :] = self._kbuf.index_select(-2, src)
        self._vbuf[..., dst_start: dst_start + n, :] = self._vbuf.index_select(-2, src)

    def reset(self) -> None:
        self.length = 0
        if self.is_initialized:
            self._refresh()


def new_cache() -> Cache:
    """An empty cache whose layers are :class:`GrowableLayer` (created lazily, one per model layer)."""
    return Cache(layer_class_to_replicate=GrowableLayer)


def compact(cache: Cache, past: int, path: list[int]) -> None:
    """Keep cache positions ``[0, past)`` plus the tree nodes on ``path`` (node i sits at ``past + i``;
    ``path`` starts with the root, node 0, and is increasing)."""
    keep = len(path)
    if any(node != i for i, node in enumerate(path)):
        first = next(i for i, node in enumerate(path) if node != i)  # nodes before it are in place
        src = torch.tensor([past + node for node in path[first:]], dtype=torch.long)
        for layer in cache.layers:
            layer.move(src.to(layer._kbuf.device, non_blocking=True), past + first)
    for layer in cache.layers:
        layer.set_length(past + keep)
