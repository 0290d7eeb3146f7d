"""Token Recycling's adjacency table, keyed by the last two tokens: the transition candidates.

Two bounded numpy tables hold the top-K successors of a context, best first, with scores:

* bigram: key ``(a, b)`` (the token before and the token itself), hashed into ``n_slots`` rows;
  each row remembers its key, so a lookup never returns another context's successors (a hash
  collision simply overwrites: the newest context wins, as in TR's own table);
* unigram fallback: one row per token ``b`` (used when the bigram row is empty or belongs to another
  key).

Rows are *replaced* by each harvest (the latest logits are the best guess for the current
text). Scores are what the decoder harvests (``DecodeConfig.score``): the target's logits by
default, or its softmax probabilities. Only their order is used to draft; the trace records them.

Harvesting takes the top-K of the logits of every verified position in one batched ``torch.topk``
(done by the decoder, which also needs the argmax) and writes all rows in one compiled pass
(numba; eight vectorised numpy assignments cost 4-5x as much on the cold table after a forward).

Example:
    >>> import numpy as np
    >>> t = AdjacencyTable(vocab_size=100, top_k=3, n_slots=64)
    >>> t.update(np.array([5]), np.array([7]), np.array([[1, 2, 3]]), np.array([[.5, .2, .1]]))
    >>> t.lookup(5, 7)[0], t.lookup(6, 7)[0], t.lookup(6, 8)[0]
    ([1, 2, 3], [1, 2, 3], [])
"""
from __future__ import annotations

import numpy as np

from goose_theory._numba import jit
from goose_theory.topology import PAPER_TOP_K

MULT = 1_000_003  # odd multiplier for the bigram hash (vocab sizes stay far below it)


class AdjacencyTable:
    """Bounded bigram + unigram successor table; ``reset()`` empties it."""

    def __init__(self, vocab_size: int, *, top_k: int = PAPER_TOP_K, n_slots: int = 1 << 16) -> None:
        if vocab_size < 1 or top_k < 1 or n_slots < 1:
            raise ValueError("vocab_size, top_k and n_slots must be positive")
        self.vocab_size, self.top_k, self.n_slots = int(vocab_size), int(top_k), int(n_slots)
        self.bi_key = np.full((n_slots, 2), -1, dtype=np.int64)
        self.bi_tok = np.zeros((n_slots, top_k), dtype=np.int64)
        self.bi_score = np.zeros((n_slots, top_k), dtype=np.float32)
        self.uni_filled = np.zeros(vocab_size, dtype=bool)
        self.uni_tok = np.zeros((vocab_size, top_k), dtype=np.int64)
        self.uni_score = np.zeros((vocab_size, top_k), dtype=np.float32)
        self.prior_tok: np.ndarray | None = None  # last fallback (goose_runtime.prior); kept by reset()
        self.prior_score: np.ndarray | None = None

    def set_prior(self, tokens: np.ndarray, scores: np.ndarray) -> None:
        """Use ``tokens[b]`` (best first, scores ``scores[b]``) as the successors of a token ``b`` the
        table has no row for; ``reset()`` keeps them. Shapes (vocab_size, >= 1)."""
        tokens, scores = np.asarray(tokens, dtype=np.int64), np.asarray(scores, dtype=np.float32)
        if tokens.ndim != 2 or tokens.shape[0] != self.vocab_size or tokens.shape != scores.shape:
            raise ValueError(f"a prior needs ({self.vocab_size}, k) tokens and scores, got {tokens.shape} "
                             f"and {scores.shape}")
        k = min(self.top_k, tokens.shape[1])
        self.prior_tok, self.prior_score = tokens[:, :k].copy(), scores[:, :k].copy()

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.bi_key, self.bi_tok, self.bi_score, self.uni_filled,
                                      self.uni_tok, self.uni_score))

    def reset(self) -> None:
        self.bi_key.fill(-1)
        self.uni_filled.fill(False)

    def update(self, prev: np.ndarray, cur: np.ndarray, tokens: np.ndarray, scores: np.ndarray) -> None:
        """Write the successors of contexts ``(prev[i], cur[i])``: ``tokens[i]`` (best first), ``scores[i]``.

        ``prev`` may hold -1 where there is no token before (start of the text): then only the
        unigram row is written. Within one call a later row wins over an earlier one.
        """
        prev = np.ascontiguousarray(prev, dtype=np.int64)
        cur = np.ascontiguousarray(cur, dtype=np.int64)
        k = min(self.top_k, tokens.shape[1])
        _write_rows(prev, cur, np.ascontiguousarray(tokens, dtype=np.int64),
                    np.ascontiguousarray(scores, dtype=np.float32), k, self.n_slots, self.uni_tok,
                    self.uni_score, self.uni_filled, self.bi_key, self.bi_tok, self.bi_score)

    def lookup(self, prev: int, cur: int) -> tuple[list[int], list[float]]:
        """Successors of context ``(prev, cur)``, best first: bigram row, else unigram row, else the
        prior's row (when one is set), else empty."""
        slot = int((prev * MULT + cur) % self.n_slots) if prev >= 0 else -1
        if slot >= 0 and self.bi_key[slot, 0] == prev and self.bi_key[slot, 1] == cur:
            toks, scores = self.bi_tok[slot], self.bi_score[slot]
        elif 0 <= cur < self.vocab_size and self.uni_filled[cur]:
            toks, scores = self.uni_tok[cur], self.uni_score[cur]
        elif self.prior_tok is not None and 0 <= cur < self.vocab_size:
            return self.prior_tok[cur].tolist(), self.prior_score[cur].tolist()
        else:
            return [], []
        scores_l = scores.tolist()
        toks_l = toks.tolist()
        if scores_l[-1] == -np.inf:  # a short row (fewer than K successors were harvested)
            n = next(i for i, s in enumerate(scores_l) if s == -np.inf)
            toks_l, scores_l = toks_l[:n], scores_l[:n]
        return toks_l, scores_l


@jit
def _write_rows(prev, cur, tokens, scores, k, n_slots, uni_tok, uni_score, uni_filled, bi_key, bi_tok, bi_score):
    # one pass, row by row (a later row overwrites an earlier one with the same key); the table is
    # cold after a forward pass, so the cost is the cache lines of each row, not the arithmetic
    for i in range(prev.shape[0]):
        c = cur[i]
        _write_row(uni_tok, uni_score, c, tokens, scores, i, k)
        uni_filled[c] = True
        p = prev[i]
        if p < 0:
            continue
        slot = (p * MULT + c) % n_slots
        bi_key[slot, 0] = p
        bi_key[slot, 1] = c
        _write_row(bi_tok, bi_score, slot, tokens, scores, i, k)


@jit
def _write_row(tok, score, row, tokens, scores, i, k):
    # row ``row`` of the table takes the first k successors of input row i; past them the row is
    # unused (score -inf marks a short row for lookup)
    for j in range(k):
        tok[row, j] = tokens[i, j]
        score[row, j] = scores[i, j]
    for j in range(k, score.shape[1]):
        score[row, j] = -np.inf
