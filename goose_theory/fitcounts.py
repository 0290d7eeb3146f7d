"""Streaming sufficient statistics of trace files: reached/matched counts per prompt cluster.

A trace holds one row per node per verification cycle (schema: :mod:`goose_theory.traceio`). The fit
needs only small count tables, so files are streamed with ``iter_batches`` over the needed columns,
strings read as dictionaries, in bounded memory. Per *cluster*, a prompt in a run (``(group...,
run_id, benchmark, prompt_id)``; the fit resamples prompts over runs), we count reached and matched:

* spine nodes by spine depth, transition nodes by rank, by depth, and by the parent's source
  (root / spine / transition) and rank -- transition acceptance depends on what it hangs on;
* cycles by tree *shape* (a 64-bit hash of every node's parent/source/rank) with the sum and sum
  of squares of the observed tau: the exact E[tau] of a recorded tree is computed once per shape.

A node is *reached* when its parent was accepted (``reached`` column; where it is absent or null,
derived from ``parent``/``accepted``). Observed tau of a cycle = accepted rows (root included: the bonus
token). Rows must come grouped by cycle, root first, in node order, else a :class:`TraceFileError`.

Example:
    >>> from goose_theory.topology import Topology
    >>> from goose_theory.synthetic import SyntheticSpec, synthetic_table
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    >>> counts = count_tables([synthetic_table(SyntheticSpec(0.6, 0.2, (t,), prompts=3, cycles=5), seed=0)])
    >>> int(counts.spine_reached.sum()), int(counts.shape_table["n"].sum()), len(counts.shapes)
    (15, 15, 1)
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._fitarrays import CAP, Codes as _Codes, Grid as _Grid, splitmix as _splitmix
from .topology import ROOT, SOURCE_NAMES, SPINE, TRANSITION
from .traceio import (TraceFileError, TraceInfo, check_cycle_tau, check_node_values, check_trace, per_cycle_values,
                      signed_values)

GROUP_COLUMNS = ("model", "benchmark", "method")
CLUSTER_COLUMNS = ("run_id", "benchmark", "prompt_id")
PROMPT_COLUMNS = ("benchmark", "prompt_id")  # what identifies a prompt across runs (its text)
LEGACY_PROMPT_ID = "prompt"  # benchmark and id of `decode --prompt` traces before ids named the text: per run
_NUMERIC = ("node", "parent", "depth", "rank", "match", "accepted")
_PER_CYCLE = {"spine_avail": 0, "tau": 1}  # extra columns the regime fit reads: the lowest valid value
BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class Shape:
    """One recorded tree shape: per-node parent, source code and rank (node 0 = root)."""

    parent: np.ndarray
    source: np.ndarray
    rank: np.ndarray


@dataclass(frozen=True)
class FitCounts:
    """Count tables of one or more traces; rows of the 2-D arrays are clusters (prompts)."""

    group_by: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]  # values of group_by per group
    cluster_group: np.ndarray  # (C,) group index of each cluster
    cluster_prompt: np.ndarray  # (C,) index of the prompt, (benchmark, prompt_id), across runs (legacy: per run)
    spine_reached: np.ndarray  # (C, CAP) by spine depth (column = depth, column 0 unused)
    spine_matched: np.ndarray
    rank_reached: np.ndarray  # (C, CAP) transition nodes by rank
    rank_matched: np.ndarray
    depth_reached: np.ndarray  # (C, CAP) transition nodes by depth
    depth_matched: np.ndarray
    shapes: tuple[Shape, ...]
    shape_table: pd.DataFrame  # columns cluster, shape, n, tau_sum, tau_sq
    spine_avail: np.ndarray  # (C, CAP) cycles by spine tokens offered (where recorded)
    files: tuple[str, ...]
    parent_rank_reached: np.ndarray | None = None  # (C, 3, CAP) transition nodes by parent source, rank
    parent_rank_matched: np.ndarray | None = None

    @property
    def n_clusters(self) -> int:
        return int(self.cluster_group.shape[0])

    def group_label(self, g: int) -> str:
        return "-".join(self.groups[g]) if self.groups[g] else "all"


class _Accumulator:
    def __init__(self, group_by: Sequence[str]) -> None:
        self.group_by = tuple(group_by)
        self.string_cols = tuple(dict.fromkeys((*self.group_by, *CLUSTER_COLUMNS, "source")))
        self.codes = {c: _Codes() for c in self.string_cols}
        self.clusters: dict[tuple[int, ...], int] = {}
        self.grids = {k: _Grid() for k in ("sr", "sm", "rr", "rm", "dr", "dm", "av")}
        self.grids.update({k: _Grid(3 * CAP) for k in ("pr", "pm")})  # columns: parent source * CAP + rank
        self.shape_ids: dict[int, int] = {}
        self.shapes: list[Shape] = []
        self.shape_parts: list[pd.DataFrame] = []

    def columns(self, names: Sequence[str]) -> list[str]:
        return [*self.string_cols, *_NUMERIC, *(c for c in ("reached", *_PER_CYCLE) if c in names)]

    def to_arrays(self, batch: pa.RecordBatch, file: str) -> dict[str, np.ndarray]:
        out = {}
        for name in batch.schema.names:
            col = batch.column(name)
            if name == "reached":  # null = not recorded on that row, derived there; decided per row, so that
                out[name] = _reached_codes(col)  # batches with and without nulls carry the same keys
                continue
            if name in _PER_CYCLE:  # null = not recorded
                out[name] = per_cycle_values(file, col, name, lowest=_PER_CYCLE[name])
                continue
            if name in self.codes:
                out[name] = self.codes[name].encode(col, name, file)
            else:
                if col.null_count:
                    raise TraceFileError(f"{file}: column {name} has null values")
                out[name] = signed_values(file, col, name).to_numpy(zero_copy_only=False)
        return out

    def add(self, a: dict[str, np.ndarray], file: str) -> None:
        """Count the complete cycles in ``a`` (rows grouped by cycle, root first)."""
        node = a["node"].astype(np.int64)
        roots = np.flatnonzero(node == 0)
        lens = np.diff(np.append(roots, node.shape[0]))
        start = np.repeat(roots, lens)
        local = np.arange(node.shape[0]) - start
        if not np.array_equal(node, local):
            raise TraceFileError(f"{file}: rows are not grouped by cycle with nodes in index order (root first)")
        parent = a["parent"].astype(np.int64)
        source = self._source_codes(a["source"], file)
        nonroot = node > 0
        if np.any(nonroot & ((parent < 0) | (parent >= node))) or np.any(source[~nonroot] != ROOT) \
                or np.any(source[nonroot] == ROOT):
            raise TraceFileError(f"{file}: bad tree rows (a parent that is not an earlier node, or a misplaced root)")
        root_parent = parent[~nonroot]
        if np.any(root_parent != -1):  # e.g. an unsigned column's 2**32 - 1, which no index reading makes -1
            raise TraceFileError(f"{file}: column parent is {root_parent[root_parent != -1][0]} on a root row "
                                 "(the root's parent is -1)")
        gparent = np.where(nonroot, start + parent, np.arange(node.shape[0]))
        depth, accepted, raw_rank = a["depth"].astype(np.int64), a["accepted"].astype(bool), a["rank"].astype(np.int64)
        given = a.get("reached")  # 1 / 0, -1 where not recorded
        check_node_values(file, depth=depth, gparent=gparent, nonroot=nonroot, rank=raw_rank, accepted=accepted,
                          match=a["match"].astype(bool), reached=given)
        reached = accepted[gparent] | ~nonroot
        matched = a["match"].astype(bool) & reached & nonroot
        cyc_cluster = self._cluster_ids(a, roots)
        row_cluster = np.repeat(cyc_cluster, lens) * CAP
        rank = np.clip(raw_rank, 0, CAP - 1)
        dclip = np.clip(depth, 0, CAP - 1)
        n_c = len(self.clusters)
        for kind, bins, reach_key, match_key in (
                (SPINE, dclip, "sr", "sm"), (TRANSITION, rank, "rr", "rm"), (TRANSITION, dclip, "dr", "dm")):
            sel = reached & nonroot & (source == kind)
            self.grids[reach_key].add(n_c, (row_cluster + bins)[sel])
            self.grids[match_key].add(n_c, (row_cluster + bins)[matched & (source == kind)])
        # parent's source (rows are grouped by cycle, so the parent row is in this batch)
        pkey = np.repeat(cyc_cluster, lens) * (3 * CAP) + source[gparent] * CAP + rank
        trans = nonroot & (source == TRANSITION)
        self.grids["pr"].add(n_c, pkey[reached & trans])
        self.grids["pm"].add(n_c, pkey[matched & trans])
        if "spine_avail" in a:  # histogram of the spine tokens the matcher offered, per cycle
            av = a["spine_avail"][roots]
            ok = av >= 0
            self.grids["av"].add(n_c, cyc_cluster[ok] * CAP + np.clip(av[ok], 0, CAP - 1))
        tau = np.add.reduceat(accepted.astype(np.int64), roots) if roots.size else np.zeros(0, np.int64)
        if "tau" in a:
            check_cycle_tau(file, a["tau"], start, roots, tau)
        self._add_shapes(node, parent, source, raw_rank, roots, lens, cyc_cluster, tau)

    def _source_codes(self, codes: np.ndarray, file: str) -> np.ndarray:
        names = self.codes["source"].values
        lookup = np.full(len(names), -1, dtype=np.int64)
        for i, name in enumerate(names):
            if name in SOURCE_NAMES:
                lookup[i] = SOURCE_NAMES.index(name)
        out = lookup[codes]
        if np.any(out < 0):
            bad = sorted({names[c] for c in np.unique(codes) if lookup[c] < 0})
            raise TraceFileError(f"{file}: unknown source value(s) {', '.join(map(repr, bad))}")
        return out

    def _cluster_ids(self, a: dict[str, np.ndarray], roots: np.ndarray) -> np.ndarray:
        cols = [*self.group_by, *(c for c in CLUSTER_COLUMNS if c not in self.group_by)]
        keys = np.stack([a[c][roots] for c in cols], axis=1) if roots.size else None
        if not roots.size:
            return np.zeros(0, np.int64)
        uniq, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        ids = np.empty(uniq.shape[0], dtype=np.int64)
        for j in np.argsort(first).tolist():  # order of first appearance: batch-independent ids
            ids[j] = self.clusters.setdefault(tuple(uniq[j].tolist()), len(self.clusters))
        return ids[inverse.reshape(-1)]

    def _add_shapes(self, node, parent, source, rank, roots, lens, cyc_cluster, tau) -> None:
        if not roots.size:
            return
        h = (node.astype(np.uint64) << np.uint64(40)) ^ ((parent + 1).astype(np.uint64) << np.uint64(20)) \
            ^ (source.astype(np.uint64) << np.uint64(16)) ^ rank.astype(np.uint64)
        cyc_hash = np.add.reduceat(_splitmix(h), roots) ^ _splitmix(lens.astype(np.uint64))
        uniq, first, inverse = np.unique(cyc_hash, return_index=True, return_inverse=True)
        ids = np.empty(uniq.shape[0], dtype=np.int64)
        for j in np.argsort(first).tolist():  # register in order of first appearance: batch-independent ids
            hv, f = int(uniq[j]), int(first[j])
            if hv not in self.shape_ids:
                s, e = roots[f], roots[f] + lens[f]
                self.shape_ids[hv] = len(self.shapes)
                self.shapes.append(Shape(parent[s:e].copy(), source[s:e].copy(), rank[s:e].copy()))
            ids[j] = self.shape_ids[hv]
        df = pd.DataFrame({"cluster": cyc_cluster, "shape": ids[inverse.reshape(-1)],
                           "n": 1, "tau_sum": tau, "tau_sq": tau * tau})
        self.shape_parts.append(df.groupby(["cluster", "shape"], as_index=False).sum())

    def finish(self, files: Sequence[str]) -> FitCounts:
        n_c = len(self.clusters)
        keys = sorted(self.clusters, key=self.clusters.get)
        ng = len(self.group_by)
        group_keys = [k[:ng] for k in keys]
        groups = sorted(set(group_keys))
        gindex = {g: i for i, g in enumerate(groups)}
        cols = [*self.group_by, *(c for c in CLUSTER_COLUMNS if c not in self.group_by)]
        legacy = tuple(self.codes[c].index.get(LEGACY_PROMPT_ID, -1) for c in PROMPT_COLUMNS)
        prompt_keys = [tuple(k[cols.index(c)] for c in PROMPT_COLUMNS) for k in keys]  # global codes
        prompt_keys = [k + (key[cols.index("run_id")],) if k == legacy else k for k, key in zip(prompt_keys, keys)]
        pindex: dict[tuple[int, ...], int] = {}
        cluster_prompt = np.array([pindex.setdefault(p, len(pindex)) for p in prompt_keys], dtype=np.int64)
        names = tuple(tuple(self.codes[c].values[v] for c, v in zip(self.group_by, g)) for g in groups)
        parts = self.shape_parts or [pd.DataFrame({"cluster": [], "shape": [], "n": [], "tau_sum": [], "tau_sq": []}, dtype=np.int64)]
        table = pd.concat(parts, ignore_index=True).groupby(["cluster", "shape"], as_index=False).sum()
        g = {k: v.data[:n_c].copy() for k, v in self.grids.items()}
        return FitCounts(self.group_by, names, np.array([gindex[k] for k in group_keys], dtype=np.int64),
                         cluster_prompt, g["sr"], g["sm"], g["rr"], g["rm"], g["dr"], g["dm"],
                         tuple(self.shapes), table, g["av"], tuple(files),
                         g["pr"].reshape(n_c, 3, CAP), g["pm"].reshape(n_c, 3, CAP))


def _reached_codes(col: pa.Array) -> np.ndarray:
    """A ``reached`` column as int8: 1 / 0, -1 where null (not recorded; also a null-type column)."""
    return col.cast(pa.int8()).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int8)


def check_group_by(group_by: Sequence[str]) -> tuple[str, ...]:
    """The group-by columns, de-duplicated; an unknown one is a one-line TraceFileError."""
    bad = [c for c in group_by if c not in GROUP_COLUMNS]
    if bad:
        raise TraceFileError(f"--group-by: unknown column(s) {', '.join(bad)} (choose from {', '.join(GROUP_COLUMNS)})")
    return tuple(dict.fromkeys(group_by))


def count_files(paths: Iterable[str | os.PathLike | TraceInfo], *, group_by: Sequence[str] = (),
                batch_rows: int = BATCH_ROWS,
                on_bad: Callable[[TraceFileError], None] | None = None) -> FitCounts:
    """Stream trace files into :class:`FitCounts` (bounded memory).

    Each file is opened once: a path is checked here (:func:`goose_theory.traceio.check_trace`);
    a :class:`~goose_theory.traceio.TraceInfo` (checked already, e.g. by the CLI before anything
    is counted) is read with its parsed footer. A bad file raises :class:`TraceFileError`; with
    ``on_bad`` it is passed the error instead, and the file's partial counts are rolled back (the
    state is copied before each file).
    """
    acc = _Accumulator(check_group_by(group_by))
    names = []
    for item in paths:
        name = item.path if isinstance(item, TraceInfo) else os.fspath(item)
        saved = copy.deepcopy(acc) if on_bad is not None else None
        try:
            _count_file(acc, item if isinstance(item, TraceInfo) else check_trace(name), batch_rows)
        except (pa.ArrowException, OSError, TraceFileError) as exc:
            err = exc if isinstance(exc, TraceFileError) else \
                TraceFileError(f"{name}: unreadable data ({str(exc).splitlines()[0]})")
            if on_bad is None:
                raise err from None
            on_bad(err); acc = saved; continue
        names.append(name)
    return acc.finish(names)


def _count_file(acc: _Accumulator, trace: TraceInfo, batch_rows: int) -> None:
    """Stream one checked file: only the needed columns, strings as dictionaries."""
    with trace.open(read_dictionary=list(acc.string_cols)) as pf:
        _stream(acc, pf.iter_batches(batch_size=batch_rows, columns=acc.columns(trace.columns)), trace.path)


def count_tables(tables: Iterable[pa.Table], *, group_by: Sequence[str] = (), name: str = "<table>") -> FitCounts:
    """Same as :func:`count_files` for in-memory tables (tests, synthetic data)."""
    acc = _Accumulator(check_group_by(group_by))
    names = []
    for i, table in enumerate(tables):
        cols = acc.columns(table.column_names)
        names.append(f"{name}[{i}]")
        _stream(acc, table.select(cols).to_batches(max_chunksize=BATCH_ROWS), names[-1])
    return acc.finish(names)


def _stream(acc: _Accumulator, batches: Iterable[pa.RecordBatch], name: str) -> None:
    """Feed batches; the last (possibly incomplete) cycle of a batch is carried to the next."""
    carry: dict[str, np.ndarray] | None = None
    for batch in batches:
        a = acc.to_arrays(batch, name)
        if carry is not None:
            a = {k: np.concatenate([carry[k], a[k]]) for k in a}
        roots = np.flatnonzero(a["node"] == 0)
        if roots.size == 0 or roots[0] != 0:
            raise TraceFileError(f"{name}: rows are not grouped by cycle with the root first")
        cut = int(roots[-1])
        carry = {k: v[cut:] for k, v in a.items()}
        if cut:
            acc.add({k: v[:cut] for k, v in a.items()}, name)
    if carry is not None:
        acc.add(carry, name)
