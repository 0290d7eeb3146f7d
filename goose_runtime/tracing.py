"""The trace recorder: decoded prompts (:class:`~goose_runtime.records.PromptResult`) -> one
``goose_trace_version=1`` parquet file (schema and atomic writer: :mod:`goose_theory.traceio`).

One row per tree node per verification cycle, root included. Derived columns: ``depth`` from the
parents, ``reached`` = the parent is on the accepted path (true for the root), ``budget`` = non-root
nodes of the cycle's tree. Per-cycle values (``tau``, ``verify_s``, ``draft_s``, ``ngram``,
``consensus``, ``ema``, ``bypass``, ``spine_avail``, ``confident``; -1 there becomes null) repeat on every node of the cycle.

Example:
    >>> from goose_runtime.records import CycleRecord, PromptResult
    >>> c = CycleRecord(parent=[-1, 0], source=["root", "spine"], rank=[0, 0], token=[5, 6],
    ...                 match=[True, True], accepted=[True, True], score=[float("nan")] * 2,
    ...                 spine_pos=[0, 1], tau=2, verify_s=0.01, draft_s=0.001)
    >>> r = PromptResult("pld", "p0", "prompt", 3, [6, 7], "", cycles=[c])
    >>> trace_columns([r], run_id="r", model="m")["depth"]
    [0, 1]
"""
from __future__ import annotations

import importlib.metadata
import os
from typing import Any, Mapping

from goose_theory.traceio import trace_schema, write_trace

from .records import CycleRecord, PromptResult

# int16's largest value: the matcher's count has no bound (keep_history on degenerate repetition passed
# 32767, and writing the trace failed after the whole run; runtime review, 7 Dec), so it saturates here
CONSENSUS_CAP = 32767
_PER_NODE = ("parent", "source", "rank", "token", "match", "accepted", "score", "spine_pos")
_LIBRARIES = ("torch", "transformers", "numpy", "pyarrow", "goose")


class TraceRecordError(ValueError):
    """The decoder's records are inconsistent and cannot be written as a trace."""


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape a trace (read without importing them)."""
    out = {}
    for name in _LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def trace_columns(results: list[PromptResult], *, run_id: str, model: str) -> dict[str, list]:
    """Every column of :func:`goose_theory.traceio.trace_schema`, one entry per node per cycle."""
    names = [f.name for f in trace_schema()]
    cols: dict[str, list] = {name: [] for name in names}
    for result in results:
        for index, cycle in enumerate(result.cycles):
            _append_cycle(cols, cycle, result=result, index=index, run_id=run_id, model=model)
    return cols


def _append_cycle(cols: dict[str, list], cycle: CycleRecord, *, result: PromptResult, index: int,
                  run_id: str, model: str) -> None:
    n = cycle.n_nodes
    where = f"{result.method} {result.benchmark}/{result.prompt_id} cycle {index}"
    bad = [k for k in _PER_NODE if len(getattr(cycle, k)) != n]
    if n == 0 or bad:
        raise TraceRecordError(f"{where}: per-node lists disagree in length ({', '.join(bad) or 'no nodes'})")
    if cycle.parent[0] != -1 or not cycle.accepted[0]:
        raise TraceRecordError(f"{where}: node 0 must be the accepted root (parent -1)")
    depth, reached = [0] * n, [True] * n
    for i in range(1, n):
        p = cycle.parent[i]
        if not 0 <= p < i:
            raise TraceRecordError(f"{where}: node {i} has parent {p}; parents must come first")
        depth[i], reached[i] = depth[p] + 1, cycle.accepted[p]
        if cycle.accepted[i] and not (reached[i] and cycle.match[i]):
            raise TraceRecordError(f"{where}: node {i} is accepted but its parent is not accepted or it does not match")
    for key in _PER_NODE:
        cols[key].extend(getattr(cycle, key))
    per_cycle = {
        "run_id": run_id, "model": model, "benchmark": result.benchmark, "prompt_id": result.prompt_id,
        "method": result.method, "cycle": index, "tau": cycle.tau, "budget": n - 1,
        "verify_s": cycle.verify_s, "draft_s": cycle.draft_s, "ngram": cycle.ngram,
        "consensus": min(cycle.consensus, CONSENSUS_CAP), "ema": cycle.ema, "bypass": cycle.bypass,
        "spine_avail": cycle.spine_avail if cycle.spine_avail >= 0 else None,  # -1: not recorded -> null
        "confident": bool(cycle.confident) if cycle.confident >= 0 else None,
    }
    for key, value in per_cycle.items():
        cols[key].extend([value] * n)
    cols["node"].extend(range(n))
    cols["depth"].extend(depth)
    cols["reached"].extend(reached)


def write_run_trace(path: str | os.PathLike, results: list[PromptResult], *, run_id: str, model: str,
                    device: str, dtype: str, config: Mapping[str, Any]) -> int:
    """Write one run (all its methods and prompts) to ``path`` atomically; return the row count.

    Metadata: ``goose_trace_version``, ``run_id``, ``model``, ``device``, ``dtype``, ``versions``
    (torch, transformers, numpy, pyarrow, goose) and ``config`` (JSON: methods, budgets, decode
    options including whether the adjacency table was reset between prompts).
    """
    cols = trace_columns(results, run_id=run_id, model=model)
    if not cols["node"]:
        raise TraceRecordError(f"{os.fspath(path)}: nothing to record (no verification cycles)")
    metadata = {"run_id": run_id, "model": model, "device": device, "dtype": dtype,
                "versions": library_versions(), "config": dict(config)}
    write_trace(path, cols, metadata)
    return len(cols["node"])
