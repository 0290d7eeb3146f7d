"""Private numba kernels of the Monte Carlo simulator (public API: :mod:`goose_theory.simulate`).

Why an inline RNG: numba's own ``np.random`` keeps one state per *thread*, so results would
depend on the thread count, and its per-draw cost caps a simple loop at about half our target
speed. Instead every fixed chunk of cycles owns a xoshiro256** stream whose 256-bit state comes
from ``np.random.SeedSequence(seed)``; one 64-bit output yields two 32-bit uniforms.

Why integer thresholds: a node's children are stored in CSR priority order (spine first, then
transition by rank) with thresholds scaled to 2**32, so one draw ``u`` in [0, 2**32) picks
child k when ``u < thr[k]``. The exclusive model stores *cumulative* thresholds (one draw per
reached node); the independent model stores one threshold per child (one Bernoulli per child
tried). An event of probability q is simulated with probability round(q * 2**32) / 2**32, an
error below 1.2e-10, far under any Monte Carlo standard error reachable here.

Per chunk the kernels only count: ``hist[chunk, tau]``. Counts are integers, so reducing the
chunks in order gives bit-identical results whatever the number of threads.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._numba import jit, parallel_jit

CHUNK_CYCLES = 1 << 16
"""Cycles per chunk: the unit of seeding and of parallel work (fixed, so results do not depend
on the thread count)."""

_U32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_SCALE = float(2 ** 32)


@jit
def _rotl(x, k):
    return (x << k) | (x >> (np.uint64(64) - k))


@jit
def xoshiro_next(s0, s1, s2, s3):
    """One xoshiro256** step: returns ``(output, s0, s1, s2, s3)``."""
    result = _rotl(s1 * np.uint64(5), np.uint64(7)) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, np.uint64(45))
    return result, s0, s1, s2, s3


@jit
def draw_u32(s0, s1, s2, s3, buf, avail):
    """A uniform integer in [0, 2**32): the high half of a fresh output, then its low half.

    Returns ``(u, s0, s1, s2, s3, buf, avail)``; the caller keeps the state in locals so that
    the whole stream lives in registers."""
    if avail:
        return buf & _LOW32, s0, s1, s2, s3, buf, False
    out, s0, s1, s2, s3 = xoshiro_next(s0, s1, s2, s3)
    return out >> _U32, s0, s1, s2, s3, out, True


@jit
def seed_state(key):
    """The four state words of one chunk (never all zero, which xoshiro cannot leave)."""
    s0, s1, s2, s3 = key[0], key[1], key[2], key[3]
    if (s0 | s1 | s2 | s3) == np.uint64(0):
        s0 = np.uint64(0x9E3779B97F4A7C15)
    return s0, s1, s2, s3


@jit
def walk_exclusive(thr, start, index, s0, s1, s2, s3, buf, avail):
    """One cycle, exclusive model: one draw per reached inner node. Returns tau and the RNG."""
    v, tau = 0, 1
    while True:
        a, b = start[v], start[v + 1]
        if a == b:  # a leaf: the walk ends without a draw
            break
        u, s0, s1, s2, s3, buf, avail = draw_u32(s0, s1, s2, s3, buf, avail)
        k = a
        while k < b and u >= thr[k]:
            k += 1
        if k == b:
            break
        v = index[k]
        tau += 1
    return tau, s0, s1, s2, s3, buf, avail


@jit
def walk_independent(thr, start, index, s0, s1, s2, s3, buf, avail):
    """One cycle, independent model: a Bernoulli per child in priority order, first match wins."""
    v, tau = 0, 1
    while True:
        k, b = start[v], start[v + 1]
        while k < b:
            u, s0, s1, s2, s3, buf, avail = draw_u32(s0, s1, s2, s3, buf, avail)
            if u < thr[k]:
                break
            k += 1
        if k == b:
            break
        v = index[k]
        tau += 1
    return tau, s0, s1, s2, s3, buf, avail


@jit
def _chunk(thr, start, index, independent, n, key, counts):
    s0, s1, s2, s3 = seed_state(key)
    buf, avail = np.uint64(0), False
    for _ in range(n):
        if independent:
            tau, s0, s1, s2, s3, buf, avail = walk_independent(thr, start, index, s0, s1, s2, s3, buf, avail)
        else:
            tau, s0, s1, s2, s3, buf, avail = walk_exclusive(thr, start, index, s0, s1, s2, s3, buf, avail)
        counts[tau] += 1


@parallel_jit
def simulate_chunks(thr, start, index, independent, cycles, keys, hist):
    """Fill ``hist[c, tau]`` for every fixed chunk ``c`` of ``CHUNK_CYCLES`` cycles."""
    n_chunks = hist.shape[0]
    for c in prange(n_chunks):
        n = min(CHUNK_CYCLES, cycles - c * CHUNK_CYCLES)
        counts = np.zeros(hist.shape[1], dtype=np.int64)  # thread-local: no false sharing
        _chunk(thr, start, index, independent, n, keys[c], counts)
        hist[c, :] = counts


@jit
def _bursty_chunk(thr, start, index, independent, leave, start_rep, n, key, counts, stats):
    """One chunk of the two-state regime chain; state 0 = repetitive, 1 = novel.

    stats = [cycles in state 0, sum of tau_t * tau_(t+1), first tau, last tau]."""
    s0, s1, s2, s3 = seed_state(key)
    buf, avail = np.uint64(0), False
    u, s0, s1, s2, s3, buf, avail = draw_u32(s0, s1, s2, s3, buf, avail)
    state = 0 if u < start_rep else 1  # each chunk starts from the stationary distribution
    thr0, thr1 = thr[0], thr[1]
    n_rep, cross, prev, first = 0, 0, 0, 0
    for i in range(n):
        if i > 0:  # the regime persists from one cycle to the next (Markov chain)
            u, s0, s1, s2, s3, buf, avail = draw_u32(s0, s1, s2, s3, buf, avail)
            if u < leave[state]:
                state = 1 - state
        t = thr0 if state == 0 else thr1
        if independent:
            tau, s0, s1, s2, s3, buf, avail = walk_independent(t, start, index, s0, s1, s2, s3, buf, avail)
        else:
            tau, s0, s1, s2, s3, buf, avail = walk_exclusive(t, start, index, s0, s1, s2, s3, buf, avail)
        counts[tau] += 1
        n_rep += state == 0
        if i == 0:
            first = tau
        else:
            cross += prev * tau
        prev = tau
    stats[0], stats[1], stats[2], stats[3] = n_rep, cross, first, prev


@parallel_jit
def simulate_bursty_chunks(thr, start, index, independent, leave, start_rep, cycles, keys, hist, stats):
    """Like :func:`simulate_chunks` with a regime chain; ``thr`` has shape (2, entries)."""
    for c in prange(hist.shape[0]):
        n = min(CHUNK_CYCLES, cycles - c * CHUNK_CYCLES)
        counts = np.zeros(hist.shape[1], dtype=np.int64)
        row = np.zeros(4, dtype=np.int64)
        _bursty_chunk(thr, start, index, independent, leave, start_rep, n, keys[c], counts, row)
        hist[c, :] = counts
        stats[c, :] = row


@parallel_jit
def uniform_throughput(draws, keys):
    """RNG-bound limit: draw ``draws`` 32-bit uniforms per chunk row of ``keys`` (in parallel);
    returns the number below 2**31 so that the work cannot be optimised away."""
    n_chunks = keys.shape[0]
    below = np.zeros(n_chunks, dtype=np.int64)
    for c in prange(n_chunks):
        s0, s1, s2, s3 = seed_state(keys[c])
        buf, avail = np.uint64(0), False
        hits = 0
        for _ in range(draws):
            u, s0, s1, s2, s3, buf, avail = draw_u32(s0, s1, s2, s3, buf, avail)
            hits += u < np.uint64(0x80000000)
        below[c] = hits
    return below.sum()


def thresholds(q: np.ndarray, start: np.ndarray, index: np.ndarray, cumulative: bool) -> np.ndarray:
    """Per CSR entry, the threshold on a 32-bit uniform (see module docstring)."""
    q_child = q[index]
    if cumulative:
        parent_of_entry = np.repeat(np.arange(start.shape[0] - 1), np.diff(start))
        csum = np.cumsum(q_child)
        offset = np.concatenate(([0.0], csum))[start[:-1]]  # running sum before each node's block
        q_child = csum - offset[parent_of_entry]
    scaled = np.rint(np.clip(q_child, 0.0, 1.0) * _SCALE)
    return scaled.astype(np.uint64)
