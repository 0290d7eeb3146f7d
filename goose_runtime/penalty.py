"""The repetition penalty of HF ``generate`` (``repetition_penalty``, CTRL's rule) and the frequency and
presence penalties of the OpenAI API / vLLM on a verification's rows, so that every method still emits
``ar``'s tokens under them.

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

Example:
    >>> logits = torch.tensor([[2.0, -1.0, 0.5], [2.0, -1.0, 0.5]])
    >>> RepetitionPenalty(2.0, prompt=[0]).apply(logits, parent=[-1, 0], token=[0, 1])
    tensor([[ 1.0000, -1.0000,  0.5000],
            [ 1.0000, -2.0000,  0.5000]])
"""
from __future__ import annotations

import torch


def penalised(values: torch.Tensor, penalty: float) -> torch.Tensor:
    """HF's rule on ``values``: divided by ``penalty`` where positive, multiplied where not (element by
    element, so a row's result does not depend on the other rows)."""
    return torch.where(values < 0, values * penalty, values / penalty)


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
        """(row, token) pairs: each node's drafted path tokens (itself and its ancestors below the root,
        which is the last committed token) that are not committed, once per row."""
        paths: list[frozenset[int]] = [frozenset()]
        rows, columns = [], []
        for node in range(1, len(parent)):
            own = paths[parent[node]]
            if token[node] not in self.seen and token[node] not in own:
                own = own | {token[node]}
            paths.append(own)
            rows.extend([node] * len(own))
            columns.extend(sorted(own))
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
        self.frequency, self.presence, self.device = float(frequency), float(presence), torch.device(device)
        self.counts: dict[int, int] = {}
        self._columns = torch.empty(0, dtype=torch.long, device=self.device)
        self._counts = torch.empty(0, device=self.device)

    def extend(self, tokens: list[int]) -> None:
        """Count generated tokens (a cycle's output)."""
        for t in tokens:
            self.counts[t] = self.counts.get(t, 0) + 1
        if tokens:
            columns = sorted(self.counts)
            self._columns = torch.tensor(columns, dtype=torch.long, device=self.device)
            self._counts = torch.tensor([self.counts[c] for c in columns], dtype=torch.float32, device=self.device)

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
        """(row, token, count) triples: each node's drafted path tokens (below the root, the last
        committed token) with the row's whole count of them, committed output included."""
        paths: list[dict[int, int]] = [{}]
        rows, columns, counts = [], [], []
        for node in range(1, len(parent)):
            own = dict(paths[parent[node]])
            own[token[node]] = own.get(token[node], 0) + 1
            paths.append(own)
            for t in sorted(own):
                rows.append(node); columns.append(t); counts.append(own[t] + self.counts.get(t, 0))
        return rows, columns, counts


def penalties_for(config, prompt: list[int], device: str | torch.device = "cpu") -> list:
    """The penalties a :class:`~goose_runtime.config.DecodeConfig` asks for, in the order they apply
    (HF's repetition penalty, then vLLM's frequency / presence): an empty list when none."""
    rules: list = []
    if config.repetition_penalty != 1:
        rules.append(RepetitionPenalty(config.repetition_penalty, prompt, device))
    if config.frequency_penalty or config.presence_penalty:
        rules.append(CountPenalty(config.frequency_penalty, config.presence_penalty, device))
    return rules
