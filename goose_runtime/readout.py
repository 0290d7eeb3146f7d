"""Top-k of every verified row, on the CPU (read in fp32): one pass of block maxima, then a numba kernel.

Every cycle reads the top-10 of each tree node's logits (the argmax verifies; the rest is
harvested into the adjacency table). At 81 rows that is 16 MB of logits, so the readout is
memory-bound: :func:`goose_runtime.verify.blocked_topk` already reads the vocabulary once (the max
of each 64-column block), but its second half -- a top-k over the block maxima, a gather of the k
best blocks, a top-k over those and the index arithmetic -- is five small torch ops that cost as
much again. :func:`topk_rows` keeps torch's vectorised block maxima and does the rest per row in
one numba kernel (on numba's thread pool from :data:`PARALLEL_ROWS` rows; below that, serially,
as waking the pool costs more than it saves): pick the k blocks with the largest maxima (an
element of the top k lies in one of them: its block's max is at least the element), then scan
those blocks, keeping a sorted top k by insertion.

Ties: within the scanned blocks a smaller column wins a tie (blocks are scanned in column order),
the rule of ``torch.argmax``. A row with a NaN logit raises :class:`NaNLogitsError` (a model that
emits NaN has no meaningful argmax; ``torch.argmax`` would return the NaN's column). Exact: values
and indices equal ``torch.topk``'s wherever the top k is free of ties (``tests/test_readout.py``).

Used by :func:`goose_runtime.verify.top_candidates` for contiguous CPU logits whose vocabulary
splits into at least ``4 k`` blocks, one row included (``ar``'s step: 0.11 ms against
``torch.topk``'s 0.10 ms, and ``torch.topk`` may break an exact tie at the top another way than
argmax); bf16 and fp16 logits are widened to fp32 first (exact: the same values, so the same top k);
everything else (CUDA) keeps the torch path.

Example:
    >>> import torch
    >>> x = torch.zeros(2, 1024)
    >>> x[0, 700], x[0, 3], x[1, 5] = 3.0, 2.0, 1.0
    >>> vals, idx, blocks = topk_rows(x, 2)
    >>> idx.tolist(), vals[0].tolist()
    ([[700, 3], [5, 0]], [3.0, 2.0])
"""
from __future__ import annotations

import numba
import numpy as np
import torch

from goose_theory._numba import jit, parallel_jit
from goose_theory.errors import InputError

BLOCK = 64  # columns per block: bench/bench_readout.py found 64 best at 9-81 rows (1024: 2x slower)
# rows from which the kernel runs on numba's thread pool: waking the pool right after torch's forward
# costs more than it saves on a few rows (ar's one row: 0.15 -> 0.10 ms serial) and saves 0.07 ms at
# 81 (bench_overhead A/B, 30 Nov; goose@8's 9 rows: equal either way)
PARALLEL_ROWS = 32
USE_NUMBA = True  # False: verify.top_candidates reads with torch ops alone (bench/bench_overhead.py compares)
# bf16 and fp16 logits are widened to fp32 first (exactly: both are subsets of fp32), one pass, then read
# as fp32: goose@60 drafted in 1.29 ms a cycle against 5.32 with torch's bf16 topk
# (bench_overhead --dtype bfloat16, 5 Dec)
READ_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@jit
def _insert(vals, idx, n, k, value, index):
    """Insert (value, index) into the first n entries of a descending top-k; returns the new n.
    Equal values keep the earlier entry first."""
    pos = n if n < k else k - 1
    while pos > 0 and vals[pos - 1] < value:
        if pos < k:
            vals[pos] = vals[pos - 1]
            idx[pos] = idx[pos - 1]
        pos -= 1
    vals[pos] = value
    idx[pos] = index
    return n + 1 if n < k else n


@jit
def _topk_row(x, block_max, r, k, block, vals, idx, best_blocks, nan_rows, probs):
    """Row r: ``best_blocks[r]`` = the k blocks with the largest maxima (descending), then
    ``vals[r], idx[r]`` = the top k of those blocks' columns (descending); ``nan_rows[r]`` = 1
    when a block max is NaN (torch's amax propagates it), as the scan would never pick it. When
    ``probs`` has rows, ``probs[r]`` = the top k's softmax normalised over the scanned blocks."""
    n_blocks = block_max.shape[1]
    bv = np.empty(k, np.float32)
    bi = best_blocks[r]
    n = 0
    for b in range(n_blocks):
        value = block_max[r, b]
        if value != value:
            nan_rows[r] = 1
        elif n < k or value > bv[k - 1]:
            n = _insert(bv, bi, n, k, value, b)
    if nan_rows[r]:  # topk_rows raises; and the block list may be short (all-NaN row): do not scan it
        return
    order = np.sort(bi)  # scan in column order, so a tie goes to the smaller column
    tv, ti = vals[r], idx[r]
    m = 0
    for c in range(k):
        start = order[c] * block
        for j in range(start, start + block):
            if m < k or x[r, j] > tv[k - 1]:
                m = _insert(tv, ti, m, k, x[r, j], j)
    if probs.shape[0]:
        # softmax over the k blocks' columns, shifted by the row max (tv[0]: the best block holds it)
        top, total = np.float64(tv[0]), 0.0
        for c in range(k):
            start = order[c] * block
            for j in range(start, start + block):
                total += np.exp(np.float64(x[r, j]) - top)
        for c in range(k):
            probs[r, c] = np.exp(np.float64(tv[c]) - top) / total


@jit
def _topk_serial(x, block_max, k, block, vals, idx, best_blocks, nan_rows, probs):
    for r in range(block_max.shape[0]):
        _topk_row(x, block_max, r, k, block, vals, idx, best_blocks, nan_rows, probs)


@parallel_jit
def _topk_parallel(x, block_max, k, block, vals, idx, best_blocks, nan_rows, probs):
    for r in numba.prange(block_max.shape[0]):
        _topk_row(x, block_max, r, k, block, vals, idx, best_blocks, nan_rows, probs)


class NaNLogitsError(InputError):
    """The model produced NaN logits: there is no argmax to verify against, so decoding stops
    with one line instead of emitting arbitrary tokens (``torch.argmax`` would pick the NaN)."""

    def __init__(self, row: int) -> None:
        super().__init__(f"the model produced NaN logits (row {row}: a tree node in a cycle, a prompt position "
                         "at prefill); in float16 that is usually an overflow: use --dtype bfloat16 or float32")


def fits(logits: torch.Tensor, k: int) -> bool:
    """Whether :func:`topk_rows` applies: contiguous CPU logits in fp32, bf16 or fp16 (one row too,
    so that every method breaks an exact tie at the top the same way, as ``torch.argmax`` and greedy
    generation do), a vocabulary of at least ``4 k`` whole blocks."""
    if not USE_NUMBA or logits.device.type != "cpu" or logits.dtype not in READ_DTYPES or logits.dim() != 2:
        return False
    q, v = logits.shape
    return q >= 1 and k >= 1 and v % BLOCK == 0 and v // BLOCK >= 4 * k and logits.is_contiguous()


def topk_rows(logits: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values float32 (q, k), indices int64 (q, k), blocks int64 (q, k)): the top k of each row,
    best first, and the k blocks of :data:`BLOCK` columns with the largest maxima that they were
    taken from (best first). ``logits`` must satisfy :func:`fits`."""
    vals, idx, blocks, _ = _readout(logits, k, with_probs=False)
    return vals, idx, blocks


def topk_probs(logits: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices int64 (q, k), probabilities float32 (q, k)): the top k of each row and their
    softmax normalised over the k blocks they were taken from (``k * BLOCK`` columns, summed in
    float64 in the same kernel: no second pass of torch ops over the candidates). An upper bound
    on the full-vocabulary softmax, exact when the other blocks are negligible. ``logits`` must
    satisfy :func:`fits`."""
    _, idx, _, probs = _readout(logits, k, with_probs=True)
    return idx, probs


def _readout(logits: torch.Tensor, k: int, *, with_probs: bool):
    logits = logits.detach().float()  # a no-op in fp32; bf16 / fp16 widen exactly, so the top k is theirs
    q, v = logits.shape
    block_max = logits.view(q, v // BLOCK, BLOCK).amax(-1).numpy()  # torch's SIMD reduction: one pass
    vals = np.empty((q, k), np.float32)
    idx = np.empty((q, k), np.int64)
    blocks = np.empty((q, k), np.int64)
    nan_rows = np.zeros(q, np.uint8)
    probs = np.empty((q, k) if with_probs else (0, k), np.float32)
    args = (logits.numpy(), block_max, k, BLOCK, vals, idx, blocks, nan_rows, probs)
    if q < PARALLEL_ROWS:
        _topk_serial(*args)
    else:
        before = numba.get_num_threads()
        want = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
        try:  # numba's pool follows torch's thread count (--threads 1 runs stay on one core), for this call only
            numba.set_num_threads(want)
            _topk_parallel(*args)
        finally:
            numba.set_num_threads(before)
    if nan_rows.any():
        raise NaNLogitsError(int(np.argmax(nan_rows)))
    return vals, idx, blocks, probs


def warm_up() -> None:
    """Compile (or load from numba's cache) the readout kernel now, not in a timed decoding cycle:
    a fresh clone compiles it in about 2 s."""
    topk_rows(torch.zeros(2, 4 * BLOCK), 1)
    topk_rows(torch.zeros(PARALLEL_ROWS, 4 * BLOCK), 1)  # the thread-pool kernel too (one signature for both)
