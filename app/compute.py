"""The explorer's computations: plain arguments in, plain data (dicts, DataFrames) out.

No Streamlit here: the page wraps these with ``st.cache_data``, so every function depends only
on its arguments (hashable scalars, tuples, bytes). Bad input raises the library's own one-line
errors (subclasses of :class:`goose_theory.errors.InputError`); the page shows them with ``st.error``.

Transition acceptance may depend on the parent (``p_t`` under the root, ``p_t_spine`` under a
spine node, ``p_t_chain`` under a transition node; ``None`` means "as p_t"), as in
:class:`goose_theory.acceptance.Acceptance`.

Example:
    >>> r = whatif(0.6, 0.05, "exclusive", "optimal", budget=20, cycles=20_000)
    >>> bool(r["exact"] >= r["lower_bound"]), r["topology"]["budget"]
    (True, 20)
    >>> by_parent = whatif(0.6, 0.05, "exclusive", "optimal", budget=20, cycles=20_000,
    ...                    p_t_spine=0.2, p_t_chain=0.5)
    >>> round(r["exact"], 4), round(by_parent["exact"], 4)   # branches on the spine pay more
    (3.01, 3.3574)
"""
from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np
import pandas as pd

from goose_theory.acceptance import Acceptance
from goose_theory.bound import paper_lower_bound
from goose_theory.choices import (ChoicesError, choices_from_topology, choices_text, portability_notes,
                                  topology_from_choices)
from goose_theory.jsonio import loads_json
from goose_theory.optimize import build_topology
from goose_theory.simulate import simulate
from goose_theory.topology import (PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, SOURCE_NAMES, Topology,
                                   TopologyError, topology_from_dict)
from goose_theory.yields import exact_yield

MC_CYCLES = 200_000  # ~5 ms for a B=60 tree once numba is warm: fits the 300 ms answer budget
ALLOCATIONS = ("optimal", "linear", "harmonic")
REGIME_NAMES = {"matched_by_length": "matched (one per match length)"}  # a regime file's trees, in words


def acceptance(p_s: float, p_t: float, model: str, p_t_spine: float | None = None,
               p_t_chain: float | None = None) -> Acceptance:
    """The page's acceptance: scalar p_s and p_t, optionally p_t by parent (AcceptanceError if bad)."""
    return Acceptance.parse(p_s, p_t, model, p_t_spine=p_t_spine, p_t_chain=p_t_chain)


@functools.lru_cache(maxsize=256)
def _build(rule: str, acc: Acceptance, budget: int, max_depth: int, max_spine: int, top_k: int):
    """One rule's tree, shared by this module's views: a slider move asks for the same trees
    several times (the What-if tree, the curves' optimal at the full spine, the width profiles'
    three rules, which the curves' linear and harmonic searches also build). Results are
    frozen; callers copy ``details`` before changing it."""
    return build_topology(rule, acc, budget=budget, max_depth=max_depth, max_spine=max_spine, top_k=top_k)


def parse_topology_json(data: bytes) -> dict[str, Any]:
    """Validate an uploaded ``goose-topology/1`` file, or a tree choices list (``[[0], [1], [0, 0]]``,
    JSON); returns the topology's dict (TopologyError or ChoicesError if bad)."""
    if not data:
        raise TopologyError("the topology file is empty")
    try:
        obj = loads_json(data.decode("utf-8-sig"))  # a leading BOM (Windows editors) is dropped, as the CLI does
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TopologyError(f"not a JSON file ({exc})") from None
    if isinstance(obj, list):  # Medusa's, EAGLE's, vLLM's rank paths
        return topology_from_choices(obj, meta={"rule": "tree-choices"}).to_dict()
    return topology_from_dict(obj).to_dict()


def _number(value: Any) -> bool:
    """A finite JSON number (not a bool, not null, not a string, not an integer too large for a
    float such as 10**400, not inf or NaN); a hand-edited file may hold anything."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond a float's range: the sentences format it as one
        return False


def _interval_words(ci: Any) -> str:
    """A file's ``predicted_ci95`` in words ('' without one).

    Example:
        >>> _interval_words([1.934, 2.6])
        " (95% interval 1.93-2.60, the fit's prompts resampled)"
    """
    ok = isinstance(ci, list) and len(ci) == 2 and all(_number(x) for x in ci)
    return f" (95% interval {ci[0]:.2f}-{ci[1]:.2f}, the fit's prompts resampled)" if ok else ""


def _regimes_sentence(pred: dict[str, Any], ci: Any = None) -> str | None:
    """The per-regime parts of a regime file's prediction in words (``ci``: its interval, if any); None
    if they are not numbers. ``psi`` is the share of tokens from matched cycles, confident ones
    (``psi_confident``) included."""
    keys = ("tau", "psi", "tau_matched", "tau_unmatched", *(("psi_confident", "tau_confident")
                                                           if "tau_confident" in pred else ()))
    if not all(_number(pred.get(k)) for k in keys):
        return None
    parts = []
    if "tau_confident" in pred:
        parts.append(f"confident matches {pred['tau_confident']:.2f} on a share {pred['psi_confident']:.2f} of the tokens")
    other = pred["psi"] - pred.get("psi_confident", 0.0)
    parts += [f"other matched cycles {pred['tau_matched']:.2f} on {other:.2f}",
              f"unmatched cycles {pred['tau_unmatched']:.2f} on {1 - pred['psi']:.2f}"]
    return f"it predicts tau {pred['tau']:.3f}{_interval_words(ci)}: " + ", ".join(parts) + ", mixed harmonically"


def uploaded_note(topology: dict[str, Any]) -> str | None:
    """What an uploaded file predicts for itself, beside the page's what-if (which scores the file's
    own tree under the sidebar's acceptance): a regime file's harmonic mix of its per-regime trees
    (or of its one tree's yield in each regime), or an export's prediction under the acceptance
    fitted from its traces. None for a bare tree (or a file whose prediction fields are not
    numbers).

    Example:
        >>> uploaded_note({"predicted_tau": 2.5, "acceptance": {"p_s": 0.9}, "rule": "optimal"})[:40]
        'Exported with predicted tau 2.500 (rule '
    """
    pred = topology.get("regime_prediction")
    sentence = _regimes_sentence(pred, topology.get("predicted_ci95")) if isinstance(pred, dict) else None
    if topology.get("regimes") and sentence:
        names = " / ".join(REGIME_NAMES.get(k, k) for k in topology["regimes"])
        return (f"A regime file (rule {topology.get('rule', '?')}): the runtime (topology:FILE) drafts its {names} "
                f"trees by what the context matcher offers each cycle. Under the acceptance fitted from its traces "
                f"{sentence}. The figures below score only the file's own tree, under the sidebar's acceptance.")
    if sentence:  # one tree for both regimes (rule regime-optimal): its tau is the mix, not one acceptance's
        return (f"A single-tree regime export (rule {topology.get('rule', '?')}): the runtime drafts this one tree "
                f"every cycle, matched or not. Under the acceptance fitted from its traces {sentence}. The figures "
                f"below score the tree under the sidebar's acceptance.")
    tau = topology.get("predicted_tau")
    if _number(tau) and topology.get("acceptance"):
        # only a fit export (provenance) has fitted rates; goose optimize and this page store the ones given
        whose = "fitted from its traces" if topology.get("provenance") else "it was optimised for (its 'acceptance')"
        return (f"Exported with predicted tau {tau:.3f}{_interval_words(topology.get('predicted_ci95'))} (rule "
                f"{topology.get('rule', '?')}) under the acceptance "
                f"{whose}; the figures below use the sidebar's acceptance.")
    return None


def whatif(p_s: float, p_t: float, model: str, rule: str, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
           max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K, cycles: int = MC_CYCLES, seed: int = 0,
           topology_json: str | None = None, p_t_spine: float | None = None,
           p_t_chain: float | None = None) -> dict[str, Any]:
    """One rule's tree (or the uploaded one, given as ``topology_json``) scored three ways:
    exact E[tau] and pmf, the paper's lower bound, and a Monte Carlo run."""
    acc = acceptance(p_s, p_t, model, p_t_spine, p_t_chain)
    if topology_json is not None:
        topo = topology_from_dict(json.loads(topology_json))
        details: dict[str, Any] = {"truncated": []}
    else:
        res = _build(rule, acc, budget, max_depth, max_spine, top_k)
        topo, details = res.topology, dict(res.details)
    exact = exact_yield(topo, acc)  # raises ExclusiveModelError for an infeasible given tree
    bound = paper_lower_bound(topo, acc)
    sim = simulate(topo, acc, cycles=cycles, seed=seed)
    n = max(len(exact.pmf), len(sim.histogram))
    taus = np.arange(n)
    pmf = pd.concat([
        pd.DataFrame({"tau": taus, "probability": np.pad(exact.pmf, (0, n - len(exact.pmf))), "kind": "exact"}),
        pd.DataFrame({"tau": taus, "probability": np.pad(sim.histogram, (0, n - len(sim.histogram))) / sim.cycles,
                      "kind": "simulated"})])
    pmf = pmf[pmf["tau"] >= 1].reset_index(drop=True)
    return {"topology": topo.to_dict(), "exact": exact.expected_tau, "std": exact.std,
            "lower_bound": bound.lower_bound, "lbar": bound.lbar, "mc_mean": sim.mean,
            "mc_ci95": tuple(sim.ci95), "mc_cycles": sim.cycles, "pmf": pmf,
            "reach": exact.reach.tolist(), "spine_length": topo.spine_length,
            "notes": list(details.get("truncated", [])), "unplaced": int(details.get("unplaced", 0))}


def optimal_tau(p_s: float, p_t: float, model: str, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K, p_t_spine: float | None = None,
                p_t_chain: float | None = None) -> float:
    """E[tau] of the optimal tree of ``budget`` nodes within the page's limits: the yardstick an
    uploaded tree (a Medusa tree, say) is held against."""
    acc = acceptance(p_s, p_t, model, p_t_spine, p_t_chain)
    return float(_build("optimal", acc, budget, max_depth, max_spine, top_k).predicted_tau)


def spine_curves(p_s: float, p_t: float, model: str, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                 max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K, p_t_spine: float | None = None,
                 p_t_chain: float | None = None) -> pd.DataFrame:
    """E[tau] against spine length m: linear and harmonic from their m-search curves; optimal as
    the best tree whose spine is at most m long (``optimal (spine <= m)``), m = 0..max_spine."""
    acc = acceptance(p_s, p_t, model, p_t_spine, p_t_chain)
    rows = []
    for rule in ("linear", "harmonic"):
        curve = _build(rule, acc, budget, max_depth, max_spine, top_k).details.get("curve", [])
        rows += [{"m": int(m), "rule": rule, "expected_tau": float(t)} for m, t in curve]
    for m in range(0, min(budget, max_spine) + 1):
        res = _build("optimal", acc, budget, max_depth, m, top_k)
        rows.append({"m": m, "rule": "optimal (spine <= m)", "expected_tau": res.predicted_tau})
    return pd.DataFrame(rows, columns=["m", "rule", "expected_tau"])


def width_profiles(p_s: float, p_t: float, model: str, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                   max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K, p_t_spine: float | None = None,
                   p_t_chain: float | None = None) -> pd.DataFrame:
    """First-level branch widths w_i along the spine for optimal, linear and harmonic."""
    acc = acceptance(p_s, p_t, model, p_t_spine, p_t_chain)
    rows = []
    for rule in ALLOCATIONS:
        widths = _build(rule, acc, budget, max_depth, max_spine, top_k).topology.first_level_widths
        rows += [{"position": i, "rule": rule, "width": int(w)} for i, w in enumerate(widths)]
    return pd.DataFrame(rows, columns=["position", "rule", "width"])


def tree_layout(topology: dict[str, Any], reach: tuple[float, ...] | list[float] | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Node positions for drawing: x = depth, y = leaf order of a depth-first walk in priority
    order (spine first); a parent sits level with its first child, so the spine is one straight
    line along the top and each branch hangs below its spine node. Returns (nodes, edges)."""
    topo = topology_from_dict(topology)
    start, index = topo.children
    y = np.zeros(topo.n_nodes)
    next_leaf = 0.0
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:  # iterative post-order: children placed before their parent
        v, done = stack.pop()
        kids = index[start[v]:start[v + 1]]
        if done:
            y[v] = y[kids[0]]
        elif len(kids) == 0:
            y[v], next_leaf = next_leaf, next_leaf + 1.0
        else:
            stack.append((v, True))
            stack.extend((int(c), False) for c in kids[::-1])
    y = y.max() - y  # spine on top
    depth = topo.depth
    reach_values = np.asarray(reach if reach is not None else np.full(topo.n_nodes, np.nan), dtype=float)
    nodes = pd.DataFrame({"node": np.arange(topo.n_nodes), "x": depth, "y": y,
                          "source": [SOURCE_NAMES[s] for s in topo.source], "rank": topo.rank,
                          "reach": reach_values})
    child = np.arange(1, topo.n_nodes)
    par = topo.parent_array[1:]
    edges = pd.DataFrame({"x": depth[par], "y": y[par], "x2": depth[child], "y2": y[child],
                          "source": [SOURCE_NAMES[topo.source[c]] for c in child]})
    return nodes, edges


def gain_grid(model: str, *, budget: int, max_depth: int = PAPER_MAX_DEPTH, max_spine: int = PAPER_MAX_SPINE,
              top_k: int = PAPER_TOP_K, p_s_values: tuple[float, ...] = tuple(np.round(np.linspace(0.1, 0.8, 8), 2)),
              p_t_values: tuple[float, ...] = (0.02, 0.03, 0.04, 0.05, 0.06, 0.08)) -> pd.DataFrame:
    """Gain of the optimal tree over the best isotropic tree (isotropic:K, K = 1..top_k) at
    each (p_s, p_t): optimal E[tau] / best isotropic E[tau] - 1. The expensive one: cache it."""
    # isotropic:K has no spine node, so neither its shape (the exclusive model caps a node's ranks
    # by its children's q alone) nor its E[tau] depends on p_s: one search over K per p_t
    best_iso = {p_t: _best_isotropic(Acceptance.parse(float(p_s_values[0]), float(p_t), model), budget,
                                     max_depth, max_spine, top_k) for p_t in p_t_values} if p_s_values else {}
    rows = []
    for p_s in p_s_values:
        for p_t in p_t_values:
            acc = Acceptance.parse(float(p_s), float(p_t), model)
            opt = _build("optimal", acc, budget, max_depth, max_spine, top_k).predicted_tau
            best_k, iso = best_iso[p_t]
            rows.append({"p_s": float(p_s), "p_t": float(p_t), "optimal": opt, "best_isotropic": iso,
                         "best_k": best_k, "gain": opt / iso - 1.0})
    return pd.DataFrame(rows)


def _best_isotropic(acc: Acceptance, budget: int, max_depth: int, max_spine: int, top_k: int) -> tuple[int, float]:
    """(K, E[tau]) of the best isotropic:K tree, K = 1..top_k (the first K of the highest E[tau])."""
    iso = {k: _build(f"isotropic:{k}", acc, budget, max_depth, max_spine, top_k).predicted_tau
           for k in range(1, top_k + 1)}
    best_k = max(iso, key=iso.get)
    return best_k, iso[best_k]


def topology_download(topology: dict[str, Any]) -> str:
    """The ``goose-topology/1`` JSON text for the download button (validated round trip)."""
    topo: Topology = topology_from_dict(topology)
    return json.dumps(topo.to_dict(), indent=1, allow_nan=False) + "\n"


def choices_download(topology: dict[str, Any]) -> tuple[str | None, list[str]]:
    """The tree choices line of a transition-only tree (Medusa, EAGLE, TensorRT-LLM, vLLM) and what
    those runtimes would make of it differently; ``(None, [why not])`` for a tree with a spine."""
    topo = topology_from_dict(topology)
    try:
        paths = choices_from_topology(topo)
    except ChoicesError as exc:
        return None, [str(exc)]
    return choices_text(paths), portability_notes(paths)

