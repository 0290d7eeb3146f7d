"""Tree attention without copying the KV cache: grouped-query heads packed into query rows.

SmolLM2 (like most current models) uses grouped-query attention: 9 query heads share 3 key/value
heads. For one query token transformers' SDPA path already runs attention on the 3 KV heads by
stacking the 3 query heads of each group as 3 query *rows* (``pack_gqa``). For q > 1 tokens with a
mask -- every tree verification -- it instead calls ``repeat_kv``, which copies the whole K and V
cache 3x in every layer: O(context) memory traffic per cycle that plain decoding never pays, and
which grows with the text (about 70 MB per forward at 500 tokens of context).

``goose_sdpa`` generalises the one-token trick: the query (b, H, q, d) is viewed as
(b, H_kv, g*q, d) -- row ``i*q + j`` is query head ``kv*g + i`` at tree position j -- and the
(1, 1, q, L) mask is tiled g times down its rows. Every attention row sees exactly the keys,
values and mask entries it saw before, so the result is the same computation; only the copy is
gone. Anything else (no grouping, one token, a per-head or boolean mask) goes to transformers'
own SDPA function unchanged. Inside :func:`one_forward` (``verify.forward`` uses it) the tiled mask
is made once and reused by every layer, which all receive the same mask object (0.1-1.2 ms per
forward over 30 layers at 8-81 rows; ``bench/bench_attention.py``).

Example:
    >>> import torch
    >>> class Layer: num_key_value_groups, scaling = 2, 0.5
    >>> q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    >>> mask = torch.zeros(1, 1, 3, 5)
    >>> out, _ = packed_sdpa(Layer(), q, k, v, mask, scaling=0.5)
    >>> ref = torch.nn.functional.scaled_dot_product_attention(
    ...     q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=mask, scale=0.5)
    >>> torch.allclose(out, ref.transpose(1, 2), atol=1e-6)
    True
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "goose_sdpa"


def packed_sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Same contract as transformers' ``sdpa_attention_forward``; output (b, q, H, d)."""
    groups = getattr(module, "num_key_value_groups", 1)
    b, heads, q, d = query.shape
    plain = (groups == 1 or q == 1 or attention_mask is None or attention_mask.dtype == torch.bool
             or attention_mask.shape[1] != 1 or dropout or kwargs.get("position_bias") is not None)
    if plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    packed = query.reshape(b, heads // groups, groups * q, d)
    mask = _tiled(attention_mask, groups)
    out = torch.nn.functional.scaled_dot_product_attention(packed, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(b, heads, q, d).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, packed_sdpa)

_forward = threading.local()  # .memo: {(id(mask), groups): (mask, tiled mask)} within one forward pass


@contextmanager
def one_forward() -> Iterator[None]:
    """Within this block the tiled mask of a given mask object is computed once. Only for the span
    of one forward pass, in which the mask is not modified (it is never kept past the block)."""
    _forward.memo = None
    _forward.active = True
    try:
        yield
    finally:
        _forward.active, _forward.memo = False, None


def _tiled(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """``mask`` (1, 1, q, L) tiled ``groups`` times down its rows: (1, 1, groups * q, L)."""
    if not getattr(_forward, "active", False):
        return mask.repeat(1, 1, groups, 1)
    memo = _forward.memo  # a model with sliding-window layers alternates two masks (goose_runtime.windows)
    if memo is None:
        memo = _forward.memo = {}
    key = (id(mask), groups)
    if key not in memo:  # the entry holds the mask itself, so its id is not reused within the block
        memo[key] = (mask, mask.repeat(1, 1, groups, 1))
    return memo[key][1]


def use_packed_attention(model: Any) -> bool:
    """Switch ``model`` to :func:`packed_sdpa` where it runs transformers' SDPA now; True if switched."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(NAME)
    return True
