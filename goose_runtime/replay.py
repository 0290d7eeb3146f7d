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
fitted p_s. Only fixed topologies (``topology:FILE``) are replayed.

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

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from goose_theory.replayinput import RegimeRates, TraceText
from goose_theory.topology import SPINE, TRANSITION

from .matcher import ContextMatcher
from .methods import MethodSpec
from .trees import DraftTree, build_from_topology

SEEDS = 4
# a variant replaces the exported file only if the replay prices it this much higher: 4 seeds of
# 200 fitted stdlib-wide prompts spread 0.7% (one seed), and a file validated for a 0.3% gain
# only costs the loop time (the shipped sets' variants all lie within 0.5% of the file)
MIN_GAIN = 0.01
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
    offers: dict[str, list[int]] = field(default_factory=dict)  # per regime: cycles by tokens offered


def regime_of(spec: MethodSpec, match, tree_shape) -> str:
    """The regime whose rates apply: no match, a match drafted on the confident tree, another."""
    if not match:
        return "unmatched"
    return "confident" if spec.confident is not None and tree_shape is spec.confident else "matched"


def _rates_at(tree: DraftTree, node: int, has_spine_child: bool, rates: RegimeRates) -> tuple[float, ...]:
    if tree.source[node] == TRANSITION:
        return rates.chain
    if node == 0:
        return rates.root
    return rates.spine if has_spine_child else rates.end


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


def walk(tree: DraftTree, text: Sequence[int], pos: int, rates: RegimeRates, rng, *, open_end: bool) -> int:
    """Accepted non-root nodes of ``tree`` drafted at text position ``pos``: down the spine while
    it equals the text (past its end, when ``open_end``, with the fitted p_s), then transitions
    drawn from ``rates``."""
    node, accepted = 0, 0
    while True:
        kids = tree.children[node]
        spine = next((c for c in kids if tree.source[c] == SPINE), None)
        if spine is not None:
            at = pos + accepted
            if at < len(text):
                hit = tree.token[spine] == text[at]
            else:
                p = rates.p_s[min(tree.depth[spine], len(rates.p_s)) - 1] if rates.p_s else 0.0
                hit = open_end and rng is not None and rng.random() < p
            if hit:
                node, accepted = spine, accepted + 1
                continue
        branch = [c for c in kids if tree.source[c] == TRANSITION]
        pick = _draw(branch, tree, _rates_at(tree, node, spine is not None, rates), rng)
        if pick is None:
            return accepted
        node, accepted = pick, accepted + 1


def replay_prompt(spec: MethodSpec, prompt_ids: Sequence[int], text: TraceText, rates: dict[str, RegimeRates], *,
                  max_new_tokens: int, rng, ngram_sizes: tuple[int, ...] = (5, 4, 3), max_spine: int = 20) -> PromptReplay:
    """Replay ``spec`` on one prompt's recorded ``text`` (see the module docstring); ``rng``: a
    numpy Generator for the transitions (None: no transition is ever accepted)."""
    matcher = ContextMatcher(prompt_ids, ngram_sizes=ngram_sizes, max_spine=max_spine)
    tokens, adjacency = text.tokens, _EverySlot()
    out, pos = PromptReplay(), 0
    limit = min(max_new_tokens, len(tokens)) if text.complete else max_new_tokens
    while out.emitted < limit:
        match = matcher.match()
        shape = spec.tree_for(match)
        regime = regime_of(spec, match, shape)
        # the adjacency key before the anchor only picks placeholders here: any token will do
        tree = build_from_topology(shape, match, adjacency, -1, matcher.tokens[-1], budget=spec.budget)
        accepted = walk(tree, tokens, pos, rates.get(regime) or rates["matched"], rng, open_end=not text.complete) + 1
        new = min(accepted, limit - out.emitted)
        out.cycles += 1; out.accepted += accepted; out.emitted += new
        counts = out.regimes.setdefault(regime, [0, 0])
        counts[0] += 1; counts[1] += accepted
        offered = out.offers.setdefault(regime, [0] * (max_spine + 1))
        offered[min(len(match), max_spine)] += 1
        matcher.extend(tokens[pos:pos + new])
        pos += new
    return out


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
    offers: dict[str, tuple[int, ...]] = field(default_factory=dict)  # per regime: cycles by tokens offered (all seeds)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "emitted_by_seed": list(self.emitted_by_seed),
                "offers": {k: list(v) for k, v in self.offers.items()}}


def replay(spec: MethodSpec, items: Sequence[tuple[Sequence[int], TraceText]], rates: dict[str, RegimeRates], *,
           max_new_tokens: int, seeds: int = SEEDS, ngram_sizes: tuple[int, ...] = (5, 4, 3),
           max_spine: int = 20) -> ReplayResult:
    """Replay ``spec`` (a fixed topology) on every (prompt ids, text) of ``items``, ``seeds``
    times; prompt i of seed s draws from ``default_rng([s, i])``, so the result is reproducible."""
    if spec.kind != "topology":
        raise ValueError(f"only fixed topologies can be replayed, not {spec.name}")
    if not items:
        raise ValueError("no recorded texts to replay")
    per_seed, totals = [], PromptReplay()
    for s in range(seeds):
        seed_total = PromptReplay()
        for i, (prompt_ids, text) in enumerate(items):
            r = replay_prompt(spec, prompt_ids, text, rates, max_new_tokens=max_new_tokens,
                              rng=np.random.default_rng([s, i]), ngram_sizes=ngram_sizes, max_spine=max_spine)
            for acc in (seed_total, totals):
                acc.cycles += r.cycles; acc.accepted += r.accepted; acc.emitted += r.emitted
                for k, (c, a) in r.regimes.items():
                    slot = acc.regimes.setdefault(k, [0, 0]); slot[0] += c; slot[1] += a
            for k, hist in r.offers.items():
                mine = totals.offers.setdefault(k, [0] * len(hist))
                totals.offers[k] = [x + y for x, y in zip(mine, hist)]
        per_seed.append(seed_total.emitted / seed_total.cycles)
    regimes = {k: {"cycle_share": c / totals.cycles, "tau": a / c} for k, (c, a) in sorted(totals.regimes.items())}
    return ReplayResult(totals.accepted / totals.cycles, totals.emitted / totals.cycles, tuple(per_seed), len(items),
                        seeds, max_new_tokens, regimes, {k: tuple(v) for k, v in sorted(totals.offers.items())})


def _fit_traces(topology, traces: Sequence[str] | None) -> list[str]:
    return [p for p in (traces or (topology.meta.get("provenance") or {}).get("traces") or []) if os.path.exists(p)]


def replay_items(bundle, files: Sequence[str], benchmark: str, *,
                 prompt_ids: set[str] | None = None) -> list[tuple[list[int], TraceText]]:
    """(prompt ids, recorded text) of ``benchmark``'s prompts in trace ``files`` (those in
    ``prompt_ids``, if given), encoded as the runtime encodes them."""
    from goose_theory.replayinput import trace_texts

    from .prompts import encode_prompt, load_prompts, set_name

    texts = trace_texts(files, benchmark=set_name(benchmark))
    prompts = {p.id: p for p in load_prompts(benchmark)}
    return [(encode_prompt(bundle, prompts[pid]), text) for (_, pid), text in sorted(texts.items())
            if pid in prompts and (prompt_ids is None or pid in prompt_ids)]


def _replay_config(config) -> dict[str, Any]:
    return dict(max_new_tokens=config.max_new_tokens, ngram_sizes=tuple(config.ngram_sizes), max_spine=config.max_spine)


def replay_prediction(bundle, spec: MethodSpec, benchmark: str, *, config, traces: Sequence[str] | None = None,
                      prompt_ids: set[str] | None = None, seeds: int = SEEDS) -> ReplayResult | None:
    """``spec``'s topology replayed on the texts of the traces it was fitted on (its provenance,
    or ``traces``), for ``benchmark``'s prompts (those in ``prompt_ids``, if given), at ``config``'s
    token cap and matcher settings; None for a file without a regime fit (or one too old to
    replay), or without those traces or texts."""
    from goose_theory.replayinput import conditional_rates

    meta = spec.topology.meta if spec.topology is not None else {}
    files = _fit_traces(spec.topology, traces) if spec.topology is not None else []
    if not isinstance(meta.get("regime_fit"), dict) or not files:
        return None
    try:
        rates = conditional_rates(meta["regime_fit"])
    except ValueError:
        return None
    items = replay_items(bundle, files, benchmark, prompt_ids=prompt_ids)
    return replay(spec, items, rates, seeds=seeds, **_replay_config(config)) if items else None


def pick_by_replay(bundle, pair, benchmark: str, *, config, name: str) -> tuple[Any, list[dict]] | None:
    """Among ``pair``'s matched-tree variants (:func:`goose_theory.regimevariants.matched_variants`),
    the regime file with the highest replayed emitted tau on its fit traces' texts where that beats
    the file itself by more than ``MIN_GAIN`` (else the file), and one row per candidate (spine
    scale, spine and transition slots, closed-form and replayed tau). The winner
    carries the rows as ``meta.replay_pick``. None without a regime fit or fit traces."""
    from goose_theory.regimevariants import matched_variants
    from goose_theory.replayinput import conditional_rates, regime_fit_from_dict

    from .methods import topology_method

    fit, files = pair.meta.get("regime_fit"), _fit_traces(pair, None)
    if not isinstance(fit, dict) or not files or not (fit.get("spines") or [None])[0]:
        return None
    items = replay_items(bundle, files, benchmark)
    if not items:
        return None
    rates, rows, best = conditional_rates(fit), [], None
    for scale, cand in matched_variants(pair, regime_fit_from_dict(fit)):
        r = replay(topology_method(cand, name), items, rates, **_replay_config(config))
        rows.append({"spine_scale": scale, "spine": sum(1 for x in cand.source if x == SPINE),
                     "transitions": sum(1 for x in cand.source if x == TRANSITION),
                     "predicted_tau": float(cand.meta["predicted_tau"]), "replayed_tau": r.emitted_tau})
        if best is None or r.emitted_tau > best[1] + 1e-12:
            best = (cand, r.emitted_tau)
    assert best is not None
    if best[1] <= rows[0]["replayed_tau"] * (1 + MIN_GAIN):  # scale 1, the file itself, comes first
        best = (pair, rows[0]["replayed_tau"])
    return best[0].with_meta(replay_pick=rows), rows
