"""A trace's rows as the fit streams them: batches of whole cycles, read into arrays and checked
for what the schema cannot say.

The rows of a cycle form its tree (parents are earlier nodes, the root first), the node values
agree with the links (depth, accepted, reached), the per-cycle columns hold one value on every
row of their cycle, ``tau`` fits the accepted rows, and the row count fits ``budget`` (that no
cycle is counted twice is :mod:`goose_theory.seencycles`). A file that breaks one would fit to numbers that mean nothing, often silently, so
each is a one-line :class:`~goose_theory.traceio.TraceFileError` naming the file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._fitarrays import Codes
from .topology import ROOT, SOURCE_NAMES
from .traceio import TraceFileError

# string columns the fit reads on a cycle's root row only, which the regime fit filters rows by
SAME_IN_CYCLE = ("run_id", "model", "benchmark", "prompt_id", "method")
REPEAT_KEY = ("run_id", "benchmark", "prompt_id", "method")  # with ``cycle``: one cycle of one decode
PER_CYCLE = {"spine_avail": 0, "tau": 1, "budget": 0}  # per-cycle extra columns: the lowest valid value
JOIN_BATCHES = 1024  # most batches joined into one (see _coalesced)


def whole_cycles(batches: Iterable[pa.RecordBatch], file: str, rows: int,
                 to_arrays: Callable[[pa.RecordBatch], dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
    """The rows of ``batches`` as arrays (``to_arrays``) of whole cycles, batches joined to at
    least ``rows`` rows; the last (possibly incomplete) cycle of a batch is carried to the next."""
    carry: dict[str, np.ndarray] | None = None
    for batch in _coalesced(batches, rows):
        a = to_arrays(batch)
        if carry is not None:
            a = {k: np.concatenate([carry[k], a[k]]) for k in a}
        roots = np.flatnonzero(a["node"] == 0)
        if roots.size == 0 or roots[0] != 0:
            raise TraceFileError(f"{file}: rows are not grouped by cycle with the root first")
        cut = int(roots[-1])
        carry = {k: v[cut:] for k, v in a.items()}
        if cut:
            yield {k: v[:cut] for k, v in a.items()}
    if carry is not None:
        yield carry


def file_batches(pf: pq.ParquetFile, columns: list[str], rows: int) -> Iterator[pa.RecordBatch]:
    """The ``columns`` of a file in batches of at most ``rows`` rows, read a few row groups at a
    time (up to ``rows`` rows, at most JOIN_BATCHES groups): one ``iter_batches`` over 17k row groups
    held 200 MB more than the same reads in runs of 1024."""
    run: list[int] = []
    held = 0
    for i in range(pf.metadata.num_row_groups):
        run.append(i)
        held += pf.metadata.row_group(i).num_rows
        if held >= rows or len(run) >= JOIN_BATCHES or i == pf.metadata.num_row_groups - 1:
            yield from pf.iter_batches(batch_size=rows, row_groups=run, columns=columns)
            run, held = [], 0


def _coalesced(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The batches joined into ones of at least ``rows`` rows, or of JOIN_BATCHES batches (the
    last may be shorter). ``iter_batches`` yields at least one batch per row group, and the
    per-batch costs (string codes, checks, a pandas groupby) followed the row groups, not the
    rows: a file written one row group per cycle (64k rows) took 41 s instead of 2 s. Each batch
    held costs memory of its own (its buffers, its dictionaries), hence the cap on their number."""
    held: list[pa.RecordBatch] = []
    n = 0
    for batch in batches:
        held.append(batch)
        n += batch.num_rows
        if n >= rows or len(held) >= JOIN_BATCHES:
            yield _joined(held)
            held, n = [], 0
    if held:
        yield _joined(held)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    table = pa.Table.from_batches(batches).combine_chunks()  # one chunk a column; dictionaries unified
    return table.to_batches()[0] if table.num_rows else batches[0]


def batch_arrays(batch: pa.RecordBatch, file: str, codes: Mapping[str, Codes]) -> dict[str, np.ndarray]:
    """A batch's columns as numpy arrays: string columns as global ``codes``, ``reached`` as 1 / 0
    / -1 and the per-cycle extra columns as int64 with -1 where null (not recorded); a null in
    another column is refused."""
    out = {}
    for name in batch.schema.names:
        col = batch.column(name)
        if name == "reached":  # null = not recorded on that row, derived there; decided per row, so that
            out[name] = _reached_codes(col)  # batches with and without nulls carry the same keys
        elif name in PER_CYCLE:
            out[name] = per_cycle_values(file, col, name, lowest=PER_CYCLE[name])
        elif name in codes:  # string_view (read as such where no dictionary is asked for): as text
            out[name] = codes[name].encode(col.cast(pa.string()) if pa.types.is_string_view(col.type) else col,
                                           name, file)
        else:
            if col.null_count:
                raise TraceFileError(f"{file}: column {name} has null values")
            out[name] = signed_values(file, col, name).to_numpy(zero_copy_only=False)
    return out


def _reached_codes(col: pa.Array) -> np.ndarray:
    """A ``reached`` column as int8: 1 / 0, -1 where null (not recorded; also a null-type column)."""
    return col.cast(pa.int8()).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int8)


def source_codes(file: str, codes: np.ndarray, names: list[str]) -> np.ndarray:
    """``source`` codes (values ``names``) as topology source codes; an unknown value is refused."""
    lookup = np.array([SOURCE_NAMES.index(n) if n in SOURCE_NAMES else -1 for n in names] or [-1], dtype=np.int64)
    out = lookup[codes]
    if np.any(out < 0):
        bad = sorted({names[c] for c in np.unique(codes) if lookup[c] < 0})
        raise TraceFileError(f"{file}: unknown source value(s) {', '.join(map(repr, bad))}")
    return out


@dataclass(frozen=True)
class Cycles:
    """Where the cycles of a batch lie: each cycle's root row (``roots``) and row count (``lens``),
    each row's root row (``start``) and parent row (``gparent``, a root its own), non-root rows."""

    roots: np.ndarray
    lens: np.ndarray
    start: np.ndarray
    nonroot: np.ndarray
    gparent: np.ndarray


def cycle_rows(file: str, node: np.ndarray, parent: np.ndarray, source: np.ndarray) -> Cycles:
    """The cycles of a batch that starts with a root: rows grouped by cycle, nodes in index order,
    every parent an earlier node, the root's -1 (``source``: codes, ROOT on roots only)."""
    roots = np.flatnonzero(node == 0)
    lens = np.diff(np.append(roots, node.shape[0]))
    start = np.repeat(roots, lens)
    if not np.array_equal(node, np.arange(node.shape[0]) - start):
        raise TraceFileError(f"{file}: rows are not grouped by cycle with nodes in index order (root first)")
    nonroot = node > 0
    if np.any(nonroot & ((parent < 0) | (parent >= node))) or np.any(source[~nonroot] != ROOT) \
            or np.any(source[nonroot] == ROOT):
        raise TraceFileError(f"{file}: bad tree rows (a parent that is not an earlier node, or a misplaced root)")
    root_parent = parent[~nonroot]
    if np.any(root_parent != -1):  # e.g. an unsigned column's 2**32 - 1, which no index reading makes -1
        raise TraceFileError(f"{file}: column parent is {root_parent[root_parent != -1][0]} on a root row "
                             "(the root's parent is -1)")
    gparent = np.where(nonroot, start + parent, np.arange(node.shape[0]))
    return Cycles(roots, lens, start, nonroot, gparent)


def check_node_values(file: str, *, depth: np.ndarray, gparent: np.ndarray, nonroot: np.ndarray, rank: np.ndarray,
                      accepted: np.ndarray, match: np.ndarray, reached: np.ndarray | None) -> None:
    """What the schema cannot say about a batch of whole cycles (``gparent``: each row's parent row,
    a root its own): depths follow the parents, ranks are not negative, the root is accepted, and a
    node is accepted only if it matched under an accepted parent, and at most one child of a node is
    (the accepted nodes are one path: the walk steps to one child) (``reached``, where recorded, is the
    parent's ``accepted``; -1: not recorded on that row). A file that breaks them would fit to
    numbers that mean nothing."""
    if np.any(depth[~nonroot] != 0):  # the fit bins spine and transition nodes by depth from 1
        raise TraceFileError(f"{file}: column depth is {depth[~nonroot][depth[~nonroot] != 0][0]} on a root row "
                             "(the root's depth is 0)")
    if np.any(depth[nonroot] != depth[gparent[nonroot]] + 1):
        raise TraceFileError(f"{file}: column depth disagrees with the parent links")
    if np.any(rank < 0):
        raise TraceFileError(f"{file}: column rank has negative values")
    if not np.all(accepted[~nonroot]):
        raise TraceFileError(f"{file}: a cycle's root row is not accepted (the root always is)")
    if np.any(nonroot & accepted & ~(match & accepted[gparent])):
        raise TraceFileError(f"{file}: column accepted marks a node that did not match, or whose parent was not accepted")
    if np.any(np.bincount(gparent[nonroot & accepted], minlength=1) > 1):
        raise TraceFileError(f"{file}: column accepted marks two children of one node (the accepted nodes are one path)")
    if reached is not None and np.any((reached != (accepted[gparent] | ~nonroot)) & (reached >= 0)):
        raise TraceFileError(f"{file}: column reached disagrees with the parent rows' accepted")


def signed_values(file: str, col: pa.Array, name: str) -> pa.Array:
    """An integer column as a signed one: an unsigned width is a legitimate choice of the writer,
    but the readers mark "not recorded" with -1 and subtract rows, so it becomes int64; a value
    past int64 is refused rather than wrapped to a negative number (-1, the root's parent)."""
    if not pa.types.is_unsigned_integer(col.type):
        return col
    high = pc.max(col).as_py()  # nulls skipped; None when nothing is recorded
    if high is not None and high > np.iinfo(np.int64).max:
        raise TraceFileError(f"{file}: column {name} has values too large (found {high})")
    return col.cast(pa.int64())


def per_cycle_values(file: str, col: pa.Array, name: str, *, lowest: int) -> np.ndarray:
    """A per-cycle extra column (``spine_avail``, ``tau``, ``budget``) as int64, null (not recorded)
    as -1; recorded values below ``lowest`` are refused: the regime fit reads them as the match
    length and the cycle's tokens, the fit the budget as the cycle's non-root rows."""
    if pa.types.is_null(col.type):  # a column the recorder left empty: nothing recorded
        return np.full(len(col), -1, np.int64)
    col = signed_values(file, col, name)  # null -> -1 does not fit an unsigned column
    low = pc.min(col).as_py()  # nulls skipped; None when nothing is recorded
    if low is not None and low < lowest:
        raise TraceFileError(f"{file}: column {name} has values below {lowest} (found {low})")
    return col.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def check_same_in_cycle(file: str, name: str, values: np.ndarray, start: np.ndarray) -> None:
    """A per-cycle column holds one value on every row of its cycle (``start``: each row's root row).
    The fit reads it on the root row only, while the regime fit filters rows by ``method`` (or a
    group column) row by row: a row of another value would leave its cycle there, and the parent
    links of the later rows would point at other rows."""
    if np.any(values != values[start]):
        raise TraceFileError(f"{file}: column {name} differs between the rows of one cycle")


def check_cycle_tau(file: str, tau: np.ndarray, start: np.ndarray, roots: np.ndarray,
                    accepted_rows: np.ndarray) -> None:
    """A recorded ``tau`` (-1: not recorded) is the same on every row of its cycle (``start``: each
    row's root row) and at most the cycle's accepted rows (fewer only where EOS or the token cap cut
    the accepted path)."""
    check_same_in_cycle(file, "tau", tau, start)
    if np.any((tau[roots] > accepted_rows) & (tau[roots] != -1)):
        raise TraceFileError(f"{file}: column tau exceeds the accepted rows of its cycle")


def check_budget(file: str, budget: np.ndarray, lens: np.ndarray, describe: Callable[[int], str]) -> None:
    """Where ``budget`` (per cycle; -1: not recorded) is recorded, the cycle has budget + 1 rows: a
    cut (``head(n)``) or a filter that lost a cycle's trailing rows, past its accepted ones, left a
    valid smaller tree that was fitted in silence (``describe(i)``: the i-th cycle, for the line)."""
    bad = np.flatnonzero((budget >= 0) & (budget != lens - 1))
    if bad.size:
        i = int(bad[0])
        rows = lens[i] - 1
        raise TraceFileError(f"{file}: {describe(i)} has {rows} non-root rows, but column budget says {budget[i]}")


def check_cycle_columns(file: str, a: dict[str, np.ndarray], cyc: Cycles, accepted_rows: np.ndarray,
                        describe: Callable[[int], str]) -> None:
    """The per-cycle columns of a batch's arrays ``a`` (strings as codes; -1: not recorded): one
    value on every row of a cycle, ``tau`` within the accepted rows, rows as ``budget`` says."""
    for name in (*SAME_IN_CYCLE, "cycle", "budget"):
        if name in a:
            check_same_in_cycle(file, name, a[name], cyc.start)
    if "tau" in a:
        check_cycle_tau(file, a["tau"], cyc.start, cyc.roots, accepted_rows)
    if "budget" in a:
        check_budget(file, a["budget"][cyc.roots], cyc.lens, describe)
