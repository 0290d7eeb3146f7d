"""The repetition penalty of HF ``generate`` (``repetition_penalty``, CTRL's rule), its n-gram ban
(``no_repeat_ngram_size``) and the frequency and presence penalties of the OpenAI API / vLLM on a
verification's rows, so that every method still emits ``ar``'s tokens under them.

HF's rule, before the temperature and the cuts: every token already in the sequence (the prompt
included) has a positive logit divided by the penalty and a negative one multiplied by it,

    l_v <- l_v / r  if l_v > 0,   l_v * r  otherwise,        for v in the sequence so far

so r > 1 discourages repeats and r < 1 encourages them. In a tree each row has a sequence of its
own: the committed tokens (prompt + output) and the drafted tokens on its path from the root. The
penalty is applied to the committed tokens' columns of every row at once, then to each row's path
tokens that are not among them; either way a row's logits become a function of its own prefix, as
greedy's argmax already is, so the walk and the losslessness are unchanged (tests/test_penalty.py
checks ``ar`` against HF ``generate(repetition_penalty=...)`` and every method against ``ar``).

Compromises: fp32 logits are changed in place (the forward's own output, read only by this cycle),
bf16 / fp16 ones widened to fp32 first, as HF ``generate`` widens them before its processors (in
bf16 ``l / r`` rounded back could tie or flip the top; in fp16 a small r overflowed);
the adjacency table is harvested from the penalised rows (what the target now prefers); the prefill's
rows, which only feed the table, are not penalised.

The frequency and presence penalties (vLLM's ``frequency_penalty`` / ``presence_penalty``, after the
repetition penalty) count the *generated* tokens only (the prompt's are not counted, as in vLLM):

    l_v <- l_v - f * c_v - p * [c_v > 0],        c_v = how often v was generated so far

In a tree, c_v is a row's own count: the committed output's plus its path's. Each (row, column) gets
the one expression above from its whole integer count, never a committed part and then a path part
(two roundings could differ from ``ar``'s one and flip a near tie).

The n-gram ban (HF's ``NoRepeatNGramLogitsProcessor``) sets to -inf every token that would complete an
n-gram already in the row's sequence (prompt included). A row's sequence ends in its path, so its
banned set is the committed n-grams' and those its path forms, found from the parent's (one new n-gram
a node). It acts on values no penalty can move (-inf stays -inf), so its place in the order is free.

Example:
    >>> logits = torch.tensor([[2.0, -1.0, 0.5], [2.0, -1.0, 0.5]])
    >>> RepetitionPenalty(2.0, prompt=[0]).apply(logits, parent=[-1, 0], token=[0, 1])
    tensor([[ 1.0000, -1.0000,  0.5000],
            [ 1.0000, -2.0000,  0.5000]])
"""
from __future__ import annotations

import math
import numbers

import torch


def penalised(values: torch.Tensor, penalty: float) -> torch.Tensor:
    """HF's rule on ``values``: divided by ``penalty`` where positive, multiplied where not (element by
    element, so a row's result does not depend on the other rows)."""
    return torch.where(values < 0, values * penalty, values / penalty)


def path_counts(parent: list[int], token: list[int]) -> list[dict[int, int]]:
    """Each node's drafted path tokens (itself and its ancestors below the root, which is the last
    committed token) with how often each occurs there; parents before children.

    Example:
        >>> path_counts([-1, 0, 1, 0], [7, 3, 3, 5])
        [{}, {3: 1}, {3: 2}, {5: 1}]
    """
    paths: list[dict[int, int]] = [{}]
    for node in range(1, len(parent)):
        path = dict(paths[parent[node]])
        path[token[node]] = path.get(token[node], 0) + 1
        paths.append(path)
    return paths


class RepetitionPenalty:
    """The committed tokens of one decode (prompt, then each cycle's output) and the rule that
    penalises their columns, and a tree's path tokens, in a verification's logits."""

    def __init__(self, penalty: float, prompt: list[int], device: str | torch.device = "cpu") -> None:
        if not penalty > 0:
            raise ValueError(f"the repetition penalty must be > 0, got {penalty}")
        self.penalty, self.device = float(penalty), torch.device(device)
        self.seen: set[int] = set()
        self._columns = torch.empty(0, dtype=torch.long, device=self.device)
        self.extend(prompt)

    def extend(self, tokens: list[int]) -> None:
        """Add committed tokens (a cycle's output)."""
        new = sorted(set(tokens) - self.seen)
        if new:
            self.seen.update(new)
            self._columns = torch.cat([self._columns, torch.tensor(new, dtype=torch.long, device=self.device)])

    def apply(self, logits: torch.Tensor, *, parent: list[int], token: list[int]) -> torch.Tensor:
        """``logits`` (one row per tree node, ``parent`` / ``token`` the tree's, parents before children)
        penalised, in fp32 (in place when they are fp32): the committed tokens in every row, each
        node's path tokens in its own."""
        logits = logits.float()  # no copy for fp32
        if len(self._columns):
            logits[:, self._columns] = penalised(logits[:, self._columns], self.penalty)
        rows, columns = self._path_entries(parent, token)
        if rows:
            at = (torch.tensor(rows, device=logits.device), torch.tensor(columns, device=logits.device))
            logits[at] = penalised(logits[at], self.penalty)
        return logits

    def _path_entries(self, parent: list[int], token: list[int]) -> tuple[list[int], list[int]]:
        """(row, token) pairs: each node's drafted path tokens that are not committed, once per row."""
        rows, columns = [], []
        for node, path in enumerate(path_counts(parent, token)):
            fresh = sorted(t for t in path if t not in self.seen)
            rows.extend([node] * len(fresh))
            columns.extend(fresh)
        return rows, columns


class CountPenalty:
    """vLLM's frequency and presence penalties: the generated tokens' counts (each cycle's output) and
    the rule that subtracts ``frequency * count + presence`` from their columns in every row, with
    each row's own path tokens counted in.

    Example:
        >>> rule = CountPenalty(frequency=0.5, presence=1.0)
        >>> rule.extend([2])
        >>> rule.apply(torch.zeros(2, 3), parent=[-1, 0], token=[2, 2])
        tensor([[ 0.0000,  0.0000, -1.5000],
                [ 0.0000,  0.0000, -2.0000]])
    """

    def __init__(self, frequency: float, presence: float, device: str | torch.device = "cpu") -> None:
        if not (math.isfinite(frequency) and math.isfinite(presence)):
            raise ValueError(f"the frequency and presence penalties must be finite, got {frequency}, {presence}")
        self.frequency, self.presence, self.device = float(frequency), float(presence), torch.device(device)
        self.counts: dict[int, int] = {}
        self._slot: dict[int, int] = {}  # token -> its place in _columns / _counts (first generated, first)
        self._columns = torch.empty(0, dtype=torch.long, device=self.device)
        self._counts = torch.empty(0, device=self.device)

    def extend(self, tokens: list[int]) -> None:
        """Count generated tokens (a cycle's output): new columns appended, counts added in place, so a
        cycle costs its own tokens, not every distinct token so far (exact in fp32 up to 2**24)."""
        tokens = [int(t) for t in tokens]
        new = list(dict.fromkeys(t for t in tokens if t not in self._slot))
        for t in new:
            self._slot[t] = len(self._slot)
        for t in tokens:
            self.counts[t] = self.counts.get(t, 0) + 1
        if new:
            self._columns = torch.cat([self._columns, torch.tensor(new, dtype=torch.long, device=self.device)])
            self._counts = torch.cat([self._counts, torch.zeros(len(new), device=self.device)])
        if tokens:
            slots = torch.tensor([self._slot[t] for t in tokens], device=self.device)
            self._counts.index_add_(0, slots, torch.ones(len(tokens), device=self.device))

    def penalised(self, values: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """``values - frequency * counts - presence``, for counts >= 1 (vLLM's two subtractions)."""
        return values - self.frequency * counts - self.presence

    def apply(self, logits: torch.Tensor, *, parent: list[int], token: list[int]) -> torch.Tensor:
        """``logits`` (one row per tree node, parents before children) penalised for each row's counts,
        in fp32 (in place when they are fp32)."""
        logits = logits.float()
        rows, columns, counts = self._path_entries(parent, token)
        if rows:  # from the values before the committed columns change: one expression per entry
            at = (torch.tensor(rows, device=logits.device), torch.tensor(columns, device=logits.device))
            path_values = self.penalised(logits[at], torch.tensor(counts, dtype=torch.float32, device=logits.device))
        if len(self._columns):
            logits[:, self._columns] = self.penalised(logits[:, self._columns], self._counts)
        if rows:
            logits[at] = path_values
        return logits

    def _path_entries(self, parent: list[int], token: list[int]) -> tuple[list[int], list[int], list[int]]:
        """(row, token, count) triples: each node's drafted path tokens with the row's whole count of
        them, committed output included."""
        rows, columns, counts = [], [], []
        for node, path in enumerate(path_counts(parent, token)):
            for t in sorted(path):
                rows.append(node); columns.append(t); counts.append(path[t] + self.counts.get(t, 0))
        return rows, columns, counts


class NoRepeatNGram:
    """HF's ``no_repeat_ngram_size``: the committed sequence's n-grams (prefix -> next tokens) and the rule
    that bans, in every row, the tokens completing an n-gram of the row's own sequence.

    Example:
        >>> rule = NoRepeatNGram(2, prompt=[4, 5, 4])
        >>> rule.apply(torch.zeros(2, 6), parent=[-1, 0], token=[4, 6])
        tensor([[0., 0., 0., 0., 0., -inf],
                [0., 0., 0., 0., 0., 0.]])
    """

    def __init__(self, size: int, prompt: list[int]) -> None:
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(f"the n-gram ban's size must be a positive integer, got {size!r}")
        self.size = int(size)
        self.tail: tuple[int, ...] = ()  # the committed sequence's last size - 1 tokens (fewer while it is shorter)
        self.nexts: dict[tuple[int, ...], set[int]] = {}
        self.extend(prompt)

    def _after(self, recent: tuple[int, ...], t: int) -> tuple[int, ...]:
        """The last size - 1 tokens once ``t`` follows ``recent``."""
        return (recent + (t,))[-(self.size - 1):] if self.size > 1 else ()

    def extend(self, tokens: list[int]) -> None:
        """Add committed tokens (the prompt, then each cycle's output)."""
        for t in map(int, tokens):
            if len(self.tail) == self.size - 1:  # a whole n-gram: tail, then t
                self.nexts.setdefault(self.tail, set()).add(t)
            self.tail = self._after(self.tail, t)

    def apply(self, logits: torch.Tensor, *, parent: list[int], token: list[int]) -> torch.Tensor:
        """``logits`` (one row per tree node, parents before children) with each row's banned tokens at
        -inf, in fp32 (in place when they are fp32)."""
        logits = logits.float()
        rows, columns = self._banned(parent, token)
        if rows:
            logits[torch.tensor(rows, device=logits.device), torch.tensor(columns, device=logits.device)] = -torch.inf
        return logits

    def barred(self, parent: list[int], token: list[int]) -> list[int]:
        """The nodes (root excluded) whose token the ban sets to -inf in their parent's row: the target
        can never choose them, so a tree without them emits the same tokens and verifies fewer.

        Example:
            >>> NoRepeatNGram(2, prompt=[4, 5, 4]).barred(parent=[-1, 0, 1], token=[4, 5, 6])
            [1]
        """
        bans = self._row_bans(parent, token)
        return [node for node in range(1, len(parent)) if token[node] in bans[parent[node]]]

    def _banned(self, parent: list[int], token: list[int]) -> tuple[list[int], list[int]]:
        """(row, token) pairs to ban."""
        rows, columns = [], []
        for node, banned in enumerate(self._row_bans(parent, token)):
            rows.extend([node] * len(banned)); columns.extend(sorted(banned))
        return rows, columns

    def _row_bans(self, parent: list[int], token: list[int]) -> list[set[int]]:
        """Each node's banned tokens: those that followed its sequence's last size - 1 tokens in a
        committed n-gram or in one its path formed (the parent's, plus the parent's last tokens
        followed by the node's own: one n-gram a node)."""
        recent, formed = [self.tail], [()]
        bans = []
        for node in range(len(parent)):
            if node:
                r, t = recent[parent[node]], token[node]
                formed.append(formed[parent[node]] + (((r, t),) if len(r) == self.size - 1 else ()))
                recent.append(self._after(r, t))
            query = recent[node]
            if len(query) < self.size - 1:  # too short a sequence for a whole n-gram
                bans.append(set())
                continue
            bans.append(self.nexts.get(query, set()) | {t for prefix, t in formed[node] if prefix == query})
        return bans


def penalties_for(config, prompt: list[int], device: str | torch.device = "cpu") -> list:
    """The penalties a :class:`~goose_runtime.config.DecodeConfig` asks for, in the order they apply
    (HF's repetition penalty, then vLLM's frequency / presence, then HF's n-gram ban): an empty list
    when none."""
    rules: list = []
    if config.repetition_penalty != 1:
        rules.append(RepetitionPenalty(config.repetition_penalty, prompt, device))
    if config.frequency_penalty or config.presence_penalty:
        rules.append(CountPenalty(config.frequency_penalty, config.presence_penalty, device))
    if config.no_repeat_ngram_size:
        rules.append(NoRepeatNGram(config.no_repeat_ngram_size, prompt))
    return rules
