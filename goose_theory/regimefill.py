"""Slot fill: how often the runtime finds a candidate for a requested transition slot.

A slot without a candidate (the adjacency table has no entry of that rank for its context) is
dropped with its subtree, so the fitted p_t's of :mod:`goose_theory.regimefit` are multiplied by
these rates.

* :func:`slot_fill`: requested against filled transition slots by parent source, over the
  static-topology methods of the traces (their requested shape is in the trace metadata);
* :func:`root_fill`: the root's rate in unmatched cycles of methods that always ask for root
  transitions there (goose).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .topology import Topology, topology_from_dict


def slot_fill(frames: Sequence[tuple[pd.DataFrame, dict]]) -> tuple[float, float, float]:
    """Share of requested transition slots that the runtime filled, by parent source, over the
    static-topology methods of the traces (see the module docstring); 1.0 where unmeasured."""
    req, got = np.zeros(3), np.zeros(3)
    for frame, meta in frames:
        methods = {m.get("label"): m.get("topology") for m in (meta.get("config") or {}).get("methods", [])}
        for label, part in frame.groupby("method", sort=False):
            topo = methods.get(label)
            if not topo or str(label).startswith("mixed"):
                continue
            r, g = _fill_counts(part, topology_from_dict(topo))
            req += r; got += g
    rates = [float(g / r) if r > 0 else float("nan") for r, g in zip(req, got)]
    root = rates[0] if rates[0] == rates[0] else 1.0
    # spine parents are rare in static topologies: their context was seen before (the spine is
    # copied text), so the root's rate is a conservative stand-in until measured
    return tuple(x if x == x else root for x in rates)  # type: ignore[return-value]


def _fill_counts(part: pd.DataFrame, topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Map each realised node to its topology slot (by its rank among the slot's children) and
    count requested against filled transition children by parent source."""
    start, order = topo.children
    kids_of = {v: {int(topo.rank[c]): int(c) for c in order[start[v]:start[v + 1]] if topo.source[c] == 2}
               for v in range(len(topo.parent))}
    spine_of = {v: int(c) for v in range(len(topo.parent)) for c in order[start[v]:start[v + 1]] if topo.source[c] == 1}
    par, rank, src = part["parent"].to_numpy(), part["rank"].to_numpy(), part["source"].to_numpy()
    req, got = np.zeros(3), np.zeros(3)
    slot = np.zeros(len(part), dtype=np.int64)
    filled: dict[int, int] = {}
    base = 0
    for i in range(len(part)):
        if par[i] < 0:
            base = i
            continue
        p = base + int(par[i])
        v = slot[p]
        c = spine_of.get(v) if src[i] == "spine" else kids_of[v].get(int(rank[i]))
        slot[i] = -1 if c is None else c
        if src[i] == "transition":
            filled[p] = filled.get(p, 0) + 1
    kind = {"root": 0, "spine": 1, "transition": 2}
    for i in range(len(part)):
        if slot[i] < 0:
            continue
        n_req = len(kids_of[int(slot[i])])
        req[kind[src[i]]] += n_req
        got[kind[src[i]]] += min(filled.get(i, 0), n_req)
    return req, got


def root_fill(nodes: pd.DataFrame) -> float | None:
    """P(the root got a transition child | unmatched cycle) over methods that place root
    transitions (goose asks for them in every unmatched cycle with a budget)."""
    u = nodes[(nodes["regime"] == 0)]
    with_root = u[(u["parent_source"] == "root") & (u["source"] == "transition")].groupby("method")["start"].unique()
    rates = []
    for method, starts in with_root.items():
        cycles = u[(u["method"] == method) & (u["node"] == 0)]
        rates.append((len(starts), len(cycles)))
    got, total = sum(r[0] for r in rates), sum(r[1] for r in rates)
    return got / total if total else None
