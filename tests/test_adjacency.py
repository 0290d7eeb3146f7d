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


def _reference_update(t: AdjacencyTable, prev, cur, tokens, scores) -> None:
    """The table's update written as vectorised numpy assignments (its first implementation)."""
    prev, cur = np.asarray(prev, dtype=np.int64), np.asarray(cur, dtype=np.int64)
    k = min(t.top_k, tokens.shape[1])
    t.uni_tok[cur, :k] = tokens[:, :k]
    t.uni_score[cur, :k] = scores[:, :k]
    t.uni_filled[cur] = True
    if k < t.top_k:
        t.uni_score[cur, k:] = -np.inf
    keep = prev >= 0
    prev, cur, tokens, scores = prev[keep], cur[keep], tokens[keep], scores[keep]
    slots = (prev * 1_000_003 + cur) % t.n_slots
    t.bi_key[slots, 0], t.bi_key[slots, 1] = prev, cur
    t.bi_tok[slots, :k] = tokens[:, :k]
    t.bi_score[slots, :k] = scores[:, :k]
    if k < t.top_k:
        t.bi_score[slots, k:] = -np.inf


def test_update_equals_the_vectorised_reference():
    rng = np.random.default_rng(7)
    fast, ref = AdjacencyTable(300, top_k=5, n_slots=97), AdjacencyTable(300, top_k=5, n_slots=97)
    for step in range(200):
        q, width = int(rng.integers(1, 40)), int(rng.choice([3, 5, 8]))
        prev = rng.integers(-1, 300, q)            # -1: no token before
        cur = rng.integers(0, 30, q)               # few distinct contexts: repeats within a call
        tokens = rng.integers(0, 300, (q, width))
        scores = rng.standard_normal((q, width)).astype(np.float32)
        fast.update(prev, cur, tokens, scores)
        _reference_update(ref, prev, cur, tokens, scores)
        for name in ("bi_key", "bi_tok", "bi_score", "uni_filled", "uni_tok", "uni_score"):
            assert np.array_equal(getattr(fast, name), getattr(ref, name)), (step, name)
        a, b = int(rng.integers(-1, 300)), int(rng.integers(0, 30))
        assert fast.lookup(a, b) == ref.lookup(a, b)


def test_prior_is_the_last_fallback_and_survives_reset():
    table = AdjacencyTable(6, top_k=2, n_slots=64)
    prior_tok = np.array([[1, 2], [2, 3], [3, 4], [4, 5], [5, 0], [0, 1]])
    prior_score = -np.arange(12, dtype=np.float32).reshape(6, 2)
    assert table.lookup(0, 1) == ([], [])
    table.set_prior(prior_tok, prior_score)
    assert table.lookup(0, 1) == ([2, 3], [-2.0, -3.0])          # no row at all: the prior
    table.update(np.array([0]), np.array([1]), np.array([[5, 4]]), np.array([[0.5, 0.25]]))
    assert table.lookup(0, 1)[0] == [5, 4]                        # the bigram row wins
    assert table.lookup(3, 1)[0] == [5, 4]                        # ... then the unigram row
    table.reset()
    assert table.lookup(0, 1)[0] == [2, 3]                        # reset empties the rows, not the prior


def test_prior_of_the_wrong_shape_is_refused():
    table = AdjacencyTable(6, top_k=2, n_slots=64)
    with pytest.raises(ValueError, match=r"\(6, k\)"):
        table.set_prior(np.zeros((5, 2)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match=r"\(6, k\)"):
        table.set_prior(np.zeros((6, 2)), np.zeros((6, 3)))


def test_a_collision_with_the_same_first_token_is_not_taken_for_the_key():
    # the slot's key is the whole bigram: (1, 3) overwrote (1, 2)'s slot, so (1, 2) falls back to the unigram of 2
    table = AdjacencyTable(50, top_k=2, n_slots=1)
    table.update(np.array([1]), np.array([2]), np.array([[10, 11]]), np.array([[.9, .1]]))
    table.update(np.array([1]), np.array([3]), np.array([[20, 21]]), np.array([[.8, .2]]))
    assert table.lookup(1, 3)[0] == [20, 21] and table.lookup(1, 2)[0] == [10, 11]


def test_a_wider_prior_is_cut_to_top_k():
    table = AdjacencyTable(4, top_k=2)
    table.set_prior(np.array([[1, 2, 3]] * 4), np.array([[3.0, 2.0, 1.0]] * 4, np.float32))
    assert table.lookup(0, 1) == ([1, 2], [3.0, 2.0])
