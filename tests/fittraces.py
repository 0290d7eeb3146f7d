"""Synthetic traces shared by ``tests/test_fit_cli.py`` and ``tests/test_fit_cli_regimes.py``: a good
file of two methods (one whose acceptance stops at depth 1), and rewrites of it with a column
dropped, another version or fewer rows."""
from __future__ import annotations

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
