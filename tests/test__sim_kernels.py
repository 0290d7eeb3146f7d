"""The simulator's private kernels: the RNG against a pure-Python xoshiro256**, thresholds."""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory import _sim_kernels as K

MASK = (1 << 64) - 1


def xoshiro_reference(state: list[int], n: int) -> list[int]:
    """xoshiro256** as published (Blackman & Vigna), in plain Python integers."""
    def rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & MASK
    s = list(state)
    out = []
    for _ in range(n):
        out.append(rotl((s[1] * 5) & MASK, 7) * 9 & MASK)
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def test_xoshiro_matches_the_reference_and_draws_high_then_low_halves():
    key = np.random.SeedSequence(123).generate_state(4, np.uint64)
    expected = xoshiro_reference([int(k) for k in key], 5)
    words = [np.uint64(w) for w in K.seed_state(key)] + [np.uint64(0)]  # numba returns Python ints
    avail = False
    halves = []
    for _ in range(10):
        u, *rest = K.draw_u32(*words, avail)
        words, avail = [np.uint64(w) for w in rest[:5]], rest[5]
        halves.append(int(u))
    assert halves == [h for x in expected for h in (x >> 32, x & 0xFFFFFFFF)]


def test_all_zero_key_is_replaced():
    s = K.seed_state(np.zeros(4, dtype=np.uint64))
    assert any(int(w) != 0 for w in s)


def test_uniforms_are_balanced():
    keys = np.random.SeedSequence(9).generate_state(8, np.uint64).reshape(2, 4)
    below = K.uniform_throughput(500_000, keys)
    assert abs(below / 1_000_000 - 0.5) < 4 * 0.5 / 1000


@pytest.mark.parametrize("cumulative", [True, False])
def test_thresholds_per_node_block(cumulative):
    start = np.array([0, 3, 3, 5])  # node 0: three children, node 1: none, node 2: two
    index = np.array([1, 2, 3, 4, 5])
    q = np.array([1.0, 0.5, 0.25, 0.125, 0.3, 1.0])
    got = K.thresholds(q, start, index, cumulative=cumulative).tolist()
    if cumulative:
        assert got == [2**31, 3 * 2**30, 7 * 2**29, round(0.3 * 2**32), 2**32]  # restarts per node
    else:
        assert got == [2**31, 2**30, 2**29, round(0.3 * 2**32), 2**32]

