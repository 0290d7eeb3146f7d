"""What one decoding run hands to the trace recorder and the CLI: plain data, no torch.

The decoder (``goose_runtime.decoder``) fills one :class:`CycleRecord` per verification cycle;
``goose_runtime.tracing`` turns a list of :class:`PromptResult` into a ``goose_trace_version=1``
parquet file (schema: :mod:`goose_theory.traceio`).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CycleRecord:
    """One verification cycle: the verified tree (node 0 = root) and what the walk accepted.

    All per-node lists have one entry per node, root included, in tree order (parents first).
    """

    parent: list[int]          # -1 for the root
    source: list[str]          # "root" / "spine" / "transition"
    rank: list[int]            # spine 0; transition: rank in the adjacency list
    token: list[int]           # drafted token; root: the anchor token
    match: list[bool]          # token == target argmax at its parent (root: True)
    accepted: list[bool]       # on the accepted path (root: True)
    score: list[float]         # adjacency score (NaN when not a transition node)
    spine_pos: list[int]       # 1-based spine position, 0 otherwise
    tau: int                   # tokens produced by this cycle, bonus included
    verify_s: float            # seconds in the forward pass
    draft_s: float             # seconds outside it (matching, building, mask, walk, cache, harvest)
    ngram: int = 0             # n-gram length of the context match (0: no match)
    consensus: int = 0         # earlier occurrences agreeing on the first spine token
    ema: float = float("nan")  # EMA of spine acceptance after this cycle (goose only)
    bypass: bool = False       # consensus bypass fired
    spine_avail: int = -1      # continuation tokens the matcher offered (0: none; -1: not recorded)
    confident: int = -1        # the match was confident, >= 2 n-gram lengths agree (1 / 0; -1: not recorded)

    @property
    def n_nodes(self) -> int:
        return len(self.parent)


@dataclass
class PromptResult:
    """The outcome of decoding one prompt with one method."""

    method: str
    prompt_id: str
    benchmark: str
    prompt_tokens: int
    token_ids: list[int]       # generated tokens only (prompt excluded)
    text: str
    cycles: list[CycleRecord] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0      # wall time after prefill

    @property
    def mean_tau(self) -> float:
        """Mean tokens per verification call, bonus included, prefill excluded."""
        return sum(c.tau for c in self.cycles) / len(self.cycles) if self.cycles else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return len(self.token_ids) / self.decode_s if self.decode_s > 0 else float("nan")
