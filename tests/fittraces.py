"""Trace helpers shared by the fit tests: a good synthetic file of two methods (one whose acceptance
stops at depth 1), rewrites of it with a column dropped, another version or fewer rows, a column
replaced in a table, and a table's rows split by cycle."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from goose_theory.synthetic import SyntheticSpec, write_synthetic
from tests.conftest import TREE


def good_trace(path):
    """``path``, written: 12 prompts x 40 cycles of TREE for ``goose`` and for ``broken`` (run r2)."""
    specs = [SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=12, cycles=40, method="goose"),
             SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=12, cycles=40, method="broken", run_id="r2",
                           max_accepted_depth=1)]
    write_synthetic(path, specs, seed=11)
    return path


def rewrite(src, dst, *, drop=None, version=None, rows=None):
    """``src`` copied to ``dst`` without column ``drop``, with trace version ``version``, or cut to ``rows``."""
    table = pq.read_table(src)
    meta = dict(table.schema.metadata)
    if drop:
        table = table.drop_columns([drop])
    if version:
        meta[b"goose_trace_version"] = version.encode()
    if rows is not None:
        table = table.slice(0, rows)
    pq.write_table(table.replace_schema_metadata(meta), dst)
    return dst


def with_column(table: pa.Table, name: str, values) -> pa.Table:
    """``table`` with column ``name`` replaced by ``values`` (of the column's type)."""
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, type=table.schema.field(i).type))


def cycle_rows(table: pa.Table) -> list[np.ndarray]:
    """The row indices of each cycle of ``table``, in order."""
    node = table["node"].to_numpy()
    roots = np.flatnonzero(node == 0)
    return np.split(np.arange(table.num_rows), roots[1:])
