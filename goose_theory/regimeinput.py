"""Trace input of the two-regime fit (:mod:`goose_theory.regimefit`): the node rows and metadata of
each file, refused in one line (naming the file) where the regime fit cannot read them soundly.

Beyond the plain fit's checks, the regime fit needs the recorder's ``config`` metadata: its
method list gives each method's budget (the fit uses the methods nearest the exported budget),
the static methods' trees (slot fill) and which goose records confident matches (the confident
regime). The ``method`` column alone holds labels, not budgets of unsuffixed labels or the trees
of ``topology:FILE`` methods, so there is no sound fallback.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from .traceio import TraceFileError, open_trace, trace_metadata

COLUMNS = ["benchmark", "method", "prompt_id", "cycle", "node", "parent", "source", "rank", "depth", "match",
           "reached", "spine_avail", "tau"]


def read_frames(files: Sequence[str], *, benchmark: str | None = None) -> list[tuple[pd.DataFrame, dict]]:
    """(node rows, trace metadata) per file, optionally only one benchmark's rows."""
    out = []
    for path in files:
        pf = open_trace(path)
        missing = [c for c in COLUMNS if c not in pf.schema_arrow.names]
        if missing:
            raise ValueError(f"{path}: no {', '.join(missing)} column (recorded before it existed; re-record "
                             f"the traces for the two-regime fit)")
        meta = trace_metadata(pf)
        methods = config_methods(path, meta)
        thresholded = [str(m.get("label")) for m in methods if (m.get("min_score") or 0) > 0]
        if thresholded:  # fill_rates would read the threshold's cuts as a sparse adjacency table
            raise ValueError(f"{path}: {', '.join(thresholded)} recorded with --min-score; the regime fit "
                             f"needs traces of goose without it")
        extra = ["accepted"] + [c for c in ("bypass",) if c in pf.schema_arrow.names]  # accepted: for a null reached
        frame = pf.read(columns=COLUMNS + extra).to_pandas()
        check_parents(path, frame)
        if benchmark is not None:
            frame = frame[frame["benchmark"] == benchmark].reset_index(drop=True)
        if len(frame):
            out.append((frame, meta))
    return out


def config_methods(path: str, meta: dict[str, Any]) -> list[dict]:
    """The method list of a trace's ``config`` metadata, refused in one line where it is missing,
    null or not a list of objects: without it the fit found no budgets, pooled every method (``ar``
    included) and dropped the confident regime, silently (predicted tau 3.0008 -> 2.9403 on
    stdlib-b8 with its config removed)."""
    config = meta.get("config")
    methods = config.get("methods") if isinstance(config, dict) else None
    if not isinstance(methods, list) or not methods or not all(isinstance(m, dict) for m in methods):
        found = "no config" if config is None else "a config without a list of methods"
        raise TraceFileError(f"{path}: {found} in the parquet metadata; the two-regime fit needs the recorder's "
                             "config (each method's budget and tree) to choose the methods it fits; restore it "
                             "from the original trace or re-record")
    return methods


def check_parents(path: str, frame: pd.DataFrame) -> None:
    """The root's parent is -1, another node's an earlier node: ``regimefit._annotate`` indexes rows by
    them (an unsigned column's root, 2**32 - 1, ended in an IndexError)."""
    node = frame["node"].to_numpy(dtype=float, na_value=np.nan)  # float: nulls and any width compare
    parent = frame["parent"].to_numpy(dtype=float, na_value=np.nan)
    ok = np.where(node == 0, parent == -1, (parent >= 0) & (parent < node))
    if not ok.all():
        i = int(np.argmin(ok))
        raise TraceFileError(f"{path}: column parent is {parent[i]:.0f} on row {i} (node {node[i]:.0f}): "
                             "the root's parent is -1, another node's an earlier node")
