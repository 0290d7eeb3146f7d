"""Synthetic traces in the real v1 schema, drawn from known p_s / p_t (fit tests, benchmarks).

Cycles are drawn under the **exclusive** model (exact for greedy decoding): at *every* node one
uniform picks at most one child as "the match" (child c with probability q(c), in priority
order), whether or not the node itself is reached -- as the runtime records ``match`` for every
drafted node. ``accepted`` is then the chain of matches from the root, ``reached`` = parent
accepted, tau = accepted rows (root = bonus token included).

* ``p_s`` scalar or by spine depth, ``p_t`` scalar or by rank (last value repeats); optional
  ``p_t_spine`` / ``p_t_chain`` for transition children of spine / transition nodes (``p_t``
  then applies under the root; see :class:`goose_theory.acceptance.Acceptance`);
* a per-prompt random effect: ``prompt_sd`` is the standard deviation of a normal shift of
  logit(q), one draw per prompt for spine and one for transition nodes. Where shifted q's of one
  node's children sum above 1 they are scaled down to sum to 1 (documented bias, only then);
* ``max_accepted_depth`` plants a bound violation: the walk stops at that depth even when a
  child matched (as a buggy verifier would), so observed tau falls below what the matches imply.

Fully vectorised over cycles (one numpy pass per tree node), so 10 million rows take seconds.

Example:
    >>> from goose_theory.topology import Topology
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    >>> cols = synthetic_columns(SyntheticSpec(0.6, 0.1, (t,), prompts=2, cycles=3), seed=0)
    >>> len(cols["node"]), sorted(set(cols["source"].to_pylist()))
    (18, ['root', 'spine', 'transition'])
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from .acceptance import Acceptance
from .topology import SOURCE_NAMES, SPINE, TRANSITION, Topology
from .traceio import write_trace
from .simulate import node_q
from .yields import exact_yield


@dataclass(frozen=True)
class SyntheticSpec:
    """One group of synthetic prompts: true parameters, trees, labels."""

    p_s: float | Sequence[float]
    p_t: float | Sequence[float]
    topologies: Sequence[Topology]  # each cycle uses one, drawn uniformly
    prompts: int = 20
    cycles: int = 50  # per prompt
    prompt_sd: float = 0.0
    model: str = "synthetic-model"
    benchmark: str = "synthetic"
    method: str = "goose"
    run_id: str = "run-0"
    max_accepted_depth: int | None = None
    p_t_spine: float | Sequence[float] | None = None  # None: as p_t
    p_t_chain: float | Sequence[float] | None = None
    # prompt ids: "<run_id>/<method>/p00000"..., as each spec draws its own random effects;
    # prompt_group replaces "<run_id>/<method>": set it only where specs re-draw the same prompts
    prompt_group: str | None = None

    @property
    def acceptance(self) -> Acceptance:
        return Acceptance.parse(self.p_s, self.p_t, p_t_spine=self.p_t_spine, p_t_chain=self.p_t_chain)


def _node_q(topology: Topology, acc: Acceptance) -> tuple[np.ndarray, np.ndarray]:
    """Base q per node and a mask of spine nodes."""
    exact_yield(topology, acc)  # raises ExclusiveModelError if a node's children sum above 1
    return node_q(topology, acc), topology.source_array == SPINE


def _shifted(q: np.ndarray, spine: np.ndarray, z_s: np.ndarray, z_t: np.ndarray) -> np.ndarray:
    """(cycles, nodes) q with the logit shifted per cycle by its prompt's random effect."""
    logit = np.log(np.clip(q, 1e-12, 1 - 1e-12) / np.clip(1 - q, 1e-12, 1))
    shift = np.where(spine[None, :], z_s[:, None], z_t[:, None])
    out = 1.0 / (1.0 + np.exp(-(logit[None, :] + shift)))
    out[:, q <= 0.0] = 0.0
    out[:, q >= 1.0] = 1.0
    return out


def _draw(topology: Topology, qmat: np.ndarray, rng: np.random.Generator, cap: int | None):
    """match / accepted matrices (cycles x nodes) under the exclusive model."""
    n_cyc, n = qmat.shape
    match = np.zeros((n_cyc, n), dtype=bool)
    match[:, 0] = True
    start, index = topology.children
    for v in range(n):
        kids = index[start[v]:start[v + 1]]
        if kids.size == 0:
            continue
        cum = np.cumsum(qmat[:, kids], axis=1)
        over = cum[:, -1] > 1.0  # only with a random effect: renormalise those cycles
        cum[over] /= cum[over, -1:]
        u = rng.random(n_cyc)
        pick = (u[:, None] < cum).argmax(axis=1)
        hit = u < cum[:, -1]
        match[np.flatnonzero(hit), kids[pick[hit]]] = True
    accepted = match.copy()
    parent, depth = topology.parent, topology.depth
    for i in range(1, n):
        accepted[:, i] &= accepted[:, parent[i]]
        if cap is not None and depth[i] > cap:
            accepted[:, i] = False
    return match, accepted


def _strings(values: Sequence[str], codes: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(list(values))).cast(pa.string())


def _spec_columns(spec: SyntheticSpec, rng: np.random.Generator) -> dict[str, Any]:
    acc = spec.acceptance
    n_cyc = spec.prompts * spec.cycles
    prompt = np.repeat(np.arange(spec.prompts), spec.cycles)
    cycle = np.tile(np.arange(spec.cycles), spec.prompts)
    z_s = rng.normal(0.0, spec.prompt_sd, spec.prompts)[prompt] if spec.prompt_sd else np.zeros(n_cyc)
    z_t = rng.normal(0.0, spec.prompt_sd, spec.prompts)[prompt] if spec.prompt_sd else np.zeros(n_cyc)
    which = rng.integers(0, len(spec.topologies), n_cyc)
    sizes = np.array([t.n_nodes for t in spec.topologies])[which]
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rows = int(sizes.sum())
    out = {k: np.zeros(rows, dtype=d) for k, d in (
        ("node", np.int32), ("parent", np.int32), ("depth", np.int16), ("source", np.int8), ("rank", np.int16),
        ("match", bool), ("accepted", bool), ("reached", bool), ("spine_pos", np.int16))}
    for k, topo in enumerate(spec.topologies):
        cyc = np.flatnonzero(which == k)
        if cyc.size == 0:
            continue
        q, spine = _node_q(topo, acc)
        qmat = _shifted(q, spine, z_s[cyc], z_t[cyc]) if spec.prompt_sd else np.broadcast_to(q, (cyc.size, q.size))
        match, accepted = _draw(topo, qmat, rng, spec.max_accepted_depth)
        pos = (offset[cyc][:, None] + np.arange(topo.n_nodes)[None, :]).ravel()
        par = topo.parent_array
        reached = np.concatenate([np.ones((cyc.size, 1), bool), accepted[:, par[1:]]], axis=1)
        for name, values in (("node", np.arange(topo.n_nodes)), ("parent", par), ("depth", topo.depth),
                             ("source", topo.source_array), ("rank", topo.rank_array),
                             ("spine_pos", np.where(spine, topo.depth, 0))):
            out[name][pos] = np.broadcast_to(values, (cyc.size, topo.n_nodes)).ravel()
        out["match"][pos], out["accepted"][pos], out["reached"][pos] = match.ravel(), accepted.ravel(), reached.ravel()
    row_cycle = np.repeat(np.arange(n_cyc), sizes)
    # the matcher is taken to offer a full max_spine continuation every cycle (a(d) = 1)
    spine_len = np.array([t.max_spine for t in spec.topologies], dtype=np.int16)[which]
    tau = np.bincount(row_cycle, weights=out["accepted"], minlength=n_cyc).astype(np.int16)
    group = spec.prompt_group if spec.prompt_group is not None else f"{spec.run_id}/{spec.method}"
    prompt_names = [f"{group}/p{i:05d}" for i in range(spec.prompts)]
    nan = np.full(rows, np.nan, dtype=np.float32)
    return {
        "run_id": _strings([spec.run_id], np.zeros(rows)), "model": _strings([spec.model], np.zeros(rows)),
        "benchmark": _strings([spec.benchmark], np.zeros(rows)), "method": _strings([spec.method], np.zeros(rows)),
        "prompt_id": _strings(prompt_names, prompt[row_cycle]), "cycle": cycle[row_cycle].astype(np.int32),
        "node": out["node"], "parent": out["parent"], "depth": out["depth"],
        "source": _strings(SOURCE_NAMES, out["source"]), "rank": out["rank"],
        "token": rng.integers(0, 32000, rows, dtype=np.int32), "match": out["match"], "accepted": out["accepted"],
        "reached": out["reached"], "score": np.where(out["source"] == TRANSITION, np.float32(0.5), nan),
        "spine_pos": out["spine_pos"], "ngram": np.full(rows, 3, np.int8), "consensus": np.zeros(rows, np.int16),
        "tau": tau[row_cycle], "budget": (sizes - 1).astype(np.int16)[row_cycle],
        "verify_s": np.zeros(rows, np.float32), "draft_s": np.zeros(rows, np.float32), "ema": nan,
        "bypass": np.zeros(rows, bool), "spine_avail": spine_len[row_cycle],
    }


def synthetic_columns(spec: SyntheticSpec | Sequence[SyntheticSpec], *, seed: int) -> dict[str, Any]:
    """Columns of the v1 schema for one or more specs (groups), reproducible from ``seed``."""
    specs = [spec] if isinstance(spec, SyntheticSpec) else list(spec)
    children = np.random.SeedSequence(seed).spawn(len(specs))
    parts = [_spec_columns(s, np.random.default_rng(c)) for s, c in zip(specs, children)]
    if len(parts) == 1:
        return parts[0]
    return {k: (pa.concat_arrays([p[k] for p in parts]) if isinstance(parts[0][k], pa.Array)
                else np.concatenate([p[k] for p in parts])) for k in parts[0]}


def synthetic_table(spec: SyntheticSpec | Sequence[SyntheticSpec], *, seed: int) -> pa.Table:
    """The same as an in-memory pyarrow table (v1 schema, with metadata)."""
    from .traceio import trace_schema
    schema = trace_schema({"synthetic": "true"})
    cols = synthetic_columns(spec, seed=seed)
    n = len(cols["node"])
    return pa.table({f.name: pa.array(cols[f.name], type=f.type) if f.name in cols else pa.nulls(n, f.type)
                     for f in schema}, schema=schema)


def write_synthetic(path: str | os.PathLike, spec: SyntheticSpec | Sequence[SyntheticSpec], *, seed: int) -> None:
    """Draw and write one trace file atomically (via :func:`goose_theory.traceio.write_trace`)."""
    specs = [spec] if isinstance(spec, SyntheticSpec) else list(spec)
    truth = [{"method": s.method, **{k: v for k, v in s.acceptance.to_dict().items() if k != "model"},
              "prompt_sd": s.prompt_sd, "max_accepted_depth": s.max_accepted_depth} for s in specs]
    write_trace(path, synthetic_columns(specs, seed=seed), {"synthetic": "true", "truth": truth, "seed": seed})
