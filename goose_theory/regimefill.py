"""Slot fill: how often the runtime finds a candidate for a requested transition slot; which
trace methods :mod:`goose_theory.regimefit` fits from; and the matched share of tokens psi
(:func:`psi_estimate`).

A slot without a candidate (the adjacency table has no entry of that rank for its context) is
dropped with its subtree, so the fitted p_t's of :mod:`goose_theory.regimefit` are multiplied by
these rates.

* :func:`slot_fill`: requested against filled transition slots by parent source, over the
  static-topology methods of the traces (their requested shape is in the trace metadata);
* :func:`root_fill`: the root's rate in unmatched cycles of methods that always ask for root
  transitions there (goose);
* :func:`filled_tau`: E[tau] of a tree with spare slots as the runtime fills it: slots drop out
  (independently, at the fill rates), and the first ``budget`` remaining ones in fill order
  (:func:`first_nodes`) are verified.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd

from ._fill_kernels import _fill_order
from .acceptance import Acceptance
from .allocation import PAPER_BYPASS_LEN
from .topology import SOURCE_NAMES, SPINE, Topology, topology_from_dict
from .validation import cluster_ratio_ci
from .yields import yield_with_fallback

BYPASS_LEN = PAPER_BYPASS_LEN  # goose's consensus bypass threshold (the runtime's GoosePolicy default too)
PRIOR_SUFFIX = "+prior"  # the runtime's method suffix (goose+prior drafts as goose, with a fuller table)


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
            topo = topology_from_dict(topo)
            if topo.meta.get("regimes"):  # a regime file drafts other trees by regime: no one slot map
                continue
            r, g = _fill_counts(part, topo)
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
        v = slot[p]  # -1: the parent is in no slot (a tree off its recorded topology), nor then is the node
        c = None if v < 0 else spine_of.get(v) if src[i] == "spine" else kids_of[v].get(int(rank[i]))
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
    transitions (goose asks for them in every unmatched cycle with a budget). A cycle is its
    ``start`` (root row), which must be unique across ``nodes``: ``regimefit._annotate_all``
    offsets each file's."""
    u = nodes[(nodes["regime"] == 0)]
    with_root = u[(u["parent_source"] == "root") & (u["source"] == "transition")].groupby("method")["start"].unique()
    rates = []
    for method, starts in with_root.items():
        cycles = u[(u["method"] == method) & (u["node"] == 0)]
        rates.append((len(starts), len(cycles)))
    got, total = sum(r[0] for r in rates), sum(r[1] for r in rates)
    return got / total if total else None


def bfs_order(parent: Sequence[int], kind: Sequence[int], rank: Sequence[int]) -> np.ndarray:
    """Non-root nodes in the runtime's fill order: breadth-first, children spine first then by rank
    (ties in index order; the pricing kernels' own fill order, on plain sequences).

    Example:
        >>> bfs_order([-1, 0, 0, 1], [0, 2, 1, 2], [0, 0, 0, 0]).tolist()
        [2, 1, 3]
    """
    return _fill_order(*(np.asarray(a, dtype=np.int64) for a in (parent, kind, rank)))


def first_nodes(topology: Topology, budget: int) -> Topology:
    """The first ``budget`` nodes in the runtime's fill order (breadth-first from the root, each
    node's children in priority order): what a file's tree becomes when every slot is filled.

    Example:
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (1, "transition", 0), (0, "transition", 1)])
        >>> first_nodes(t, 2).rank
        (0, 0, 1)
    """
    kept, nodes = {0: 0}, [(-1, "root", 0)]
    for c in bfs_order(topology.parent, topology.source, topology.rank)[:budget].tolist():
        kept[c] = len(nodes)  # breadth-first: a node's parent is always kept before it
        nodes.append((kept[topology.parent[c]], SOURCE_NAMES[topology.source[c]], int(topology.rank[c])))
    return Topology.from_nodes(nodes, max_depth=topology.max_depth, max_spine=topology.max_spine)


def filled_tau(topology: Topology, acceptance: Acceptance, fill: Sequence[float], budget: int, *,
               samples: int = 64, seed: int = 0) -> float:
    """Monte Carlo E[tau] of ``topology`` as the runtime builds it at ``budget``: each transition
    slot exists with probability ``fill[parent source]`` (else it goes with its subtree), and the
    first ``budget`` existing slots in fill order are verified. ``acceptance`` has the fill folded
    in (as :func:`~goose_theory.regimefit.fit_regimes` returns it); it is divided out here. Under
    an acceptance with p_s(1) = 0 (the unmatched regime: the matcher offered nothing) spine slots
    go with their subtrees, as in :func:`goose_theory.regime.regime_tau`; they had taken budget
    places first at q = 0 (regime audit, 7 Dec: 1.0 for 1.2 on the test's tree).

    Example:
        >>> from goose_theory.acceptance import Acceptance
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1)])
        >>> round(filled_tau(t, Acceptance.parse(0.0, [0.2, 0.1]), (1.0, 1.0, 1.0), 2), 6)
        1.3
    """
    def unfold(values, f):
        return None if values is None else tuple(min(x / f, 1.0) if f > 0 else 0.0 for x in values)
    acc = replace(acceptance, p_t=unfold(acceptance.p_t, fill[0]), p_t_spine=unfold(acceptance.p_t_spine, fill[1]),
                  p_t_chain=unfold(acceptance.p_t_chain, fill[2]))
    rng = np.random.default_rng(seed)
    has_spine = acceptance.spine_q(1) > 0
    total = 0.0
    for _ in range(samples):
        keep, new, nodes = [True], {0: 0}, [(-1, "root", 0)]
        for v in range(1, len(topology.parent)):
            p = topology.parent[v]
            # a spine slot exists when the regime has a spine, a transition slot when a candidate fills it
            ok = keep[p] and (has_spine if topology.source[v] == SPINE else rng.random() < fill[topology.source[p]])
            keep.append(ok)
            if ok:
                new[v] = len(nodes)
                nodes.append((new[p], SOURCE_NAMES[topology.source[v]], int(topology.rank[v])))
        sub = Topology.from_nodes(nodes, max_depth=topology.max_depth, max_spine=topology.max_spine)
        total += yield_with_fallback(first_nodes(sub, budget), acc)[0].expected_tau
    return total / samples


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


def budget_gap_note(fit_budgets: Sequence[int], budget: int, *, ratio: float = 1.5) -> str | None:
    """A one-line caution when every trace method a regime fit used ran at a budget more than
    ``ratio`` times away from the exported one, else None. The table harvested by small trees is
    poorer: on the same 82 HumanEval problems goose@8 accepted a root rank-0 candidate 0.172 times
    per unmatched cycle, goose@15 0.190, and a fit at 8 predicted its export at 15 4.4% low, one at
    15 1.5% high (docs/two-regime.md, section 14).

    Example:
        >>> budget_gap_note([8, 8], 15)
        'fitted on traces at budget 8, exported at 15: transition rates from smaller trees run low; record traces near 15 for a closer prediction'
        >>> budget_gap_note([16], 15) is None
        True
    """
    if not fit_budgets or min(max(b / budget, budget / b) for b in fit_budgets) <= ratio:
        return None
    near = min(fit_budgets, key=lambda b: abs(b - budget))
    side = "smaller" if near < budget else "larger"
    level = "low" if near < budget else "high"
    return (f"fitted on traces at budget {near}, exported at {budget}: transition rates from {side} trees run "
            f"{level}; record traces near {budget} for a closer prediction")


def prior_mismatch_note(methods: Sequence[str], prior: bool) -> str | None:
    """A one-line caution when trace methods a regime fit used were recorded with the successor
    prior (labels such as ``goose+prior@15``) and the validation drafts without it, or the other
    way round, else None: the prior fills transition slots that a table alone leaves empty, so
    the fitted rates would not be the validated ones.

    Example:
        >>> prior_mismatch_note(["goose@15", "iso:2@15"], True)
        'fitted on traces recorded without the prior (goose@15, iso:2@15), validated with it: record the fit traces with +prior'
        >>> prior_mismatch_note(["goose+prior@15"], True) is None
        True
    """
    odd = [m for m in methods if _label_name(m).endswith(PRIOR_SUFFIX) != prior]
    if not odd:
        return None
    recorded, fix = ("without", "record the fit traces with +prior") if prior else ("with", "validate with --prior")
    return f"fitted on traces recorded {recorded} the prior ({', '.join(odd)}), validated {'with' if prior else 'without'} it: {fix}"


def _label_name(label: str) -> str:
    """The method name of a trace label ``NAME`` or ``NAME@B`` (the runtime's ``method_label``; an
    ``@`` inside a topology file's name is not a budget)."""
    name, at, tail = label.rpartition("@")
    return name if at and tail.isdigit() else label


def confident_methods(frames: Sequence[tuple[pd.DataFrame, dict]]) -> tuple[str, ...]:
    """Labels of the trace methods that record which matched cycles were confident: goose with a
    budget of at least ``BYPASS_LEN`` (its ``bypass``; a smaller goose never bypasses)."""
    return tuple(sorted({m["label"] for _, meta in frames for m in (meta.get("config") or {}).get("methods", [])
                         if str(m.get("name")).removesuffix(PRIOR_SUFFIX) == "goose"
                         and int(m.get("budget") or 0) >= BYPASS_LEN}))


def psi_estimate(roots: pd.DataFrame, *, n_boot: int = 500, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Matched share of tokens over cycles with a known regime, with a bootstrap interval over
    prompts (cycles of one prompt are correlated): sum of matched tau over sum of tau, per
    (benchmark, prompt) cluster, through :func:`~goose_theory.validation.cluster_ratio_ci`.

    With a single prompt there is no spread between prompts to resample, and the regime file
    (strict JSON) cannot hold NaN bounds, so the interval is the whole range a share can take,
    (0, 1). With no cycle of known regime, everything is NaN.

    Example:
        >>> roots = pd.DataFrame({"benchmark": "b", "prompt_id": [0, 0, 1], "regime": [1, 0, 1], "tau": [3, 1, 2]})
        >>> est, (lo, hi) = psi_estimate(roots, n_boot=100)
        >>> round(est, 4), lo <= est <= hi
        (0.8333, True)
    """
    known = roots[roots["regime"] >= 0]
    if known.empty:
        return float("nan"), (float("nan"), float("nan"))
    g = known.assign(mt=known["tau"] * known["regime"]).groupby(["benchmark", "prompt_id"])[["mt", "tau"]].sum()
    est, lo, hi = cluster_ratio_ci(g["mt"].to_numpy(float), g["tau"].to_numpy(float), n_boot=n_boot, seed=seed)
    if len(g) == 1 and est == est:
        return est, (0.0, 1.0)
    return est, (lo, hi)


def fill_rates(frames: Sequence[tuple[pd.DataFrame, dict]], nodes: pd.DataFrame) -> tuple[float, float, float]:
    """Slot fill (root, spine, chain) for the regime fit: :func:`slot_fill`, with the root's (and the
    spine nodes') taken from *unmatched* cycles where the traces show them (:func:`root_fill`);
    ``nodes``: the annotated rows of ``frames`` (``regimefit._annotate``)."""
    fill = slot_fill(frames)
    root = root_fill(nodes)
    if root is None:
        return fill
    # goose always asks for root transitions in unmatched cycles; static shapes (no matcher) also
    # draft inside copied stretches, whose contexts the table has seen, and overrate the fill
    # (mtbench: 0.59 against 0.54 for goose@8, 0.49 for the exported B = 7 tree)
    fitted = set(nodes["method"])  # once: inside the generator it was built for every method entry
    static = any(m.get("topology") and not str(m.get("label")).startswith("mixed")
                 for _, meta in frames for m in (meta.get("config") or {}).get("methods", [])
                 if m.get("label") in fitted)
    return (root, root, fill[2] if static else root)
