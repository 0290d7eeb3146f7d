"""Context matching (prompt lookup, PLD): the spine candidates of a Goose tree.

The matcher keeps an incremental index over prompt + output: for every n in ``ngram_sizes``
and every n-gram that has been *followed* by a token, the position right after its most recent
occurrence and a count of each token that followed it. Appending a token costs O(len(ngram_sizes))
dict updates, so the whole index costs O(tokens), never a rescan.

A query looks at the text's last n tokens, longest n first; the first n that occurred earlier
wins, and the spine is what followed its most recent occurrence (up to ``max_spine`` tokens).

Confidence (the paper's "several n-gram lengths agree"):
* ``consensus``: how many earlier positions were followed by the spine's first token, counted in
  the shortest n-gram's table (every longer occurrence is also a shorter one, so this counts each
  earlier position once);
* ``lengths_agree``: how many n-gram lengths have a most recent occurrence whose next token is the
  spine's first token; ``high_confidence`` is ``lengths_agree >= 2``.

Example:
    >>> m = ContextMatcher([1, 2, 3, 9, 8, 1, 2, 3], ngram_sizes=(3,))
    >>> r = m.match(); r.tokens, r.ngram, r.consensus
    ((9, 8, 1, 2, 3), 3, 1)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from goose_theory.topology import PAPER_MAX_SPINE


@dataclass(frozen=True)
class Match:
    """The spine proposed by context matching; ``tokens`` is empty when nothing matched."""

    tokens: tuple[int, ...] = ()
    ngram: int = 0            # n-gram length that matched (0: none)
    consensus: int = 0        # earlier positions followed by tokens[0]
    lengths_agree: int = 0    # n-gram lengths whose latest occurrence predicts tokens[0]

    @property
    def high_confidence(self) -> bool:
        return self.lengths_agree >= 2

    def __len__(self) -> int:
        return len(self.tokens)


NO_MATCH = Match()


class ContextMatcher:
    """Incremental n-gram index over a growing token list (prompt + accepted output)."""

    def __init__(self, tokens: Iterable[int] = (), *, ngram_sizes: tuple[int, ...] = (5, 4, 3),
                 max_spine: int = PAPER_MAX_SPINE) -> None:
        if not ngram_sizes or min(ngram_sizes) < 1:
            raise ValueError(f"ngram_sizes must be positive integers, got {ngram_sizes!r}")
        self.ngram_sizes = tuple(sorted(set(int(n) for n in ngram_sizes), reverse=True))
        self.max_spine = int(max_spine)
        self.tokens: list[int] = []
        # per n: n-gram tuple -> [position after latest occurrence, {next token: count}]
        self._index: dict[int, dict[tuple[int, ...], list]] = {n: {} for n in self.ngram_sizes}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def append(self, token: int) -> None:
        """Add one token: registers every n-gram that ends right before it (it now has a follower)."""
        toks = self.tokens
        pos = len(toks)
        token = int(token)
        for n in self.ngram_sizes:
            if pos < n:
                continue
            key = tuple(toks[pos - n:pos])
            entry = self._index[n].get(key)
            if entry is None:
                self._index[n][key] = [pos, {token: 1}]
            else:
                entry[0] = pos
                counts = entry[1]
                counts[token] = counts.get(token, 0) + 1
        toks.append(token)

    def extend(self, tokens: Iterable[int]) -> None:
        for t in tokens:
            self.append(t)

    def match(self) -> Match:
        """The spine for the current end of the text (longest n-gram first)."""
        toks = self.tokens
        size = len(toks)
        # each n's entry for the text's last n tokens, looked up once (the confidence counts reuse them)
        entries = {n: self._index[n].get(tuple(toks[size - n:])) for n in self.ngram_sizes if size >= n}
        for n in self.ngram_sizes:
            entry = entries.get(n)
            if entry is None:
                continue
            spine = tuple(toks[entry[0]:entry[0] + self.max_spine])
            first = spine[0]
            shortest = entries[min(entries)]  # the most inclusive count: each earlier position once
            agree = sum(1 for e in entries.values() if e is not None and toks[e[0]] == first)
            return Match(spine, n, shortest[1].get(first, 0) if shortest is not None else 0, agree)
        return NO_MATCH
