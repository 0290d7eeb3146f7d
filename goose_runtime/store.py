"""A retrieval store for unmatched cycles: the most frequent next token after an n-gram of a corpus.

Why: on HumanEval 85-90% of the cycles find no context match, and there the adjacency table alone
drafts; its best candidate is right about a fifth of the time, and two candidates barely more than
one. A store of other code (REST, He et al. 2023, with a suffix array over The Stack; here a far
smaller n-gram table) guesses the next token from the last one to four tokens of the text, and its
guess is right where the table's is wrong often enough to matter: on the goose@15 validation traces
of HumanEval, in unmatched cycles, the store's guess is right 21% of the time, and in 13% of them it
is right while none of the table's root candidates (5.6 on average) is (``docs/bench-runtime.md``, "A retrieval store").
So a ``+store`` method (:mod:`goose_runtime.methods`) drafts the store's guess under the root of every
unmatched cycle: goose in place of the last adjacency node of its budget (budget the table cannot
place grows under the guess), ``auto`` as one more root candidate priced by the calibration class of
its share (below).

The store: for n = 1..4, every n-token window of every corpus file (windows never cross files), the
token that follows it most often (ties: the smallest id), kept where it followed at least twice,
with its share of everything that followed the window: the guess's confidence. The share sorts the
guesses far better than the context's length does (on the held-out HumanEval traces right 6% of the
time below 0.2, 61% from 0.95; ``bench/bench_store.py``), so ``auto+store`` prices a guess by it.
Contexts are hashed to 64 bits (newest token first, so the hash of n + 1 tokens extends that of n:
xor the token in, multiply by an odd constant, fold the high bits down; numpy's uint64 arithmetic
wraps as the lookup's masked Python ints do);
a lookup tries the longest context first. Keys sit in sorted numpy arrays (binary search; 15-25 us
a lookup, ``bench/bench_store.py``); the default corpus (below, 11 MB of source, 3.06 M tokens for
SmolLM2) builds in about 10 s on the
project's 2-core CPU and is cached under the goose cache (``stores/``), keyed by the tokenizer and
the corpus files (paths, sizes, modification times).

The default corpus is this interpreter's standard library (``.py`` files outside ``site-packages``
and its test suites) *minus* the modules the ``stdlib`` prompt set is cut from, so that set never
retrieves its own continuation; ``stdlib-wide`` is cut from exactly these files, so ``+store`` is
refused there (:func:`check_store_bench`). Compromises: a 64-bit hash collision can give a wrong
guess (never a wrong output: drafts only change what is verified); the store holds one guess per
context; the corpus is what this machine has, so another Python version builds another store.

Example:
    >>> store = build_store([[5, 6, 7, 5, 6, 7, 5, 6, 8]])
    >>> store.next_token([1, 5, 6]), store.next_token([9, 7]), store.next_token([9, 9])
    (7, 5, -1)
    >>> store.guess([1, 5, 6])   # the token, the length of the context it came from, its share
    Guess(token=7, order=2, share=0.6666666666666666)
    >>> store.guess([9, 7]), store.guess([9, 9]) == NO_GUESS
    (Guess(token=5, order=1, share=1.0), True)
"""
from __future__ import annotations

import hashlib
import pathlib
import zipfile
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np

from goose_theory.fileio import atomic_output

from .store_corpus import StoreError, corpus_files, default_corpus, read_corpus, tokenize

STORE_VERSION = 2  # 2: the followers' total per context (the guess's share)
ORDERS = 4          # context lengths 1..4 (longer ones add little on a corpus this size)
MIN_COUNT = 2       # a continuation seen once is as likely a one-off as a habit
MASK = (1 << 64) - 1
MULT = 0x9E3779B97F4A7C15


class Guess(NamedTuple):
    """A store's guess: the token (-1: none), the length of the context it came from (0: none) and
    its share of the followers of that context in the corpus."""

    token: int
    order: int
    share: float


NO_GUESS = Guess(-1, 0, 0.0)


@dataclass(frozen=True)
class NgramStore:
    """Per context length n (index n - 1): sorted context hashes, the next token, its count, and how
    many tokens followed the context in all."""

    keys: tuple[np.ndarray, ...]
    tokens: tuple[np.ndarray, ...]
    counts: tuple[np.ndarray, ...]
    totals: tuple[np.ndarray, ...]
    n_tokens: int  # corpus size, tokens

    def next_token(self, context: Sequence[int]) -> int:
        """The guess after ``context`` (its last ``ORDERS`` tokens), longest match first; -1: none."""
        return self.guess(context)[0]

    def guess(self, context: Sequence[int]) -> Guess:
        """The guess from the longest kept context, with its share (:data:`NO_GUESS`: none). A
        larger share is a better guess, a longer context mostly too (``bench/bench_store.py``)."""
        h, at, order = 0, -1, 0
        for n, keys in enumerate(self.keys, start=1):
            if n > len(context):
                break
            h = ((h ^ int(context[-n])) * MULT) & MASK
            h ^= h >> 29
            i = int(keys.searchsorted(np.uint64(h)))
            if i == len(keys) or int(keys[i]) != h:
                break  # a longer context is kept only if this one is (its counts are no larger)
            at, order = i, n
        if order == 0:
            return NO_GUESS
        n = order - 1
        return Guess(int(self.tokens[n][at]), order, int(self.counts[n][at]) / int(self.totals[n][at]))

    @property
    def n_contexts(self) -> int:
        return sum(len(k) for k in self.keys)


def build_store(sequences: Iterable[Sequence[int]], *, orders: int = ORDERS, min_count: int = MIN_COUNT) -> NgramStore:
    """The store of token ``sequences`` (one per corpus file; no window crosses two)."""
    seqs = [np.asarray(s, dtype=np.int64) for s in sequences]
    seqs = [s for s in seqs if len(s)]
    toks = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int64)
    doc = np.repeat(np.arange(len(seqs)), [len(s) for s in seqs])
    keys, tokens, counts, totals = [], [], [], []
    h = np.zeros(len(toks), dtype=np.uint64)  # h[i]: hash of the n tokens before position i
    for n in range(1, orders + 1):
        valid = np.arange(len(toks)) >= n
        valid[n:] &= doc[n:] == doc[:-n]
        prev = np.roll(toks, n).astype(np.uint64)
        h = (h ^ prev) * np.uint64(MULT)
        h ^= h >> np.uint64(29)
        k, t, c, total = _most_frequent(h[valid], toks[valid], min_count)
        keys.append(k); tokens.append(t); counts.append(c); totals.append(total)
    return NgramStore(tuple(keys), tuple(tokens), tuple(counts), tuple(totals), int(len(toks)))


def _most_frequent(ctx: np.ndarray, nxt: np.ndarray, min_count: int):
    """Per distinct context hash: the most frequent next token (ties: smallest id), its count and the
    count of all next tokens, where the first count is >= ``min_count``; sorted by hash."""
    order = np.lexsort((nxt, ctx))
    ctx, nxt = ctx[order], nxt[order]
    if not len(ctx):
        empty = nxt.astype(np.int32)
        return ctx, empty, empty, nxt.astype(np.int64)
    starts = np.flatnonzero(np.r_[True, (ctx[1:] != ctx[:-1]) | (nxt[1:] != nxt[:-1])])
    run = np.diff(np.r_[starts, len(ctx)])
    c, t, r = ctx[starts], nxt[starts], run
    group = np.cumsum(np.r_[True, c[1:] != c[:-1]]) - 1  # runs are sorted by context: its index
    total = np.bincount(group, weights=r).astype(np.int64)[group]  # exact: float64 below 2^53 tokens
    best = np.lexsort((t, -r, c))  # per context: largest count first, then smallest token
    c, t, r, total = c[best], t[best], r[best], total[best]
    first = np.r_[True, c[1:] != c[:-1]] & (r >= min_count)
    return c[first], t[first].astype(np.int32), r[first].astype(np.int32), total[first]


# ---- the cache -------------------------------------------------------------------------------------
def _key(bundle, files: Sequence[pathlib.Path]) -> str:
    """Names the tokenizer (model name, vocabulary size, the ids of a probe text) and every corpus
    file (path, size, modification time), so an edited corpus or another tokenizer builds anew."""
    probe = bundle.tokenizer("def f(x):\n    return x  # ü 123", add_special_tokens=False)["input_ids"]
    parts = [str(STORE_VERSION), bundle.name, str(int(bundle.model.get_output_embeddings().weight.shape[0])),
             ",".join(map(str, probe))]
    for p in files:
        st = p.stat()
        parts.append(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def write_store(path: pathlib.Path, store: NgramStore) -> None:
    """Save ``store`` atomically (uncompressed: it loads in a blink)."""
    arrays = {"version": np.array(STORE_VERSION), "n_tokens": np.array(store.n_tokens)}
    for n, (k, t, c, total) in enumerate(zip(store.keys, store.tokens, store.counts, store.totals), start=1):
        arrays.update({f"keys{n}": k, f"tokens{n}": t, f"counts{n}": c, f"totals{n}": total})
    with atomic_output(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def read_store(path: pathlib.Path) -> NgramStore | None:
    """A store saved by :func:`write_store`, or None when the file is of another version or unreadable
    (the caller then rebuilds it)."""
    try:
        # our own handle: np.load leaves its file open when a truncated zip fails to parse
        with open(path, "rb") as fh, np.load(fh) as data:
            if int(data["version"]) != STORE_VERSION:
                return None
            orders = sum(1 for name in data.files if name.startswith("keys"))
            get = lambda what: tuple(data[f"{what}{n}"] for n in range(1, orders + 1))  # noqa: E731
            store = NgramStore(get("keys"), get("tokens"), get("counts"), get("totals"), int(data["n_tokens"]))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    for keys, tokens, counts, totals in zip(store.keys, store.tokens, store.counts, store.totals):
        if (keys.dtype != np.uint64 or not len(keys) == len(tokens) == len(counts) == len(totals)
                or np.any(keys[1:] <= keys[:-1]) or np.any(totals < counts) or np.any(counts < 1)):
            return None  # not what write_store saves: rebuild
    return store


_MEMO: dict[str, NgramStore] = {}  # by _key


def shared_store(bundle, corpus: Sequence[str] = (), *, log: Callable[[str], None] | None = None) -> NgramStore:
    """The store of ``corpus`` (paths; empty: :func:`default_corpus`) for ``bundle``'s tokenizer: held
    in memory per process, cached on disk under the goose cache's ``stores/``, else built."""
    from .model import _cache_root

    files = corpus_files(corpus) if corpus else default_corpus()
    key = _key(bundle, files)
    if key in _MEMO:
        return _MEMO[key]
    path = _cache_root() / "stores" / f"store-{key}.npz"
    store = read_store(path) if path.exists() else None
    if store is None:
        if log is not None:
            took = ("about 10 s for the standard library on 2 CPU cores" if not corpus
                    else "files that are not text are skipped")
            log(f"building the retrieval store for +store methods from {len(files)} files, once ({took}), "
                f"cached in {path.parent}")
        store = build_store(tokenize(bundle.tokenizer, read_corpus(files)))
        if store.n_contexts == 0:
            raise StoreError("store corpus: no 1-4-token context in it is followed twice by the same token; "
                             "nothing to guess from")
        write_store(path, store)
    _MEMO[key] = store
    return store


def check_store_bench(benchmark: str, corpus: Sequence[str]) -> None:
    """Refuse ``+store`` with the default corpus on ``stdlib-wide``: that set is cut from the very
    files the default store is built from."""
    if not corpus and benchmark == "stdlib-wide":
        raise StoreError("+store on stdlib-wide: its prompts are cut from the default store's own files "
                         "(the standard library); pass --store-corpus with other text, or use another set")
