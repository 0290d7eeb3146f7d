"""A text cue for the trace replay's transitions: did the next token already follow the current
one earlier in the prompt + text?

Why: the adjacency table is harvested from the model's own top-k at every verified position, so a
transition is accepted far more often where the text repeats a bigram it has seen. On goose@8's
fit traces of ``stdlib-wide`` (200 prompts), an unmatched cycle's rank-0 root transition matched
in 60% of the cycles where that bigram had occurred before and in 16% where it had not; rank-0
chain transitions 53% against 30% (``bench/bench_replay.py --cue``). A replay that draws transitions at the pooled rate accepts them at the
wrong places, so it visits different positions, and therefore meets different matches, than the
real run (docs/two-regime.md section 11). The cue is known to the replay (it holds the text), so
the replay scales each slot kind's rates by ``multiplier[kind][cue][rank]``, fitted from the same
traces per transition child (so trees of different widths pool fairly).

Slot kinds (where the walk stands when it looks at transitions): ``root_u`` (the root of an
unmatched cycle), ``root_m`` / ``spine_m`` (the root / a spine node whose spine child failed),
``end`` (a spine node without a spine child), ``chain`` (a transition).

Example:
    >>> bigram_seen([5, 6, 7, 5, 6, 8]).tolist()
    [False, False, False, False, True, False]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from goose_theory.regimefit import reached_rows

KINDS = ("root_u", "root_m", "spine_m", "end", "chain")
PRIOR_N = 30  # pseudo-parents at the kind's pooled rate: 'end' and 'spine_m' parents are few
COLUMNS = ["benchmark", "method", "prompt_id", "cycle", "node", "parent", "depth", "source", "rank", "match", "reached",
           "accepted", "tau", "spine_avail"]  # accepted: where reached was not recorded


def bigram_seen(tokens: Sequence[int]) -> np.ndarray:
    """``out[i]``: ``tokens[i]`` followed ``tokens[i - 1]`` somewhere before position i."""
    seen: dict[int, set[int]] = {}
    out = np.zeros(len(tokens), dtype=bool)
    for i in range(1, len(tokens)):
        followers = seen.setdefault(int(tokens[i - 1]), set())
        out[i] = int(tokens[i]) in followers
        followers.add(int(tokens[i]))
    return out


def slot_kind(is_transition: bool, is_root: bool, unmatched: bool, has_spine_child: bool) -> str:
    if is_transition:
        return "chain"
    if is_root:
        return "root_u" if unmatched else "root_m"
    return "spine_m" if has_spine_child else "end"


RANK_BINS = 3  # ranks 0, 1 and >= 2: the cue moves the top candidate most


def child_outcomes(frame: pd.DataFrame, cues: dict[tuple[str, str], tuple[np.ndarray, int]]) -> pd.DataFrame:
    """One row per transition child of a reached node whose spine child (if any) was not taken, in
    cycles of methods with a matcher (whose regime is known, as for the fitted rates of
    :mod:`goose_theory.regimefit`), from trace rows (each method's cycles in recorded order): the parent's slot kind, the cue at
    the position the child predicts, the child's rank bin and whether it matched. ``cues``:
    (benchmark, prompt) -> (cue over prompt + text, prompt length)."""
    out = []
    for (bench, _, pid), g in frame.groupby(["benchmark", "method", "prompt_id"], sort=False):
        cue, base = cues.get((str(bench), str(pid)), (None, 0))
        if cue is None:
            continue
        node, parent, src = g["node"].to_numpy(), g["parent"].to_numpy(), g["source"].to_numpy()
        match, depth = g["match"].to_numpy(bool), g["depth"].to_numpy()
        tau = np.where(node == 0, g["tau"].to_numpy(), 0)
        start = np.maximum.accumulate(np.where(node == 0, np.arange(len(node)), 0))
        reached = reached_rows(g, np.where(parent >= 0, start + np.maximum(parent, 0), -1))  # null: derived
        before = (np.cumsum(tau) - tau)[start]  # tokens emitted before each row's cycle
        avail = g["spine_avail"].to_numpy(dtype=float, na_value=np.nan)[start]
        unmatched = avail == 0
        prow = np.where(parent >= 0, start + np.maximum(parent, 0), 0)
        spine_kid = (src == "spine") & (parent >= 0)
        has_spine, taken = np.zeros(len(node), bool), np.zeros(len(node), bool)
        has_spine[prow[spine_kid]] = True
        taken[prow[spine_kid & match]] = True
        t = np.flatnonzero((src == "transition") & (parent >= 0))
        p = prow[t]
        keep = reached[p] & ~taken[p] & ~np.isnan(avail[p])  # a regime, as the fitted rates have: a matcher
        t, p = t[keep], p[keep]
        pos = base + before[p] + depth[p]
        out.append(pd.DataFrame({
            "kind": [slot_kind(src[q] == "transition", node[q] == 0, unmatched[q], has_spine[q]) for q in p],
            "cue": np.where(pos < len(cue), cue[np.minimum(pos, len(cue) - 1)], False),
            "rank": np.minimum(g["rank"].to_numpy()[t], RANK_BINS - 1), "hit": match[t]}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["kind", "cue", "rank", "hit"])


def cue_multipliers(outcomes: pd.DataFrame, *, prior_n: int = PRIOR_N) -> dict[str, dict[bool, tuple[float, ...]]]:
    """``m[kind][cue][rank bin]`` = P(a transition child matches | kind, cue, rank) / P(... |
    kind, rank), each rate shrunk toward its pooled rate with ``prior_n`` pseudo-children; 1.0
    where a kind and rank were never seen.

    Example:
        >>> d = pd.DataFrame({"kind": "chain", "rank": 0, "cue": [True, True, False, False], "hit": [1, 1, 0, 1]})
        >>> {c: round(m[0], 3) for c, m in cue_multipliers(d, prior_n=0)["chain"].items()}
        {False: 0.667, True: 1.333}
    """
    out = {}
    for kind in KINDS:
        table: dict[bool, list[float]] = {False: [], True: []}
        for rank in range(RANK_BINS):
            sel = outcomes[(outcomes["kind"] == kind) & (outcomes["rank"] == rank)]
            pooled = float(sel["hit"].mean()) if len(sel) else 0.0
            for cue in (False, True):
                part = sel[sel["cue"] == cue]["hit"]
                rate = (float(part.sum()) + prior_n * pooled) / (len(part) + prior_n) if len(part) + prior_n else pooled
                table[cue].append(rate / pooled if pooled > 0 else 1.0)
        out[kind] = {cue: tuple(v) for cue, v in table.items()}
    return out
