"""Scoring a draft tree in one forward pass, and UnifiedGreedyWalk over the result.

The tree goes in as one sequence: the root (anchor) then every node, parents first, at
``position_ids = past + depth``, under a 4D *float* mask of shape (1, 1, q, past + q) that is 0
where a node may attend (all cached positions, its ancestors and itself) and the dtype's minimum
elsewhere. (A boolean mask under eager attention gives silently wrong logits in transformers 5;
``tests/test_decoder.py`` checks that these logits equal sequential decoding.)

Example:
    >>> tree_visibility([-1, 0, 0, 1]).astype(int).tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from goose_theory._numba import jit

from . import readout, windows
from .attention import one_forward
from .trees import DraftTree


def tree_visibility(parent: list[int]) -> np.ndarray:
    """Boolean (q, q) matrix: row i is True at i's ancestors and at i itself (parents come first).

    Raises ``ValueError`` for a list that is not such a tree (``parent[0] != -1``, or some
    ``parent[i]`` outside ``[0, i)``), which the kernel would otherwise read out of bounds."""
    arr = np.asarray(parent, dtype=np.int64)
    try:
        return _visibility(arr)
    except ValueError:  # the kernel's message is a constant: name the first bad entry here
        raise ValueError(_bad_parent(arr)) from None


def _bad_parent(parent: np.ndarray) -> str:
    if parent.shape[0] == 0:
        return "tree_visibility: empty parent list (a tree has at least its root)"
    if parent[0] != -1:
        return f"tree_visibility: parent[0] must be -1 (the root), got {parent[0]}"
    i = 1 + int(np.flatnonzero((parent[1:] < 0) | (parent[1:] >= np.arange(1, parent.shape[0])))[0])
    return f"tree_visibility: parent[{i}] must lie in [0, {i}) (parents come first), got {parent[i]}"


@jit
def _visibility(parent):
    # row i = row parent[i] (whose ones all lie before column parent[i] + 1) plus i itself; a
    # compiled loop, as goose's trees change shape every cycle (the Python loop took 36 us at 81 nodes).
    # The parents are checked in the same pass (a bad one would index out of bounds silently)
    q = parent.shape[0]
    if q == 0 or parent[0] != -1:
        raise ValueError("tree_visibility: malformed parent list")
    vis = np.zeros((q, q), dtype=np.bool_)
    vis[0, 0] = True
    for i in range(1, q):
        p = parent[i]
        if p < 0 or p >= i:
            raise ValueError("tree_visibility: malformed parent list")
        for j in range(p + 1):
            vis[i, j] = vis[p, j]
        vis[i, i] = True
    return vis


class MaskBuilder:
    """Builds the float tree mask; caches the (q, q) block per tree shape (static trees repeat)."""

    def __init__(self, dtype: torch.dtype, device: torch.device, max_cached: int = 256) -> None:
        self.dtype, self.device = dtype, device
        self.min = torch.finfo(dtype).min
        self._blocks: dict[tuple[int, ...], torch.Tensor] = {}
        self.max_cached = max_cached

    def block(self, parent: list[int]) -> torch.Tensor:
        key = tuple(parent)
        blk = self._blocks.get(key)
        if blk is None:
            vis = torch.from_numpy(tree_visibility(parent))
            blk = torch.zeros(vis.shape, dtype=self.dtype).masked_fill_(~vis, self.min).to(self.device)
            if len(self._blocks) >= self.max_cached:
                self._blocks.pop(next(iter(self._blocks)))
            self._blocks[key] = blk
        return blk

    def tree_mask(self, parent: list[int], past: int) -> torch.Tensor:
        """(1, 1, q, past + q) float mask for a tree whose root sits at position ``past``."""
        q = len(parent)
        mask = torch.zeros((1, 1, q, past + q), dtype=self.dtype, device=self.device)
        mask[0, 0, :, past:] = self.block(parent)
        return mask

    def causal_mask(self, n: int, past: int = 0) -> torch.Tensor:
        """(1, 1, n, past + n) float causal mask (the prefill)."""
        mask = torch.full((n, past + n), self.min, dtype=self.dtype, device=self.device)
        mask = torch.triu(mask, diagonal=past + 1)
        return mask[None, None]


def forward(model: Any, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache: Any) -> torch.Tensor:
    """Logits (q, vocab) of one forward pass that appends q positions to ``cache``."""
    layout = getattr(model, "_goose_layout", None)
    if layout is None:  # how its layers attend (sliding windows?): read once per model
        layout = model._goose_layout = windows.layout_of(model.config)
    with one_forward():  # every layer gets the same mask: tile it for packed attention once
        out = model(input_ids=ids[None], attention_mask=windows.masks_for(layout, mask, positions),
                    position_ids=positions[None], cache=cache, use_cache=True)
    return out.logits[0]


def top_candidates(logits: torch.Tensor, k: int, score: str | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Top-k token ids per row (best first; column 0 is the argmax) and their scores: ``"logit"``,
    ``"prob"`` or ``None`` (no scores). One blocked top-k (:func:`blocked_topk`) and one copy to the
    CPU. ``"prob"`` is the softmax normalised over the k blocks of the vocabulary that hold the top
    k (640 columns with blocks of 64, instead of a pass of ``exp`` over all 49152; on the torch path
    every column for a single row): exact when the rest of the vocabulary is negligible, an upper
    bound otherwise -- ``auto`` only bins it and calibrates the bins. On the CPU the numba
    kernel sums it with the top-k (:func:`readout.topk_probs`): after a forward has streamed the
    weights through the caches every small torch op is slow, and the torch ops of the softmax
    made a 4-row readout 0.66 ms against 0.39 now (1 Dec, ``docs/bench-runtime.md``, last section)."""
    if readout.fits(logits, k):  # on the CPU (bf16 / fp16 widened to fp32): block maxima, then one numba kernel
        if score == "prob":
            return readout.topk_probs(logits, k)
        vals_np, idx_np, _ = readout.topk_rows(logits, k)
        return idx_np, (vals_np if score else None)
    vals, idx, cand = _blocked(logits, k)
    nan = torch.isnan(vals[:, 0])  # topk ranks NaN above every number: a row with one has it first
    if bool(nan.any()):
        raise readout.NaNLogitsError(int(nan.nonzero()[0, 0]))
    idx = ties_to_argmax(logits, vals, idx)
    if score is None:
        return idx.cpu().numpy(), None
    vals = vals.float()
    if score == "prob":
        vals = torch.exp(vals - torch.logsumexp(cand.float(), dim=-1, keepdim=True))
    both = torch.cat([idx.to(vals.dtype), vals], dim=1).cpu().numpy()  # ids < 2**24 are exact in fp32
    return both[:, :k].astype(np.int64), both[:, k:].astype(np.float32)


def ties_to_argmax(logits: torch.Tensor, vals: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``idx`` (a top-k, best first) with column 0 the token ``torch.argmax`` picks: the first of
    equal maxima, the rule of greedy decoding and of :mod:`goose_runtime.readout`'s kernel.
    ``torch.topk`` leaves the order of equal values open, and it differed between k = 1 (``ar``'s
    readout) and k = 10 (a tree's) and between rows: with two lm_head rows alike a tree method
    emitted the other token of the tie, not ``ar``'s. The argmax's own column, if it has one, takes
    the displaced token, so the row keeps its k distinct tokens when the tie fits in it. Costs a
    pass over the logits only when the top two are equal (or k = 1).

    Example:
        >>> x = torch.tensor([[1., 7., 7., 3.]])
        >>> ties_to_argmax(x, torch.tensor([[7., 7.]]), torch.tensor([[2, 1]])).tolist()
        [[1, 2]]
    """
    if idx.shape[1] > 1 and not bool((vals[:, 1] == vals[:, 0]).any()):
        return idx
    first = logits.argmax(-1, keepdim=True)
    idx = torch.where(idx == first, idx[:, :1], idx)  # the argmax's column gets the token it displaces
    idx[:, :1] = first
    return idx


def blocked_topk(logits: torch.Tensor, k: int, block: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.topk(logits, k, dim=-1)`` in two passes that read the vocabulary once: the max of
    each block of columns, then an exact top-k over the k blocks with the largest maxima (a top-k
    element's block max is at least the element, so its block is among them). With blocks of 64
    columns it is 1.6x faster than one ``topk`` over 49152 columns at 9 rows and 2.5x at 61-81 rows
    on this CPU (``bench/bench_readout.py``; blocks of 1024 gave only 1.1-1.3x, as the gathered
    candidates then outweigh the saving); falls back to ``topk`` for a single row (faster there) and
    when the vocabulary does not split into blocks.

    Example:
        >>> x = torch.tensor([[0., 5., 1., 2., 9., 3., 4., 8.]])
        >>> blocked_topk(x, 2, block=2)[1].tolist()
        [[4, 7]]
    """
    vals, idx, _ = _blocked(logits, k, block)
    return vals, idx


def _blocked(logits: torch.Tensor, k: int, block: int = 0):
    """(values, indices, candidate columns): the top-k and the columns it was taken from (all of
    them when the vocabulary does not split into blocks)."""
    q, v = logits.shape
    size = next((b for b in (block, 64, 128, 256, 512, 1024) if b and v % b == 0 and v // b >= 4 * k), 0)
    if not size or (q == 1 and not block):  # one row (ar's readout): torch.topk is faster there
        vals, idx = torch.topk(logits, k, dim=-1)
        return vals, idx, logits
    blocks = logits.view(q, v // size, size)
    best = torch.topk(blocks.amax(-1), k, dim=-1).indices                       # (q, k) block ids
    cand = torch.gather(blocks, 1, best[:, :, None].expand(q, k, size)).reshape(q, k * size)
    vals, pos = torch.topk(cand, k, dim=-1)
    return vals, torch.gather(best, 1, pos // size) * size + pos % size, cand


def greedy_walk(tree: DraftTree, argmax: list[int]) -> list[int]:
    """UnifiedGreedyWalk: from the root, step to the child whose token is the target argmax at the
    current node (children are in priority order: spine first); returns the accepted path of node
    indices, root first."""
    node, path = 0, [0]
    children, token = tree.children, tree.token
    while True:
        target = argmax[node]
        for c in children[node]:
            if token[c] == target:
                node = c
                path.append(c)
                break
        else:
            return path
