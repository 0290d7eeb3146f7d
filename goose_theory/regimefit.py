"""Acceptance by *regime*: cycles where the context matcher offered a spine, and cycles where it
offered nothing, fitted from trace files.

Why: a fixed topology's spine slots exist only when the matcher offers tokens (``spine_avail``),
and its transition slots only when the adjacency table has a candidate of that rank. Measured on
the shipped traces, the matcher offers nothing in 70-96% of cycles, and when it offers, it
offers a long continuation (>= 10 tokens in nearly every case), so the runtime alternates between
two regimes whose trees and acceptances differ. This module estimates, per regime:

* ``psi``: the share of *tokens* produced by matched cycles (matched cycles tau / all tau). It is
  nearly the same for every method on one prompt set (shipped traces: humaneval 0.32-0.36,
  mtbench 0.13-0.16, stdlib 0.67-0.73 over pld, goose, goose@16 and mixed-iso:3), whereas the
  share of *cycles* with a match depends on how fast a method eats through a matched stretch;
* ``matched``: p_s(d) given the node exists, times a(d), the chance the matcher offered a d-th
  token given it offered d - 1 (in matched cycles); p_t under the root and under spine nodes as
  (1 - p_s) times the rate beside a spine child that failed (so the exclusive model's sum over
  siblings stays <= 1; mid-spine only: at the end of a drafted spine a transition is the only
  continuation and matches far more often: the acceptance's by-rank p_t cannot express that, so
  it stays conservative there, while the fitted ``SpineModel.end`` rates carry it for pricing
  trees with :mod:`goose_theory.regimespare`), and under transition nodes, each by rank;
* ``unmatched``: p_s = 0 (a spine slot is dropped with its subtree), p_t under the root and
  under transition nodes, by rank;
* slot fill rates: the chance that a requested transition slot gets a candidate: under the root
  (and spine nodes) from unmatched cycles of methods that ask for root transitions there (goose),
  under transition nodes from the static topologies of the traces (``tr``, ``iso:K``,
  ``topology:FILE``: their requested shape is in the trace metadata). The
  fitted p_t's are multiplied by them, which is exact for "a slot without candidate is dropped
  with its subtree" when filling is independent of matching.

With ``split=True`` (:func:`fit_regimes`) matched cycles are cut in two as the paper's goose cuts
them: *confident* ones (several n-gram lengths agree and the match offers >= 8 tokens; goose's
``bypass``, a bare chain) and the others, whose spine fails far more often (p_s(1) 0.5-0.85
against 0.93). Only goose of budget >= 8 records the label, so the split is fitted from its
cycles; ``psi_confident`` is the confident share of all tokens.

The result feeds :mod:`goose_theory.regime` (prediction and optimisation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .acceptance import Acceptance
from .fitcheck import spine_availability
from .regimefill import confident_methods, fill_rates, psi_estimate
from .rankcurve import bin_curve as _curve, rank_curve, rates_by as _rates, tail_exponent
from .regimespare import MAX_RANK, SpineModel, end_rates
from .replayinput import spine_misses
from .topology import PAPER_MAX_SPINE, SOURCE_NAMES

MIN_ROWS = 30


@dataclass(frozen=True)
class RegimeFit:
    """Per-regime acceptance (slot fill folded in) and the matched share of tokens."""

    psi: float
    psi_ci95: tuple[float, float]
    matched: Acceptance
    unmatched: Acceptance
    fill: tuple[float, float, float]  # root, spine, transition parents
    cycles: int
    prompts: int
    confident: Acceptance | None = None  # split fit: confident cycles (then ``matched``: the others)
    psi_confident: float = 0.0           # their share of all tokens (included in ``psi``)
    spines: tuple[SpineModel | None, SpineModel | None] = (None, None)  # matched, confident: spare-slot pricing

    def to_dict(self) -> dict[str, Any]:
        out = {"psi": self.psi, "psi_ci95": list(self.psi_ci95), "matched": self.matched.to_dict(),
               "unmatched": self.unmatched.to_dict(), "fill": dict(zip(SOURCE_NAMES, self.fill)),
               "cycles": self.cycles, "prompts": self.prompts}
        if self.confident is not None:
            out.update(confident=self.confident.to_dict(), psi_confident=self.psi_confident)
        out["spines"] = [None if m is None else m.to_dict() for m in self.spines]
        return out


def reached_rows(frame: pd.DataFrame, prow: np.ndarray) -> np.ndarray:
    """The ``reached`` column; where null (not recorded on that row) the parent row's ``accepted``
    (``prow``: each row's parent row, -1 for a root), as :mod:`goose_theory.fitcounts` derives it,
    not a silent "not reached"."""
    reached = frame["reached"]
    if not reached.isna().any():
        return reached.to_numpy(dtype=bool)
    accepted = frame["accepted"].to_numpy(dtype=bool)
    derived = np.where(prow >= 0, accepted[np.maximum(prow, 0)], True)
    return np.where(reached.isna().to_numpy(), derived, reached.to_numpy(dtype=bool, na_value=False))


def _annotate(frame: pd.DataFrame, known: Sequence[str] = ()) -> pd.DataFrame:
    """Adds the row of each node's cycle root and parent, the regime, the parent's source and
    ``conf`` (1: a confident match, 0: another match, -1: unknown, i.e. no match or a method not
    in ``known``, those that record it)."""
    node = frame["node"].to_numpy()
    idx = np.arange(len(frame))
    start = np.maximum.accumulate(np.where(node == 0, idx, 0))
    parent = frame["parent"].to_numpy()
    prow = np.where(parent >= 0, start + np.maximum(parent, 0), -1)
    avail = frame["spine_avail"].to_numpy(dtype=float, na_value=np.nan)[start]
    src = frame["source"].to_numpy()
    psrc = np.where(prow >= 0, src[np.maximum(prow, 0)], "")
    has_spine = np.zeros(len(frame), dtype=bool)  # the node has a spine child in its cycle
    has_spine[prow[(src == "spine") & (prow >= 0)]] = True
    spine_hit = np.zeros(len(frame), dtype=bool)  # ... and that spine child matched
    hit = (src == "spine") & (prow >= 0) & frame["match"].to_numpy(dtype=bool)
    spine_hit[prow[hit]] = True
    sibling = np.where(prow >= 0, has_spine[np.maximum(prow, 0)], False)
    sibling_hit = np.where(prow >= 0, spine_hit[np.maximum(prow, 0)], False)
    regime = np.where(np.isnan(avail), -1, (avail > 0).astype(int))
    conf = np.full(len(frame), -1)
    if "bypass" in frame and len(known):
        bypass = frame["bypass"].to_numpy(dtype=float, na_value=np.nan)[start]
        ok = (regime == 1) & frame["method"].isin(list(known)).to_numpy() & ~np.isnan(bypass)
        conf[ok] = (bypass[ok] > 0).astype(int)
    return frame.assign(start=start, regime=regime, conf=conf, reached=reached_rows(frame, prow),
                        avail=avail, parent_source=psrc, root_has_spine=has_spine[start], spine_sibling=sibling,
                        spine_sibling_hit=sibling_hit)


def _annotate_all(frames: Sequence[tuple[pd.DataFrame, dict]], known: Sequence[str] = ()) -> pd.DataFrame:
    """:func:`_annotate` of every frame, concatenated, with ``start`` offset by the rows of the frames
    before it, so that it identifies a cycle across files: :func:`~goose_theory.regimefill.root_fill`
    counts distinct starts, and per-file starts collided (humaneval-b8 and mtbench-b8 as two files
    gave root fill 0.5597, the same rows in one file 0.5809)."""
    parts, offset = [], 0
    for frame, _ in frames:
        part = _annotate(frame, known)
        parts.append(part.assign(start=part["start"] + offset))
        offset += len(frame)
    return pd.concat(parts, ignore_index=True)


def _slot_rows(nodes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Reached nodes by slot kind: spine (matched cycles), transitions under the root (matched:
    only where the root has a spine child), under mid-spine nodes, and under transitions."""
    reached = nodes[nodes["reached"] & (nodes["node"] > 0)]
    m, u = reached[reached["regime"] == 1], reached[reached["regime"] == 0]
    tm, tu = m[m["source"] == "transition"], u[u["source"] == "transition"]
    chain_m = tm[tm["parent_source"] == "transition"]
    if chain_m.empty:  # chains below spine-hung branches are rare in small trees: all regimes
        chain_m = reached[(reached["source"] == "transition") & (reached["parent_source"] == "transition")]
    return {"spine": m[m["source"] == "spine"],
            # beside a spine child that *failed*: the exclusive model's q is then
            # (1 - p_s) times this rate, so a node's q's never sum above 1
            "root_m": tm[(tm["parent_source"] == "root") & tm["spine_sibling"] & ~tm["spine_sibling_hit"]],
            "spine_m": tm[(tm["parent_source"] == "spine") & tm["spine_sibling"] & ~tm["spine_sibling_hit"]],
            "chain_m": chain_m, "root_u": tu[tu["parent_source"] == "root"],
            "chain_u": tu[tu["parent_source"] == "transition"]}


def _select(frames, methods):
    if not methods:
        return list(frames)
    out = [(f[f["method"].isin(methods)].reset_index(drop=True), meta) for f, meta in frames]
    return [(f, meta) for f, meta in out if len(f)]


def _spine_model(nodes: pd.DataFrame, roots: pd.DataFrame, regime: int, end: tuple[float, ...]) -> SpineModel:
    """p_s(d) given the node exists and a(d) = P(offered >= d | >= d - 1), in ``regime``."""
    spine = nodes[nodes["reached"] & (nodes["node"] > 0) & (nodes["regime"] == regime) & (nodes["source"] == "spine")]
    p_s = _curve(*_rates(spine, by="depth", size=PAPER_MAX_SPINE + 1), start=1, fallback=0.0)
    # clipped as the plain fit clips it: a(d) for d <= the spine's limit reads only how many cycles offered
    # >= d, so the clip changes nothing, while np.bincount of a value past the recorded range (the
    # reader accepts any integer width) allocated memory growing with it (8 TiB at 2**40)
    avail = np.minimum(roots.loc[roots["regime"] == regime, "avail"].to_numpy(dtype=np.int64), PAPER_MAX_SPINE)
    hist = np.bincount(avail, minlength=PAPER_MAX_SPINE + 1)
    avail_rates = spine_availability(hist, max_spine=PAPER_MAX_SPINE) or (1.0,) * PAPER_MAX_SPINE
    return SpineModel(tuple(p_s), avail_rates, end)


def _matched_acceptance(p_s_eff: list[float], p_t) -> Acceptance:
    """A matched regime: transitions beside a spine child are the rates beside a failed one times
    the chance that it failed (the exclusive model's sum stays <= 1)."""
    root_miss, spine_miss = spine_misses(p_s_eff)  # the replay divides the same factors out
    return Acceptance.parse(p_s_eff, p_t("root_m", 0, root_miss), "exclusive",
                            p_t_spine=p_t("spine_m", 1, spine_miss), p_t_chain=p_t("chain_m", 2))


def _relabel(nodes: pd.DataFrame) -> pd.DataFrame:
    """Confident matched cycles become regime 2; matched cycles of unknown confidence are dropped."""
    nodes = nodes[(nodes["regime"] != 1) | (nodes["conf"] >= 0)]
    return nodes.assign(regime=np.where(nodes["conf"] == 1, 2, nodes["regime"]))


def _split(everything: pd.DataFrame, psi: float) -> tuple[pd.DataFrame, float] | None:
    """Every method's rows relabelled (:func:`_relabel`) and the confident share of all tokens,
    or None without both kinds of matched cycles."""
    roots = everything[(everything["node"] == 0) & (everything["conf"] >= 0)]
    if not (roots["conf"] == 1).any() or not (roots["conf"] == 0).any():
        return None
    kappa = float(roots.loc[roots["conf"] == 1, "tau"].sum() / roots["tau"].sum())  # among matched tokens
    return _relabel(everything), psi * kappa


def _slot_tables(nodes: pd.DataFrame, everything: pd.DataFrame) -> tuple[dict, dict]:
    """(selected, reference) transition rows per slot kind: the level of a rank curve comes from
    the selected methods, its shape from the reference (see :func:`goose_theory.rankcurve.rank_curve`)."""
    sel, ref = _slot_rows(nodes), _slot_rows(everything)
    ref["chain_m"] = pd.concat([ref["chain_m"], ref["chain_u"]])  # the rank shape of every chain
    for key in ("root_m", "spine_m"):  # rare (tens of nodes): level from every method, shape from
        if len(sel[key]) < MIN_ROWS:   # the plentiful root transitions of unmatched cycles
            sel[key] = ref[key]
        ref[key] = ref["root_u"]
    return sel, ref


def _psi(everything: pd.DataFrame, seed: int) -> tuple[float, tuple[float, float]]:
    """:func:`psi_estimate` over the roots of ``everything``, refused in one line naming the column
    it lacks where it is NaN (it surfaced as "need 0 <= psi_confident <= psi <= 1, got 0.0, nan")."""
    roots = everything[everything["node"] == 0]
    psi, psi_ci = psi_estimate(roots, seed=seed)
    if psi == psi:
        return psi, psi_ci
    known = roots[roots["regime"] >= 0]
    if len(known) and known["tau"].isna().all():  # the regime is known; the token sums were empty
        raise ValueError("column tau is null (not recorded) on every cycle whose regime is known: the two-regime "
                         "fit weighs the regimes by each cycle's tokens; re-record the traces with tau")
    raise ValueError("no cycle of these traces says whether the matcher offered a spine (spine_avail): the "
                     "two-regime fit needs traces of a method with a context matcher, such as goose")


def fit_regimes(frames: Sequence[tuple[pd.DataFrame, dict]], *, methods: Sequence[str] = (), seed: int = 0,
                split: bool = False) -> RegimeFit:
    """Per-regime acceptance with slot fill folded in (see the module docstring), from the
    cycles of ``methods`` (default: all; see :func:`nearest_methods`). psi uses every method
    with a matcher: it is a property of the text, not of the tree. ``split``: fit confident
    matched cycles apart (``confident``, ``psi_confident``; left None when the traces hold no
    goose of budget >= 8 with both kinds of matched cycles).

    Example: ``fit_regimes(read_frames(["traces/stdlib.parquet"]), methods=("goose@8",), split=True)``.
    """
    return _fit(_prepare(frames, methods, seed, confident_methods(frames) if split else ()), split)


def fit_regimes_both(frames: Sequence[tuple[pd.DataFrame, dict]], *, methods: Sequence[str] = (),
                     seed: int = 0) -> tuple[RegimeFit, RegimeFit]:
    """(plain, split) fits, equal to ``fit_regimes`` without and with ``split``, sharing the work
    the two have in common (the rows' annotation, psi, slot fill): the bootstrap of
    :mod:`goose_theory.regimeinterval` fits both on every draw. The plain fit reads no
    confidence label, so one annotation with the labels serves both (tests/test_regimefit.py)."""
    prepared = _prepare(frames, methods, seed, confident_methods(frames))
    return _fit(prepared, False), _fit(prepared, True)


def _prepare(frames, methods: Sequence[str], seed: int, known: Sequence[str]) -> tuple:
    """What a fit of either kind starts from: (every method's annotated rows, psi and its interval,
    the fitted methods' annotated rows, slot fill)."""
    if not frames:
        raise ValueError("no trace rows to fit")
    everything = _annotate_all(frames, known)
    psi, psi_ci = _psi(everything, seed)
    frames = _select(frames, methods)
    if not frames:
        raise ValueError(f"the traces hold none of the methods {', '.join(methods)}")
    nodes = _annotate_all(frames, known)
    return everything, psi, psi_ci, nodes, fill_rates(frames, nodes)


def _fit(prepared: tuple, split: bool) -> RegimeFit:
    everything, psi, psi_ci, nodes, fill = prepared
    all_roots = nodes[nodes["node"] == 0]
    cut = _split(everything, psi) if split else None
    # spine acceptance is a property of the text: a split fit pools every known method for it
    # (the rarer, non-confident matched cycles number only 9-13 per prompt set at budget 16)
    spine_rows = cut[0] if cut is not None else nodes
    if cut is not None:
        nodes = _relabel(nodes)
    spine_roots = spine_rows[spine_rows["node"] == 0]
    sel, ref = _slot_tables(nodes, everything)
    tail = tail_exponent(*_rates(ref["root_u"], by="rank", size=MAX_RANK))  # ranks past the traces' (rankcurve)

    def p_t(key: str, kind: int, miss: float = 1.0) -> list[float]:
        return [x * fill[kind] * miss for x in rank_curve(sel[key], ref[key], exponent=tail, size=MAX_RANK)]

    # end-of-spine transitions: few in the traces (6-40 nodes), shrunk toward the chain rates
    chain_prior = [x / fill[2] if fill[2] > 0 else 0.0 for x in p_t("chain_m", 2)]  # no filled slot: no rate
    end = tuple(x * fill[1] for x in end_rates(everything, chain_prior))
    spines = [_spine_model(spine_rows, spine_roots, r, end) for r in ((1, 2) if cut is not None else (1,))]
    matched = _matched_acceptance(spines[0].effective(), p_t)
    # confident cycles are verified as bare chains in the traces: their transitions take the
    # rates of the other matched cycles (beside a failed spine child), scaled by their own miss
    confident = _matched_acceptance(spines[1].effective(), p_t) if cut is not None else None
    unmatched = Acceptance.parse(0.0, p_t("root_u", 0), "exclusive", p_t_chain=p_t("chain_u", 2))
    return RegimeFit(psi, psi_ci, matched, unmatched, fill, int(len(all_roots)),
                     int(all_roots.groupby(["benchmark", "prompt_id"]).ngroups), confident,
                     cut[1] if cut is not None else 0.0, (spines[0], spines[1] if cut is not None else None))
