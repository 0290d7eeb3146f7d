"""Inputs of a trace replay (:mod:`goose_runtime.replay`): the text each recorded prompt produced,
and a regime fit's transition rates *given the walk's state*.

Why a replay: decoding is lossless, so every method emits the same greedy text, and a spine
token is accepted exactly when it equals the text's next token. Given the text, the context
matcher (deterministic) and a fixed topology, the spine part of every cycle, and so which cycles
are matched, confident or unmatched and how long their matches are, is known without the model.
Only transition acceptance is drawn, from the fitted rates. That prices a topology with the
availability of matches *under its own drafting* (a method that drafts long chains meets more
short re-matches after them, docs/two-regime.md section 10), and with the token cap cutting each
prompt's last cycle, which the closed form of :mod:`goose_theory.regime` cannot see.

Compromises: texts come from traces, so they stop a few tokens past the recorded runs' cap;
past that end a spine node is drawn with the fitted p_s (given it exists). Slot fill stays folded
into the rates, as in the closed form.

Example:
    >>> rates = conditional_rates({"psi": 0.5, "matched": {"p_s": [0.8, 0.4], "p_t": [0.1], "model": "exclusive"},
    ...                            "unmatched": {"p_s": 0.0, "p_t": [0.3], "model": "exclusive"},
    ...                            "spines": [{"p_s": [0.8], "avail": [1.0, 0.5], "end": [0.6]}, None]})
    >>> round(rates["matched"].root[0], 9), rates["unmatched"].root   # 0.1 / P(spine child fails) = 0.2
    (0.5, (0.3,))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .acceptance import Acceptance
from .regimespare import SpineModel
from .traceio import open_trace, trace_metadata

def spine_misses(p_s_eff: Sequence[float]) -> tuple[float, float]:
    """(P(root's spine child fails), P(a mid-spine node's spine child fails)) in the exclusive
    model of a matched regime: the factors that turn rates *beside a failed spine child* into the
    fitted p_t's under the root and under spine nodes (regimefit folds them in; the replay knows
    whether the spine child failed, so it divides them out)."""
    deeper = float(np.mean(p_s_eff[1:6])) if len(p_s_eff) > 1 else 0.0
    return 1.0 - float(p_s_eff[0]), 1.0 - deeper


@dataclass(frozen=True)
class RegimeRates:
    """Transition rates by rank (slot fill folded in) for one regime, by where the walk stands:
    under the root or a spine node whose spine child failed (``root``, ``spine``), under a spine
    node without a spine child (``end``), under a transition (``chain``); ``p_s``: spine
    acceptance given the node exists, by depth (used past the end of a recorded text)."""

    root: tuple[float, ...]
    spine: tuple[float, ...] = ()
    chain: tuple[float, ...] = ()
    end: tuple[float, ...] = ()
    p_s: tuple[float, ...] = ()


def regime_fit_from_dict(fit: Mapping[str, Any]) -> Any:
    """The :class:`~goose_theory.regimefit.RegimeFit` a regime file stores (``regime_fit``), to
    price trees with :func:`goose_theory.regime.regime_tau` again."""
    from .regimefit import RegimeFit

    def acc(key: str) -> Acceptance | None:
        return Acceptance.from_dict(fit[key]) if fit.get(key) is not None else None

    spines = tuple(None if s is None else SpineModel.from_dict(s) for s in (fit.get("spines") or [None, None]))
    fill = fit["fill"]
    return RegimeFit(float(fit["psi"]), tuple(fit["psi_ci95"]), acc("matched"), acc("unmatched"),
                     (fill["root"], fill["spine"], fill["transition"]), int(fit["cycles"]), int(fit["prompts"]),
                     acc("confident"), float(fit.get("psi_confident", 0.0)), spines + (None,) * (2 - len(spines)))


def _unfold(values: Sequence[float], miss: float) -> tuple[float, ...]:
    return tuple(min(float(v) / miss, 1.0) if miss > 0 else 0.0 for v in values)


def _matched_rates(acc: Acceptance, spine: SpineModel) -> RegimeRates:
    root_miss, spine_miss = spine_misses(spine.effective())
    return RegimeRates(_unfold(acc.transition_list(0), root_miss), _unfold(acc.transition_list(1), spine_miss),
                       tuple(acc.transition_list(2)), tuple(spine.end), tuple(spine.p_s))


def conditional_rates(fit: Mapping[str, Any]) -> dict[str, RegimeRates]:
    """Rates per regime from a stored regime fit (``RegimeFit.to_dict()``, a regime file's
    ``regime_fit``); ``confident`` only for a split fit. Raises ValueError without spine models
    (files written before they were stored)."""
    spines = fit.get("spines") or [None, None]
    if not spines or spines[0] is None:
        raise ValueError("the regime fit has no spine model (written by an older goose): re-export it")
    unmatched = Acceptance.from_dict(fit["unmatched"])
    out = {"unmatched": RegimeRates(tuple(unmatched.transition_list(0)), chain=tuple(unmatched.transition_list(2)))}
    for name, spine in zip(("matched", "confident"), spines):
        if spine is not None and fit.get(name) is not None:
            out[name] = _matched_rates(Acceptance.from_dict(fit[name]), SpineModel.from_dict(spine))
    return out


@dataclass(frozen=True)
class TraceText:
    """The greedy continuation one prompt produced, as far as a trace verified it (accepted tokens
    past the cap included); ``complete``: the text ended (EOS) before the cap, nothing follows."""

    benchmark: str
    prompt_id: str
    tokens: tuple[int, ...]
    complete: bool


def trace_texts(files: Sequence[str], *, benchmark: str | None = None) -> dict[tuple[str, str], TraceText]:
    """Per (benchmark, prompt): the longest text any method of the traces verified (every method
    is lossless, so they agree), cut at the emitted tokens where the run ended before its cap.

    Example: ``trace_texts(["traces/large/stdlib-wide-b8.parquet"])[("stdlib-wide", "...")].tokens``.
    """
    best: dict[tuple[str, str], TraceText] = {}
    for path in files:
        pf = open_trace(path)
        try:
            cap = int(((trace_metadata(pf).get("config") or {}).get("decode") or {}).get("max_new_tokens") or 0)
            frame = pf.read(columns=["benchmark", "method", "prompt_id", "cycle", "node", "depth", "token",
                                     "accepted", "tau"]).to_pandas()
        finally:
            pf.close()
        if benchmark is not None:
            frame = frame[frame["benchmark"] == benchmark]
        # accepted rows in walk order: the root of cycle 0 (the prompt's last token), then per
        # cycle its accepted path, whose next cycle's root is the bonus token
        frame = frame[frame["accepted"]].sort_values(["benchmark", "method", "prompt_id", "cycle", "depth"], kind="stable")
        for (bench, _, pid), rows in frame.groupby(["benchmark", "method", "prompt_id"], sort=False):
            text = [int(t) for t in rows["token"].to_numpy()[1:]]
            emitted = int(rows["tau"].to_numpy()[rows["node"].to_numpy() == 0].sum())
            complete = bool(cap) and emitted < cap
            text = text[:emitted] if complete else text
            key = (str(bench), str(pid))
            if key not in best or len(text) > len(best[key].tokens):
                best[key] = TraceText(str(bench), str(pid), tuple(text), complete)
    return best
