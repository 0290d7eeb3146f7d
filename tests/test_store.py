"""The retrieval store (goose_runtime.store) against a brute-force n-gram count."""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest

import goose_runtime.store as store_mod
from goose_runtime.model import tiny_random_bundle
from goose_runtime.store import (NO_GUESS, ORDERS, STORE_VERSION, Guess, StoreError, build_store, check_store_bench,
                                 read_store, shared_store, write_store)
from goose_runtime.store_corpus import corpus_files


def reference_guess(sequences, context, *, orders=ORDERS, min_count=2) -> Guess:
    """The definition, spelled out: of the last 1..orders tokens of ``context``, the longest that
    some window of one sequence equals and whose most frequent follower (ties: the smallest id)
    followed it at least ``min_count`` times gives its follower, with that follower's share of all
    followers; none when none does. (Every length is tried: the store stops at the first length it
    lacks, which this checks rather than assumes.)"""
    best = NO_GUESS
    for n in range(1, min(orders, len(context)) + 1):
        ctx = tuple(context[-n:])
        follow = collections.Counter(seq[i] for seq in sequences for i in range(n, len(seq))
                                     if tuple(seq[i - n:i]) == ctx)
        if follow and max(follow.values()) >= min_count:
            top = max(follow.values())
            best = Guess(min(t for t, c in follow.items() if c == top), n, top / sum(follow.values()))
    return best


def random_corpus(seed: int, n_seqs: int = 6, vocab: int = 7):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=rng.integers(0, 60)).tolist() for _ in range(n_seqs)]


@pytest.mark.parametrize("seed", range(8))
def test_every_context_agrees_with_brute_force(seed):
    seqs = random_corpus(seed)
    store = build_store(seqs)
    rng = np.random.default_rng(100 + seed)
    contexts = [rng.integers(0, 8, size=rng.integers(1, 7)).tolist() for _ in range(200)]
    contexts += [s[:i] for s in seqs for i in range(1, len(s))]  # every prefix of the corpus itself
    for ctx in contexts:
        assert store.guess(ctx) == reference_guess(seqs, ctx), ctx
        assert store.next_token(ctx) == store.guess(ctx)[0]


def test_windows_do_not_cross_files_and_ties_take_the_smallest_id():
    # inside the files "1 2" is followed by 3 twice; windows across the ends of the first three files
    # would add "1 2 -> 0" three times
    store = build_store([[1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2, 3, 1, 2, 3]])
    assert store.next_token([1, 2]) == 3 and store.next_token([2]) == 3
    tie = build_store([[4, 6, 4, 5, 4, 6, 4, 5]])
    assert tie.next_token([4]) == 5  # 5 and 6 both follow 4 twice: the smaller id
    assert store.next_token([7]) == -1 and build_store([]).next_token([1]) == -1


def test_a_continuation_seen_once_is_not_kept():
    store = build_store([[2, 3, 4, 1, 3, 4, 2, 3, 5]])
    assert store.next_token([2, 3]) == 4  # "2 3" -> 4 once, -> 5 once: not kept; "3" -> 4 twice is
    assert store.next_token([1, 3]) == 4 and store.next_token([5]) == -1


def test_round_trip_on_disk_and_a_stale_version_is_ignored(tmp_path):
    store = build_store(random_corpus(3))
    path = tmp_path / "s.npz"
    write_store(path, store)
    again = read_store(path)
    assert again.n_tokens == store.n_tokens and len(again.keys) == ORDERS
    for a, b in zip(store.keys + store.tokens + store.counts + store.totals,
                    again.keys + again.tokens + again.counts + again.totals):
        np.testing.assert_array_equal(a, b)
    arrays = dict(np.load(path))
    arrays["version"] = np.array(STORE_VERSION + 1)
    np.savez(path, **arrays)
    assert read_store(path) is None
    path.write_bytes(b"not a zip")
    assert read_store(path) is None
    write_store(path, store)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a truncated file (a crash, a full disk)
    assert read_store(path) is None
    arrays["version"] = np.array(STORE_VERSION)
    arrays["tokens2"] = arrays["tokens2"][:-1]  # lengths that do not agree
    np.savez(path, **arrays)
    assert read_store(path) is None
    write_store(path, store)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "totals1"}
    np.savez(path, **arrays)  # a version-1 layout (no totals) under the current version number
    assert read_store(path) is None
    arrays["totals1"] = store.counts[0] - 1  # fewer followers than the guess's own count
    np.savez(path, **arrays)
    assert read_store(path) is None


def test_shared_store_builds_once_then_reads_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text("def f(x):\n    return x + 1\n" * 20, encoding="utf-8")
    (corpus / "blob.bin").write_bytes(bytes(range(256)) * 4)  # not UTF-8: skipped
    (corpus / ".hidden").write_text("skipped too", encoding="utf-8")
    bundle = tiny_random_bundle(seed=0)
    logs: list[str] = []
    first = shared_store(bundle, (str(corpus),), log=logs.append)
    assert len(logs) == 1 and "building the retrieval store" in logs[0]
    assert first.n_tokens == len(bundle.tokenizer("def f(x):\n    return x + 1\n" * 20)["input_ids"])
    assert shared_store(bundle, (str(corpus),), log=logs.append) is first and len(logs) == 1  # in memory
    monkeypatch.setattr(store_mod, "_MEMO", {})
    again = shared_store(bundle, (str(corpus),), log=logs.append)  # from disk: no build
    assert len(logs) == 1 and again.n_contexts == first.n_contexts
    assert [p.name for p in (tmp_path / "cache" / "stores").iterdir()] == [f"store-{store_mod._key(bundle, corpus_files([str(corpus)]))}.npz"]
    (corpus / "a.py").write_text("x = 1\n" * 30, encoding="utf-8")  # an edited corpus is a new store
    shared_store(bundle, (str(corpus),), log=logs.append)
    assert len(logs) == 2


def test_a_corpus_without_a_repeated_context_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "one.txt").write_text("abc", encoding="utf-8")  # no byte pair follows anything twice
    with pytest.raises(StoreError, match="nothing to guess from"):
        shared_store(tiny_random_bundle(seed=0), (str(tmp_path / "one.txt"),))
    assert not (tmp_path / "cache" / "stores").exists() or not list((tmp_path / "cache" / "stores").iterdir())


def test_stdlib_wide_is_refused_with_the_default_corpus_only():
    with pytest.raises(StoreError, match="stdlib-wide"):
        check_store_bench("stdlib-wide", ())
    check_store_bench("stdlib-wide", (os.devnull,))
    check_store_bench("humaneval", ())
