"""Trace replay: a fixed topology's tau on recorded texts, without the model.

Lossless decoding emits the same greedy text for every method, so with the text known (from the
fit's traces, :func:`goose_theory.replayinput.trace_texts`) the runtime's own context matcher
and tree builder can be run cycle by cycle: the matcher's offer (and its confidence) is exact,
the spine is accepted exactly as far as it equals the text, and only transitions are drawn, with
a regime fit's rates given the walk's state (:func:`goose_theory.replayinput.conditional_rates`).
Each cycle then advances the text by its accepted tokens plus the bonus, up to the token cap, as
:class:`goose_runtime.decoder.Decoder` does. The result is a prediction from the fit's texts that
sees what the closed form cannot: how long the matches are *under this topology's drafting*, and
the cap cutting each prompt's last cycle (``emitted_tau`` against ``accepted_tau``).

Compromises: the adjacency table is not replayed (every transition slot gets a placeholder; the
rates carry the fitted slot fill); past the end of a recorded text a spine node is drawn with the
fitted p_s. Fixed topologies (``topology:FILE``) and the paper's adaptive ``goose`` are replayed:
goose's EMA follows the replayed spine acceptance exactly, and its branches get every slot they
ask for (the real table sometimes has fewer candidates; goose then re-homes that budget).

Example (a 2-node spine on a text that repeats its prompt: each cycle accepts both spine tokens
plus the bonus, and the cap cuts the third cycle to 2 of its 3 tokens)::

    >>> from goose_theory.replayinput import RegimeRates, TraceText
    >>> from goose_theory.topology import Topology
    >>> from goose_runtime.methods import MethodSpec
    >>> chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
    >>> spec = MethodSpec("topology:chain", "topology", 2, chain)
    >>> rates = {"matched": RegimeRates(()), "unmatched": RegimeRates(())}
    >>> text = TraceText("b", "p", (1, 2, 3, 4, 1, 2, 3, 4), False)
    >>> r = replay_prompt(spec, [1, 2, 3, 4, 1, 2, 3, 4], text, rates, max_new_tokens=8, rng=None)
    >>> r.cycles, r.accepted, r.emitted
    (3, 9, 8)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from goose_theory.replayinput import RegimeRates, TraceText
from goose_theory.topology import PAPER_MAX_SPINE, SPINE, TRANSITION

from .goose import GoosePolicy, build_goose
from .matcher import ContextMatcher
from .replaycue import bigram_seen, slot_kind
from .methods import MethodSpec
from .trees import DraftTree, build_from_topology

SEEDS = 4
_PLACEHOLDERS = [-2 - r for r in range(64)]  # never a real token id, so never equal to the text


class _EverySlot:
    """Adjacency stand-in: every transition slot gets a distinct placeholder token."""

    def lookup(self, prev: int, cur: int) -> tuple[list[int], list[float]]:
        return _PLACEHOLDERS, [0.0] * len(_PLACEHOLDERS)


@dataclass
class PromptReplay:
    """One prompt's replayed cycles: totals, and cycles / accepted tokens per regime."""

    cycles: int = 0
    accepted: int = 0   # verified tokens, bonus included (what the acceptance model predicts)
    emitted: int = 0    # after the cap cut the last cycle (what the runtime's tau counts)
    regimes: dict[str, list[int]] = field(default_factory=dict)

    def add(self, other: "PromptReplay") -> None:
        """Pool ``other``'s counts into these."""
        self.cycles += other.cycles; self.accepted += other.accepted; self.emitted += other.emitted
        for k, (c, a) in other.regimes.items():
            slot = self.regimes.setdefault(k, [0, 0])
            slot[0] += c; slot[1] += a


def regime_of(spec: MethodSpec, match, tree_shape) -> str:
    """The regime whose rates apply: no match, a match drafted on the confident tree, another."""
    if not match:
        return "unmatched"
    return "confident" if spec.confident is not None and tree_shape is spec.confident else "matched"


def _rates_of(kind: str, rates: RegimeRates) -> tuple[float, ...]:
    """The fitted rates of a slot kind (:func:`goose_runtime.replaycue.slot_kind`)."""
    return {"chain": rates.chain, "root_u": rates.root, "root_m": rates.root, "spine_m": rates.spine,
            "end": rates.end}[kind]


def _draw(children: Sequence[int], tree: DraftTree, table: tuple[float, ...], rng) -> int | None:
    """The accepted child of ``children`` (exclusive: at most one) or None."""
    if not table or rng is None:
        return None
    u, total = rng.random(), 0.0
    for c in children:
        total += table[min(tree.rank[c], len(table) - 1)]
        if u < total:
            return c
    return None


def walk(tree: DraftTree, text: Sequence[int], pos: int, rates: RegimeRates, rng, *, open_end: bool,
         scale=None, unmatched: bool = False) -> int:
    """Accepted non-root nodes of ``tree`` drafted at text position ``pos``: down the spine while
    it equals the text (past its end, when ``open_end``, with the fitted p_s), then transitions
    drawn from ``rates``, times ``scale(slot kind, text position)`` where given (the text cue,
    :mod:`goose_runtime.replaycue`; ``unmatched``: the cycle's regime, for the root's kind)."""
    return walk_spine(tree, text, pos, rates, rng, open_end=open_end, scale=scale, unmatched=unmatched)[0]


def walk_spine(tree: DraftTree, text: Sequence[int], pos: int, rates: RegimeRates, rng, *, open_end: bool,
               scale=None, unmatched: bool = False) -> tuple[int, int]:
    """:func:`walk`'s accepted nodes, and how many of them are spine nodes (what goose's EMA sees)."""
    node, accepted, on_spine = 0, 0, 0
    while True:
        kids = tree.children[node]
        spine = next((c for c in kids if tree.source[c] == SPINE), None)
        at = pos + accepted
        if spine is not None:
            if at < len(text):
                hit = tree.token[spine] == text[at]
            else:
                p = rates.p_s[min(tree.depth[spine], len(rates.p_s)) - 1] if rates.p_s else 0.0
                hit = open_end and rng is not None and rng.random() < p
            if hit:
                node, accepted, on_spine = spine, accepted + 1, on_spine + 1
                continue
        branch = [c for c in kids if tree.source[c] == TRANSITION]
        kind = slot_kind(tree.source[node] == TRANSITION, node == 0, unmatched, spine is not None)
        table = _rates_of(kind, rates)
        if scale is not None and branch and table:
            table = _scaled(table, scale(kind, at), [tree.rank[c] for c in branch])
        pick = _draw(branch, tree, table, rng)
        if pick is None:
            return accepted, on_spine
        node, accepted = pick, accepted + 1


def _scaled(table: tuple[float, ...], factors: tuple[float, ...], ranks: list[int]) -> tuple[float, ...]:
    """``table`` times the rank's factor (the last factor for every higher rank), cut back so the
    children's rates (exclusive) sum to <= 1."""
    width = max(len(table), max(ranks) + 1)
    out = tuple(table[min(r, len(table) - 1)] * factors[min(r, len(factors) - 1)] for r in range(width))
    total = sum(out[r] for r in ranks)
    return tuple(x / total for x in out) if total > 1 else out


def _cue_scale(prompt_ids: Sequence[int], tokens: Sequence[int], multipliers: dict | None):
    """(kind, text position) -> the cue's multipliers by rank for one prompt, or None without them."""
    if not multipliers:
        return None
    flags, base = bigram_seen(list(prompt_ids) + list(tokens)), len(prompt_ids)

    def scale(kind: str, at: int) -> tuple[float, ...]:
        return multipliers[kind][bool(flags[base + at])] if base + at < len(flags) else (1.0,)
    return scale


def replay_prompt(spec: MethodSpec, prompt_ids: Sequence[int], text: TraceText, rates: dict[str, RegimeRates], *,
                  max_new_tokens: int, rng, ngram_sizes: tuple[int, ...] = (5, 4, 3), max_spine: int = PAPER_MAX_SPINE,
                  multipliers: dict | None = None, goose: dict | None = None) -> PromptReplay:
    """Replay ``spec`` on one prompt's recorded ``text`` (see the module docstring); ``rng``: a
    numpy Generator for the transitions (None: no transition is ever accepted); ``multipliers``:
    the text cue's (:func:`goose_runtime.replaycue.cue_multipliers`), None to draw at the fitted rates;
    ``goose``: :class:`goose_runtime.goose.GoosePolicy` settings plus ``top_k`` and ``max_depth``
    for ``spec.kind == "goose"`` (default: the decoder's)."""
    matcher = ContextMatcher(prompt_ids, ngram_sizes=ngram_sizes, max_spine=max_spine)
    tokens = text.tokens
    scale = _cue_scale(prompt_ids, tokens, multipliers)
    draft = _drafter(spec, max_spine, goose)
    out, pos = PromptReplay(), 0
    limit = min(max_new_tokens, len(tokens)) if text.complete else max_new_tokens
    while out.emitted < limit:
        match = matcher.match()
        tree, regime, observe = draft(match, matcher.tokens[-1])
        accepted, on_spine = walk_spine(tree, tokens, pos, rates.get(regime) or rates["matched"], rng,
                                        open_end=not text.complete, scale=scale, unmatched=regime == "unmatched")
        observe(tree.n_spine, on_spine)
        accepted += 1
        new = min(accepted, limit - out.emitted)
        out.cycles += 1; out.accepted += accepted; out.emitted += new
        counts = out.regimes.setdefault(regime, [0, 0])
        counts[0] += 1; counts[1] += accepted
        matcher.extend(tokens[pos:pos + new])
        pos += new
    return out


def _drafter(spec: MethodSpec, max_spine: int, goose: dict | None):
    """(match, anchor) -> (tree, regime, observe(spine nodes, accepted spine nodes)) for ``spec``:
    its fixed trees, or the paper's adaptive goose with a fresh EMA (the adjacency key before the
    anchor only picks placeholders here: any token will do)."""
    adjacency = _EverySlot()
    if spec.kind == "goose":
        options = dict(goose or {})
        shape = dict(top_k=options.pop("top_k", 10), max_depth=options.pop("max_depth", 6))
        policy = GoosePolicy(**options)

        def draft_goose(match, anchor):
            tree = build_goose(policy, match, adjacency, -1, anchor, budget=spec.budget, max_spine=max_spine, **shape)
            return tree, ("unmatched" if not match else "confident" if tree.bypass else "matched"), policy.observe
        return draft_goose

    def draft_fixed(match, anchor):
        shape = spec.tree_for(match)
        tree = build_from_topology(shape, match, adjacency, -1, anchor, budget=spec.budget)
        return tree, regime_of(spec, match, shape), _ignore
    return draft_fixed


def _ignore(n_spine: int, n_accepted_spine: int) -> None:
    return None


@dataclass(frozen=True)
class ReplayResult:
    """A topology replayed on ``prompts`` recorded texts, ``seeds`` times: tokens per cycle
    (accepted, and emitted under the cap ``max_new_tokens``), per-seed emitted tau (its spread is
    the replay's own noise), and per regime the share of cycles and accepted tokens per cycle."""

    accepted_tau: float
    emitted_tau: float
    emitted_by_seed: tuple[float, ...]
    prompts: int
    seeds: int
    max_new_tokens: int
    regimes: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "emitted_by_seed": list(self.emitted_by_seed)}


def replay(spec: MethodSpec, items: Sequence[tuple[Sequence[int], TraceText]], rates: dict[str, RegimeRates], *,
           max_new_tokens: int, seeds: int = SEEDS, ngram_sizes: tuple[int, ...] = (5, 4, 3),
           max_spine: int = PAPER_MAX_SPINE, multipliers: dict | None = None,
           goose: dict | None = None) -> ReplayResult:
    """Replay ``spec`` (a fixed topology, or goose) on every (prompt ids, text) of ``items``, ``seeds``
    times; prompt i of seed s draws from ``default_rng([s, i])``, so the result is reproducible."""
    if spec.kind not in ("topology", "goose"):
        raise ValueError(f"only fixed topologies and goose can be replayed, not {spec.name}")
    if not items:
        raise ValueError("no recorded texts to replay")
    per_seed, totals = [], PromptReplay()
    for s in range(seeds):
        seed_total = PromptReplay()
        for i, (prompt_ids, text) in enumerate(items):
            r = replay_prompt(spec, prompt_ids, text, rates, max_new_tokens=max_new_tokens,
                              rng=np.random.default_rng([s, i]), ngram_sizes=ngram_sizes, max_spine=max_spine,
                              multipliers=multipliers, goose=goose)
            seed_total.add(r)
        totals.add(seed_total)
        per_seed.append(seed_total.emitted / seed_total.cycles)
    regimes = {k: {"cycle_share": c / totals.cycles, "tau": a / c} for k, (c, a) in sorted(totals.regimes.items())}
    return ReplayResult(totals.accepted / totals.cycles, totals.emitted / totals.cycles, tuple(per_seed), len(items),
                        seeds, max_new_tokens, regimes)
