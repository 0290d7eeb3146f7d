"""ContextMatcher against a naive rescan of the whole text."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from goose_runtime.matcher import ContextMatcher, Match


def naive_match(tokens: list[int], sizes=(5, 4, 3), max_spine: int = 20) -> Match:
    """Rescan everything: latest earlier occurrence of the longest suffix n-gram."""
    size = len(tokens)
    for n in sorted(sizes, reverse=True):
        if size < n:
            continue
        suffix = tokens[size - n:]
        starts = [i + n for i in range(0, size - n) if tokens[i:i + n] == suffix]  # followed occurrences
        if not starts:
            continue
        first = tokens[starts[-1]]
        shortest = min(sizes)
        short_suffix = tokens[size - shortest:]
        consensus = sum(1 for i in range(0, size - shortest)
                        if tokens[i:i + shortest] == short_suffix and tokens[i + shortest] == first)
        agree = 0
        for m in sizes:
            if size < m:
                continue
            occ = [i + m for i in range(0, size - m) if tokens[i:i + m] == tokens[size - m:]]
            agree += bool(occ) and tokens[occ[-1]] == first
        return Match(tuple(tokens[starts[-1]:starts[-1] + max_spine]), n, consensus, agree)
    return Match()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=0, max_size=80), st.integers(1, 25))
def test_incremental_index_equals_naive_rescan(tokens, max_spine):
    m = ContextMatcher(ngram_sizes=(5, 4, 3), max_spine=max_spine)
    for i, t in enumerate(tokens):  # check after every appended token: the index is incremental
        m.append(t)
        assert m.match() == naive_match(tokens[:i + 1], max_spine=max_spine)


def test_longest_ngram_wins_and_spine_is_capped():
    text = [9, 1, 2, 3, 4, 5, 6, 7] + list(range(100, 130)) + [8, 3, 4, 5, 0] + [2, 3, 4, 5]
    r = ContextMatcher(text, max_spine=20).match()
    assert r.ngram == 4 and r.tokens[:3] == (6, 7, 100) and len(r.tokens) == 20


def test_consensus_counts_agreeing_occurrences():
    text = [1, 2, 3, 7, 0, 1, 2, 3, 7, 0, 1, 2, 3, 8, 0, 1, 2, 3]
    r = ContextMatcher(text, ngram_sizes=(3,)).match()
    assert r.tokens[0] == 8 and r.consensus == 1  # latest occurrence says 8; 7 twice earlier
    r2 = ContextMatcher(text[:-6] + [0, 1, 2, 3], ngram_sizes=(3,)).match()
    assert r2.tokens[0] == 7 and r2.consensus == 2


def test_high_confidence_needs_two_agreeing_lengths():
    assert not ContextMatcher([5, 6, 7, 8, 0, 6, 7, 8], ngram_sizes=(4, 3)).match().high_confidence
    assert ContextMatcher([5, 6, 7, 8, 0, 5, 6, 7, 8], ngram_sizes=(4, 3)).match().high_confidence


def test_no_match_on_fresh_text():
    r = ContextMatcher(list(range(50))).match()
    assert r == Match() and len(r) == 0 and not r.high_confidence
