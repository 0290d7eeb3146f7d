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
token). Rows must come grouped by cycle, root first, in node order, else a :class:`TraceFileError`;
so must the rest of :mod:`goose_theory.tracecheck` (one value per cycle in the per-cycle columns,
the rows ``budget`` says, no cycle counted twice).

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
import json
import math
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ._fitarrays import CAP, Codes as _Codes, Grid as _Grid
from .fitshapes import Shape, ShapeTally
from .topology import SPINE, TRANSITION
from .seencycles import SeenCycles
from .tracecheck import (PER_CYCLE, REPEAT_KEY, SAME_IN_CYCLE, Cycles, batch_arrays, check_cycle_columns,
                         check_node_values, cycle_rows, file_batches, source_codes, whole_cycles)
from .traceio import TraceFileError, TraceInfo, check_trace

GROUP_COLUMNS = ("model", "benchmark", "method")
POOLED = "all"  # the label of the fit of every trace pooled (its file: topology-all.json)
CLUSTER_COLUMNS = ("run_id", "benchmark", "prompt_id")
PROMPT_COLUMNS = ("benchmark", "prompt_id")  # what identifies a prompt across runs (its text)
LEGACY_PROMPT_ID = "prompt"  # benchmark and id of `decode --prompt` traces before ids named the text: per run
_NUMERIC = ("cycle", "node", "parent", "depth", "rank", "match", "accepted")
BATCH_ROWS = 1 << 20
_FLAT_KEYS = 2**62  # cluster keys numbered 0.._FLAT_KEYS - 1 fit an int64 (see _root_ids)


@dataclass(frozen=True)
class FitCounts:
    """Count tables of one or more traces; rows of the 2-D arrays are clusters (prompts), in the
    order of their values (so that the bootstrap, which draws by position, sees the data, not the
    row order); shapes in the order of their hashes."""

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
    # (C,) reached nodes that matched but were not accepted: greedy verification never leaves one (the
    # walk steps to the matching child); a verifier that stops early or a corrupt match column does
    unaccepted_matches: np.ndarray | None = None

    @property
    def n_clusters(self) -> int:
        return int(self.cluster_group.shape[0])

    def group_label(self, g: int) -> str:
        """The group's values joined by "-" ("humaneval-goose@8"); where that joins two groups'
        values to one label (("x-y", "goose") and ("x", "y-goose")), or to "all", the pooled fit's
        label, each of them is labelled by its values as a JSON list instead: a label names one group
        (files, the report, --json)."""
        if not self.groups[g]:
            return POOLED
        label = "-".join(self.groups[g])
        if label == POOLED or sum("-".join(values) == label for values in self.groups) > 1:
            return json.dumps(list(self.groups[g]))
        return label


class _Accumulator:
    def __init__(self, group_by: Sequence[str]) -> None:
        self.group_by = tuple(group_by)
        self.string_cols = tuple(dict.fromkeys((*self.group_by, *CLUSTER_COLUMNS, *SAME_IN_CYCLE, "source")))
        self.codes = {c: _Codes() for c in self.string_cols}
        self.clusters: dict[tuple[int, ...], int] = {}
        self.grids = {k: _Grid() for k in ("sr", "sm", "rr", "rm", "dr", "dm", "av")}
        self.grids.update({k: _Grid(3 * CAP) for k in ("pr", "pm")})  # columns: parent source * CAP + rank
        self.grids["mx"] = _Grid(1)  # reached, matched, not accepted (FitCounts.unaccepted_matches)
        self.shapes = ShapeTally()
        self.keys: dict[tuple[int, ...], int] = {}  # (run_id, benchmark, prompt_id, method) codes -> id
        self.seen = SeenCycles()

    def columns(self, names: Sequence[str]) -> list[str]:
        return [*self.string_cols, *_NUMERIC, *(c for c in ("reached", *PER_CYCLE) if c in names)]

    def add(self, a: dict[str, np.ndarray], file: str) -> None:
        """Count the complete cycles in ``a`` (rows grouped by cycle, root first)."""
        node, parent = a["node"].astype(np.int64), a["parent"].astype(np.int64)
        source = source_codes(file, a["source"], self.codes["source"].values)
        cyc = cycle_rows(file, node, parent, source)
        roots, lens, nonroot, gparent = cyc.roots, cyc.lens, cyc.nonroot, cyc.gparent
        depth, accepted, raw_rank = a["depth"].astype(np.int64), a["accepted"].astype(bool), a["rank"].astype(np.int64)
        check_node_values(file, depth=depth, gparent=gparent, nonroot=nonroot, rank=raw_rank, accepted=accepted,
                          match=a["match"].astype(bool), reached=a.get("reached"))  # reached: 1 / 0, -1 not recorded
        tau = np.add.reduceat(accepted.astype(np.int64), roots) if roots.size else np.zeros(0, np.int64)
        cyc_cluster, key = self._root_ids(a, roots)
        self._check_cycles(a, cyc, tau, key, file)
        reached = accepted[gparent] | ~nonroot
        matched = a["match"].astype(bool) & reached & nonroot
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
        self.grids["mx"].add(n_c, np.repeat(cyc_cluster, lens)[matched & ~accepted])
        if "spine_avail" in a:  # histogram of the spine tokens the matcher offered, per cycle
            av = a["spine_avail"][roots]
            ok = av >= 0
            self.grids["av"].add(n_c, cyc_cluster[ok] * CAP + np.clip(av[ok], 0, CAP - 1))
        self.shapes.add(node, parent, source, raw_rank, roots, lens, cyc_cluster, tau)

    def _check_cycles(self, a: dict[str, np.ndarray], cyc: Cycles, accepted_rows: np.ndarray, key: np.ndarray,
                      file: str) -> None:
        """One value per cycle in the per-cycle columns, tau and budget that fit the rows, and no
        cycle that was counted already (``key``: each cycle's (run_id, benchmark, prompt_id, method))."""
        def describe(i: int) -> str:
            row = cyc.roots[i]
            of = ", ".join(f"{c} {self.codes[c].values[a[c][row]]!r}" for c in REPEAT_KEY)
            return f"cycle {a['cycle'][row]} of ({of})"

        check_cycle_columns(file, a, cyc, accepted_rows, describe)
        self.seen.check(key, a["cycle"][cyc.roots], describe)

    def _cluster_columns(self) -> list[str]:
        return [*self.group_by, *(c for c in CLUSTER_COLUMNS if c not in self.group_by)]

    def _root_ids(self, a: dict[str, np.ndarray], roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per cycle: its cluster id and the id of its (run_id, benchmark, prompt_id, method)."""
        cols = self._cluster_columns()
        every = [*cols, *(c for c in REPEAT_KEY if c not in cols)]
        if not roots.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows = np.stack([a[c][roots] for c in every], axis=1)
        sizes = [len(self.codes[c].values) for c in every]
        if math.prod(sizes) < _FLAT_KEYS:  # one number per cycle: a 1-D unique, ~10x faster than one of rows
            _, first, inverse = np.unique(np.ravel_multi_index(rows.T, sizes), return_index=True, return_inverse=True)
            uniq = rows[first]
        else:
            uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
        at = [every.index(c) for c in REPEAT_KEY]
        clusters, keys = np.empty(uniq.shape[0], np.int64), np.empty(uniq.shape[0], np.int64)
        for j, row in enumerate(uniq.tolist()):  # ids in any order: finish() numbers clusters by their values
            clusters[j] = self.clusters.setdefault(tuple(row[:len(cols)]), len(self.clusters))
            keys[j] = self.keys.setdefault(tuple(row[i] for i in at), len(self.keys))
        inverse = inverse.reshape(-1)
        return clusters[inverse], keys[inverse]

    def finish(self, files: Sequence[str]) -> FitCounts:
        n_c, cols, ng = len(self.clusters), self._cluster_columns(), len(self.group_by)
        codes = list(self.clusters)  # in id order
        values = [tuple(self.codes[c].values[v] for c, v in zip(cols, k)) for k in codes]
        # clusters in the order of their values, not of first appearance: the bootstrap draws by
        # position, so the same cycles in another row order gave other intervals for one seed
        order = np.array(sorted(range(n_c), key=values.__getitem__), dtype=np.int64)
        codes, values = [codes[i] for i in order], [values[i] for i in order]
        groups = sorted({v[:ng] for v in values})
        gindex = {g: i for i, g in enumerate(groups)}
        legacy = tuple(self.codes[c].index.get(LEGACY_PROMPT_ID, -1) for c in PROMPT_COLUMNS)
        prompt_keys = [tuple(k[cols.index(c)] for c in PROMPT_COLUMNS) for k in codes]  # global codes
        prompt_keys = [k + (key[cols.index("run_id")],) if k == legacy else k for k, key in zip(prompt_keys, codes)]
        pindex: dict[tuple[int, ...], int] = {}
        cluster_prompt = np.array([pindex.setdefault(p, len(pindex)) for p in prompt_keys], dtype=np.int64)
        new_cluster = np.empty(n_c, np.int64)
        new_cluster[order] = np.arange(n_c)
        shapes, table = self.shapes.table(new_cluster)
        g = {k: v.data[:n_c][order] for k, v in self.grids.items()}
        return FitCounts(self.group_by, tuple(groups), np.array([gindex[v[:ng]] for v in values], dtype=np.int64),
                         cluster_prompt, g["sr"], g["sm"], g["rr"], g["rm"], g["dr"], g["dm"],
                         shapes, table, g["av"], tuple(files),
                         g["pr"].reshape(n_c, 3, CAP), g["pm"].reshape(n_c, 3, CAP), g["mx"][:, 0])



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
        _stream(acc, file_batches(pf, acc.columns(trace.columns), batch_rows), trace.path, batch_rows)


def count_tables(tables: Iterable[pa.Table], *, group_by: Sequence[str] = (), name: str = "<table>") -> FitCounts:
    """Same as :func:`count_files` for in-memory tables (tests, synthetic data)."""
    acc = _Accumulator(check_group_by(group_by))
    names = []
    for i, table in enumerate(tables):
        cols = acc.columns(table.column_names)
        names.append(f"{name}[{i}]")
        _stream(acc, table.select(cols).to_batches(max_chunksize=BATCH_ROWS), names[-1], BATCH_ROWS)
    return acc.finish(names)


def _stream(acc: _Accumulator, batches: Iterable[pa.RecordBatch], name: str, batch_rows: int) -> None:
    """Count the whole cycles of one file's batches (joined to >= ``batch_rows`` rows)."""
    acc.seen.begin(name)
    for a in whole_cycles(batches, name, batch_rows, lambda batch: batch_arrays(batch, name, acc.codes)):
        acc.add(a, name)
