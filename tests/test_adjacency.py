"""AdjacencyTable against a dict-based reference (bigram with unigram fallback, last write wins)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goose_runtime.adjacency import AdjacencyTable


class NaiveTable:
    def __init__(self):
        self.bi, self.uni = {}, {}

    def update(self, prev, cur, toks, scores):
        for p, c, t, s in zip(prev, cur, toks, scores):
            self.uni[int(c)] = (list(map(int, t)), list(map(float, s)))
            if p >= 0:
                self.bi[(int(p), int(c))] = (list(map(int, t)), list(map(float, s)))

    def lookup(self, p, c):
        return self.bi.get((p, c)) or self.uni.get(c) or ([], [])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 30)), min_size=1, max_size=40), st.integers(0, 10**6))
def test_matches_reference_without_collisions(keys, seed):
    rng = np.random.default_rng(seed)
    table, ref = AdjacencyTable(31, top_k=4, n_slots=1 << 20), NaiveTable()  # no collisions at this size
    for chunk in (keys[: len(keys) // 2], keys[len(keys) // 2:]):
        if not chunk:
            continue
        prev = np.array([k[0] for k in chunk]); cur = np.array([k[1] for k in chunk])
        toks = rng.integers(0, 31, (len(chunk), 4)); scores = rng.random((len(chunk), 4)).astype(np.float32)
        table.update(prev, cur, toks, scores); ref.update(prev, cur, toks, scores)
    for p in range(-1, 31):
        for c in range(31):
            got, want = table.lookup(p, c), ref.lookup(p, c)
            assert got[0] == want[0]
            assert np.allclose(got[1], want[1])


def test_collision_never_returns_another_keys_row():
    table = AdjacencyTable(50, top_k=2, n_slots=1)  # every bigram hashes to the one slot
    table.update(np.array([1]), np.array([2]), np.array([[10, 11]]), np.array([[.9, .1]]))
    table.update(np.array([3]), np.array([4]), np.array([[20, 21]]), np.array([[.8, .2]]))
    assert table.lookup(3, 4)[0] == [20, 21]
    assert table.lookup(1, 2)[0] == [10, 11]  # bigram row lost to the collision: unigram fallback of 2
    assert table.lookup(7, 9) == ([], [])


def test_short_rows_and_reset():
    table = AdjacencyTable(10, top_k=4)
    table.update(np.array([1]), np.array([2]), np.array([[5, 6]]), np.array([[2.0, 1.0]]))
    assert table.lookup(1, 2) == ([5, 6], [2.0, 1.0])
    table.reset()
    assert table.lookup(1, 2) == ([], [])


def test_bad_sizes_rejected():
    with pytest.raises(ValueError):
        AdjacencyTable(0)
