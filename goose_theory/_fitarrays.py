"""Small array helpers of :mod:`goose_theory.fitcounts`: global string codes, growing count
grids and the 64-bit mixer used to hash tree shapes."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .traceio import TraceFileError

CAP = 64  # depth / rank bins; deeper or higher values share the last bin
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def splitmix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


class Codes:
    """Global integer codes for the values of one string column across batches and files."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[str] = []

    def encode(self, column: pa.Array, name: str, file: str) -> np.ndarray:
        if column.null_count:
            raise TraceFileError(f"{file}: column {name} has null values")
        if not pa.types.is_dictionary(column.type):
            column = column.dictionary_encode()
        lookup = np.array([self._code(v) for v in column.dictionary.to_pylist()] or [0], dtype=np.int64)
        return lookup[column.indices.to_numpy(zero_copy_only=False)]

    def _code(self, value: str) -> int:
        if value not in self.index:
            self.index[value] = len(self.values)
            self.values.append(value)
        return self.index[value]


class Grid:
    """A (clusters x width) int64 table that grows with the number of clusters (width CAP for
    one curve; 3 * CAP for a curve per parent source)."""

    def __init__(self, width: int = CAP) -> None:
        self.width = width
        self.data = np.zeros((64, width), dtype=np.int64)

    def add(self, n_clusters: int, keys: np.ndarray) -> None:
        if n_clusters > self.data.shape[0]:
            grown = np.zeros((max(n_clusters, 2 * self.data.shape[0]), self.width), dtype=np.int64)
            grown[: self.data.shape[0]] = self.data
            self.data = grown
        flat = np.bincount(keys, minlength=n_clusters * self.width)
        self.data[:n_clusters] += flat.reshape(n_clusters, self.width)
