"""Sliding-window attention: the tree mask, narrowed for the layers that see only recent keys.

The decoder builds one 4D float mask per forward (``verify.MaskBuilder``) and hands it to the
model, which then uses it as it is: transformers builds no mask of its own when it is given a 4D
one. For a model whose layers all attend to every earlier position (Llama, the default model)
that is the whole story. Some families limit some or all layers to the last ``sliding_window``
positions (Mistral, Phi-3 and Mixtral when their config sets ``sliding_window``; Gemma 2/3, and
Qwen2/Qwen3 with ``use_sliding_window``, per layer through ``config.layer_types``). Given only the
full mask, those layers would attend too far back, and every method, ``ar`` included, would
decode other tokens than the model's own greedy decoding; the methods would still agree with each
other, so only a comparison with ``model.generate`` shows it (``tests/test_architectures.py``).

transformers' rule (``masking_utils.sliding_window_overlay``): a query at position i sees the key
at position j only if ``j > i - sliding_window``. Positions here are absolute: cached key k sits
at position k (the cache keeps only the accepted path, ``kvcache.compact``), and tree node j at
``past + depth_j``. Families with per-layer types take a dict ``{layer type: mask}``; the others
(no ``layer_types``, one window for every layer) take the narrowed mask alone.

Layers that are not attention over a cache the decoder can roll back (recurrent state, chunked
or compressed attention) are refused when the model loads: their output for a rejected branch
cannot be undone or masked the same way. So are ALiBi models (BLOOM, MPT, Falcon with ``alibi``):
their position bias comes from a key's index in the sequence, not from ``position_ids``, so two
siblings in a tree would sit at different distances from their parent (a tiny MPT's ``tr`` decoded
other tokens than its ``ar``).

Example:
    >>> from types import SimpleNamespace
    >>> layout_of(SimpleNamespace(layer_types=["sliding_attention", "full_attention"], sliding_window=4))
    Layout(window=4, per_layer=True)
    >>> mask = torch.zeros(1, 1, 2, 6)  # 4 cached keys, then two tree nodes at positions 4, 5
    >>> m = narrowed(mask, torch.tensor([4, 5]), window=3)
    >>> (m[0, 0] == 0).int().tolist()  # position 4 sees keys 2..5, position 5 sees 3..5
    [[0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

FULL, SLIDING = "full_attention", "sliding_attention"


@dataclass(frozen=True)
class Layout:
    """``window``: the sliding window, None where every layer sees every key; ``per_layer``: the
    model takes a dict of masks by layer type (``config.layer_types``) rather than one mask."""

    window: int | None
    per_layer: bool


class UnsupportedLayers(ValueError):
    """The model has layers the tree verification cannot mask (one line: which)."""


def _alibi(config: Any) -> bool:
    # BLOOM always, MPT and Falcon by a switch (the families of transformers that use ALiBi)
    attn = getattr(config, "attn_config", None)
    return (getattr(config, "model_type", None) == "bloom" or getattr(config, "alibi", False) is True
            or getattr(attn, "alibi", False) is True or (isinstance(attn, dict) and attn.get("alibi") is True))


def layout_of(config: Any) -> Layout:
    """How the model's layers attend, from its config (see the module docstring)."""
    if _alibi(config):
        raise UnsupportedLayers("it encodes positions as ALiBi biases from each key's index in the sequence, not "
                                "from position_ids, so a tree's side branches would be scored at the wrong distances")
    types = getattr(config, "layer_types", None)
    window = getattr(config, "sliding_window", None)
    if types:
        other = sorted(set(types) - {FULL, SLIDING})
        if other:
            raise UnsupportedLayers(f"its layers of type {', '.join(map(repr, other))} cannot verify a draft tree in "
                                    "one pass (only full and sliding-window attention can)")
        if SLIDING in types:
            if not isinstance(window, int) or window < 1:
                raise UnsupportedLayers(f"it has sliding-window layers but its sliding_window is {window!r}")
            return Layout(window, True)
        return Layout(None, False)
    if window is None:
        return Layout(None, False)
    if not isinstance(window, int) or window < 1:
        raise UnsupportedLayers(f"its sliding_window is {window!r}, not a positive integer")
    return Layout(window, False)


def narrowed(mask: torch.Tensor, positions: torch.Tensor, *, window: int) -> torch.Tensor:
    """``mask`` (1, 1, q, L) with every key at or before ``position - window`` hidden, row by row;
    the first ``L - q`` keys are the cache (key k at position k), the last q the queries themselves,
    at positions below L (``past + depth``)."""
    q, length = mask.shape[-2], mask.shape[-1]
    if length <= window:  # every position < L <= window: nothing is that old. Decided from the shape,
        return mask       # not from the tensors, so a CUDA forward does not wait on a device sync
    keys = torch.cat([torch.arange(length - q, device=mask.device), positions.to(mask.device)])
    too_old = keys[None, :] <= positions.to(mask.device)[:, None] - window
    return mask.masked_fill(too_old[None, None], torch.finfo(mask.dtype).min)


def masks_for(layout: Layout, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
    """What the model's ``attention_mask`` is for this forward: the mask itself, narrowed, or both by type."""
    if layout.window is None:
        return mask
    window = narrowed(mask, positions, window=layout.window)
    return {FULL: mask, SLIDING: window} if layout.per_layer else window
