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
  continuation and matches far more often, which a by-rank p_t cannot express, so the estimate
  stays conservative there), and under transition nodes, each by rank;
* ``unmatched``: p_s = 0 (a spine slot is dropped with its subtree), p_t under the root and
  under transition nodes, by rank;
* slot fill rates: the chance that a requested transition slot gets a candidate: under the root
  (and spine nodes) from unmatched cycles of methods that ask for root transitions there (goose),
  under transition nodes from the static topologies of the traces (``tr``, ``iso:K``,
  ``topology:FILE``: their requested shape is in the trace metadata). The
  fitted p_t's are multiplied by them, which is exact for "a slot without candidate is dropped
  with its subtree" when filling is independent of matching.

The result feeds :mod:`goose_theory.regime` (prediction and optimisation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .acceptance import Acceptance
from .fitcheck import curve_test, spine_availability
from .regimefill import root_fill, slot_fill
from .traceio import open_trace, trace_metadata

COLUMNS = ["benchmark", "method", "prompt_id", "cycle", "node", "parent", "source", "rank", "depth", "match",
           "reached", "spine_avail", "tau"]
SOURCES = ("root", "spine", "transition")
MAX_RANK = 10
MAX_SPINE = 20
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

    def to_dict(self) -> dict[str, Any]:
        return {"psi": self.psi, "psi_ci95": list(self.psi_ci95), "matched": self.matched.to_dict(),
                "unmatched": self.unmatched.to_dict(), "fill": dict(zip(SOURCES, self.fill)),
                "cycles": self.cycles, "prompts": self.prompts}


def read_frames(files: Sequence[str], *, benchmark: str | None = None) -> list[tuple[pd.DataFrame, dict]]:
    """(node rows, trace metadata) per file, optionally only one benchmark's rows."""
    out = []
    for path in files:
        pf = open_trace(path)
        missing = [c for c in COLUMNS if c not in pf.schema_arrow.names]
        if missing:
            raise ValueError(f"{path}: no {', '.join(missing)} column (recorded before it existed; re-record "
                             f"the traces for the two-regime fit)")
        frame = pf.read(columns=COLUMNS).to_pandas()
        if benchmark is not None:
            frame = frame[frame["benchmark"] == benchmark].reset_index(drop=True)
        if len(frame):
            out.append((frame, trace_metadata(pf)))
    return out


def _annotate(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds the row of each node's cycle root and parent, the regime and the parent's source."""
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
    return frame.assign(start=start, regime=np.where(np.isnan(avail), -1, (avail > 0).astype(int)),
                        avail=avail, parent_source=psrc, root_has_spine=has_spine[start], spine_sibling=sibling,
                        spine_sibling_hit=sibling_hit)


def _rates(nodes: pd.DataFrame, *, by: str, size: int) -> tuple[np.ndarray, np.ndarray]:
    k, n = np.zeros(size), np.zeros(size)
    if len(nodes):
        g = nodes.groupby(nodes[by].clip(upper=size - 1))["match"].agg(["sum", "count"])
        k[g.index.to_numpy()], n[g.index.to_numpy()] = g["sum"].to_numpy(), g["count"].to_numpy()
    return k, n


def _curve(k: np.ndarray, n: np.ndarray, *, start: int, fallback: float) -> list[float]:
    """Per-bin rates, the sparse tail (bins under 30 nodes) pooled into the last populated bin.

    Always the curve, even where a test would not reject a constant: the optimiser adds nodes
    where q is highest, and a constant over ranks (0.30 for every chain rank on mtbench's
    goose@8 trees, against 0.36 / 0.08 / 0.03 by rank) makes it stack low ranks it overrates."""
    if n[start:].sum() <= 0:
        return [fallback]
    return [min(max(x, 0.0), 1.0) for x in curve_test(k, n, start=start).curve]


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


def _rank_curve(sel: pd.DataFrame, ref: pd.DataFrame, *, min_n: int = 30) -> list[float]:
    """p by rank from ``sel`` where a rank has >= ``min_n`` reached nodes; past that, the shape of
    the ``ref`` curve (every method) scaled to ``sel``'s level at its last populated rank. Small
    trees rarely place ranks >= 1 below a transition, and repeating rank 0's rate there would
    overrate them."""
    ks, ns = _rates(sel, by="rank", size=MAX_RANK)
    kr, nr = _rates(ref, by="rank", size=MAX_RANK)
    if nr.sum() <= 0:
        return _curve(ks, ns, start=0, fallback=0.0)
    base = curve_test(kr, nr, start=0, min_n=min_n).curve
    shape = np.array([base[min(r, len(base) - 1)] for r in range(MAX_RANK)])
    good = np.flatnonzero(ns >= min_n)
    if good.size == 0:
        level = ks.sum() / ns.sum() if ns.sum() else 1.0
        expect = float(ns @ shape / ns.sum()) if ns.sum() else 1.0
        scale = level / expect if expect > 0 else 1.0
        return [float(min(max(x * scale, 0.0), 1.0)) for x in shape]
    last = int(good[-1])
    out = [float(ks[r] / ns[r]) if ns[r] > 0 else float(shape[r]) for r in range(last + 1)]
    scale = out[last] / shape[last] if shape[last] > 0 else 1.0
    out += [float(min(shape[r] * scale, 1.0)) for r in range(last + 1, MAX_RANK)]
    return out


def psi_estimate(roots: pd.DataFrame, *, n_boot: int = 500, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Matched share of tokens over cycles with a known regime, with a bootstrap interval over
    prompts (cycles of one prompt are correlated)."""
    known = roots[roots["regime"] >= 0]
    if known.empty:
        return float("nan"), (float("nan"), float("nan"))
    g = known.assign(mt=known["tau"] * known["regime"]).groupby(["benchmark", "prompt_id"])[["mt", "tau"]].sum()
    num, den = g["mt"].to_numpy(float), g["tau"].to_numpy(float)
    est = float(num.sum() / den.sum())
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, num.size, size=(n_boot, num.size))
    draws = num[picks].sum(1) / np.maximum(den[picks].sum(1), 1e-300)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return est, (float(lo), float(hi))


def method_budgets(frames: Sequence[tuple[pd.DataFrame, dict]]) -> dict[str, int]:
    """Configured budget of every tree method in the traces (label -> budget)."""
    out: dict[str, int] = {}
    for _, meta in frames:
        for m in (meta.get("config") or {}).get("methods", []):
            if m.get("budget") and m.get("name") not in ("ar", "pld"):
                out[m["label"]] = int(m["budget"])
    return out


def nearest_methods(frames: Sequence[tuple[pd.DataFrame, dict]], budget: int) -> tuple[str, ...]:
    """The tree methods whose budget is nearest to ``budget`` on a log scale (ties: all of them):
    a tree harvests the adjacency table it later drafts from, so transition acceptance and slot
    fill depend on the tree size."""
    budgets = method_budgets(frames)
    if not budgets:
        return ()
    dist = {k: abs(np.log(b / max(budget, 1))) for k, b in budgets.items()}
    best = min(dist.values())
    return tuple(sorted(k for k, d in dist.items() if d <= best + 1e-9))


def _select(frames, methods):
    if not methods:
        return list(frames)
    out = [(f[f["method"].isin(methods)].reset_index(drop=True), meta) for f, meta in frames]
    return [(f, meta) for f, meta in out if len(f)]


def fit_regimes(frames: Sequence[tuple[pd.DataFrame, dict]], *, methods: Sequence[str] = (), seed: int = 0) -> RegimeFit:
    """Per-regime acceptance with slot fill folded in (see the module docstring), from the
    cycles of ``methods`` (default: all; see :func:`nearest_methods`). psi uses every method
    with a matcher: it is a property of the text, not of the tree.

    Example: ``fit_regimes(read_frames(["traces/stdlib.parquet"]), methods=("goose@8",))``.
    """
    if not frames:
        raise ValueError("no trace rows to fit")
    everything = pd.concat([_annotate(f) for f, _ in frames], ignore_index=True)
    psi, psi_ci = psi_estimate(everything[everything["node"] == 0], seed=seed)
    frames = _select(frames, methods)
    if not frames:
        raise ValueError(f"the traces hold none of the methods {', '.join(methods)}")
    nodes = pd.concat([_annotate(f) for f, _ in frames], ignore_index=True)
    fill = slot_fill(frames)
    root = root_fill(nodes)
    if root is not None:
        # the root's fill in *unmatched* cycles, where goose always asks for root transitions:
        # static shapes (no matcher) also draft inside copied stretches, whose contexts the
        # table has seen, and overrate it (mtbench: 0.59 against 0.54 for goose@8, 0.49 for the
        # exported B = 7 tree)
        static = any(m.get("topology") and not str(m.get("label")).startswith("mixed")
                     for _, meta in frames for m in (meta.get("config") or {}).get("methods", [])
                     if m.get("label") in set(nodes["method"]))
        fill = (root, root, fill[2] if static else root)
    roots = nodes[nodes["node"] == 0]
    sel, ref = _slot_rows(nodes), _slot_rows(everything)
    ref["chain_m"] = pd.concat([ref["chain_m"], ref["chain_u"]])  # the rank shape of every chain
    for key in ("root_m", "spine_m"):  # rare (tens of nodes): level from every method, shape from
        if len(sel[key]) < MIN_ROWS:   # the plentiful root transitions of unmatched cycles
            sel[key] = ref[key]
        ref[key] = ref["root_u"]
    spine = sel["spine"]
    k, n = _rates(spine, by="depth", size=MAX_SPINE + 1)
    p_s = _curve(k, n, start=1, fallback=0.0)
    hist = np.bincount(roots.loc[roots["regime"] == 1, "avail"].to_numpy(dtype=np.int64), minlength=MAX_SPINE + 1)
    avail = spine_availability(hist, max_spine=MAX_SPINE) or (1.0,) * MAX_SPINE
    p_s_eff = [(p_s[min(d, len(p_s)) - 1]) * a for d, a in enumerate(avail, start=1)]

    def p_t(key: str, kind: int, miss: float = 1.0) -> list[float]:
        return [x * fill[kind] * miss for x in _rank_curve(sel[key], ref[key])]

    deeper = float(np.mean(p_s_eff[1:6])) if len(p_s_eff) > 1 else 0.0  # spine children of spine nodes
    matched = Acceptance.parse(p_s_eff, p_t("root_m", 0, 1.0 - p_s_eff[0]), "exclusive",
                               p_t_spine=p_t("spine_m", 1, 1.0 - deeper), p_t_chain=p_t("chain_m", 2))
    unmatched = Acceptance.parse(0.0, p_t("root_u", 0), "exclusive", p_t_chain=p_t("chain_u", 2))
    return RegimeFit(psi, psi_ci, matched, unmatched, fill, int(len(roots)),
                     int(roots.groupby(["benchmark", "prompt_id"]).ngroups))
