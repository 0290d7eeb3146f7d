"""Recorded tree shapes of a trace, counted per prompt cluster in bounded memory.

A fit computes the exact E[tau] of every recorded tree once per distinct *shape* (every node's
parent, source and rank), not once per cycle: a trace of a fixed topology has one shape, goose's
adaptive trees a few thousand. :class:`ShapeTally` hashes each cycle's nodes to 64 bits
(splitmix64 of node, parent, source and rank, summed over the cycle's rows, mixed with its length),
keeps the first cycle of each hash as its :class:`Shape`, and sums per (cluster, shape) the count
of cycles and the sum and sum of squares of their observed tau.

Example:
    >>> import numpy as np
    >>> tally = ShapeTally()
    >>> node, parent = np.array([0, 1, 0, 1]), np.array([-1, 0, -1, 0])  # two cycles of root + one child
    >>> source, rank = np.array([0, 1, 0, 1]), np.zeros(4, np.int64)
    >>> tally.add(node, parent, source, rank, np.array([0, 2]), np.array([2, 2]), np.array([0, 1]), np.array([2, 1]))
    >>> shapes, table = tally.table(np.array([0, 1]))
    >>> len(shapes), table["tau_sum"].tolist()
    (1, [2, 1])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._fitarrays import splitmix as _splitmix

MERGE_PARTS = 32  # many files: one small table each, merged every MERGE_PARTS; memory follows clusters x shapes


@dataclass(frozen=True)
class Shape:
    """One recorded tree shape: per-node parent, source code and rank (node 0 = root)."""

    parent: np.ndarray
    source: np.ndarray
    rank: np.ndarray


class ShapeTally:
    """Distinct shapes and, per (cluster, shape), cycles ``n``, ``tau_sum`` and ``tau_sq``."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}  # shape hash -> index into shapes
        self.shapes: list[Shape] = []
        self.parts: list[pd.DataFrame] = []

    def add(self, node, parent, source, rank, roots, lens, cyc_cluster, tau) -> None:
        """Count the cycles that start at rows ``roots`` (``lens`` rows each) of cluster
        ``cyc_cluster`` with observed ``tau``; the per-row arrays are the cycles' nodes in order."""
        if not roots.size:
            return
        h = (node.astype(np.uint64) << np.uint64(40)) ^ ((parent + 1).astype(np.uint64) << np.uint64(20)) \
            ^ (source.astype(np.uint64) << np.uint64(16)) ^ rank.astype(np.uint64)
        cyc_hash = np.add.reduceat(_splitmix(h), roots) ^ _splitmix(lens.astype(np.uint64))
        uniq, first, inverse = np.unique(cyc_hash, return_index=True, return_inverse=True)
        ids = np.empty(uniq.shape[0], dtype=np.int64)
        for j in range(uniq.shape[0]):  # any order: table() numbers shapes by their hashes
            hv, f = int(uniq[j]), int(first[j])
            if hv not in self.ids:
                s, e = roots[f], roots[f] + lens[f]
                self.ids[hv] = len(self.shapes)
                self.shapes.append(Shape(parent[s:e].copy(), source[s:e].copy(), rank[s:e].copy()))
            ids[j] = self.ids[hv]
        df = pd.DataFrame({"cluster": cyc_cluster, "shape": ids[inverse.reshape(-1)],
                           "n": 1, "tau_sum": tau, "tau_sq": tau * tau})
        self.parts.append(df.groupby(["cluster", "shape"], as_index=False).sum())
        if len(self.parts) >= MERGE_PARTS:
            self.parts = [self._sums()]

    def _sums(self) -> pd.DataFrame:
        parts = self.parts or [pd.DataFrame({"cluster": [], "shape": [], "n": [], "tau_sum": [], "tau_sq": []},
                                            dtype=np.int64)]
        return pd.concat(parts, ignore_index=True).groupby(["cluster", "shape"], as_index=False).sum()

    def table(self, new_cluster: np.ndarray) -> tuple[tuple[Shape, ...], pd.DataFrame]:
        """The shapes, numbered in the order of their hashes (as clusters by value: independent of
        the row order), and the shape table with clusters numbered by ``new_cluster``."""
        order = np.argsort(np.array(list(self.ids), dtype=np.uint64))  # ids: in shape order
        new_shape = np.empty(len(self.shapes), np.int64)
        new_shape[order] = np.arange(len(self.shapes))
        table = self._sums()
        table["cluster"] = new_cluster[table["cluster"].to_numpy()]
        table["shape"] = new_shape[table["shape"].to_numpy()]
        # both renumberings are bijections, so the (cluster, shape) pairs stay unique: a sort suffices
        return tuple(self.shapes[i] for i in order), table.sort_values(["cluster", "shape"], ignore_index=True)
