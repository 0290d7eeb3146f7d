"""Exact evaluation of many recorded tree shapes at once.

A fit scores every distinct recorded tree (2,123 in the shipped traces) under two or three
fitted acceptances. Building a :class:`~goose_theory.topology.Topology` per shape and calling
:func:`~goose_theory.yields.exact_yield` and :func:`~goose_theory.bound.paper_lower_bound` on
each cost most of a fit's time in Python overhead; here the shapes are packed into flat arrays
once (validated against the topology contract in the same pass) and each acceptance is one
numba call over all of them. The kernels are the per-tree ones, so the numbers are the same to
the last bit (tested), including the per-tree exclusive -> independent fallback of
:func:`~goose_theory.yields.evaluate_with_fallback`.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> from goose_theory.fitshapes import Shape
    >>> chain = Shape(np.array([-1, 0, 1]), np.array([0, 1, 1]), np.array([0, 0, 0]))
    >>> shapes = RecordedShapes.pack([chain])
    >>> result = shapes.evaluate(Acceptance.parse(0.5, 0.1))
    >>> result.expected.tolist(), result.fell_back.tolist()   # 1 + 0.5 + 0.25
    ([1.75], [False])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ._shape_kernels import _evaluate, _prepare
from .acceptance import EXCLUSIVE_TOLERANCE, Acceptance
from .fitshapes import Shape
from .topology import Topology, TopologyError


@dataclass(frozen=True)
class ShapeEvaluation:
    """Per shape (NaN where the shape breaks the topology contract): E[tau], Var[tau], the
    paper's bound with lbar from the topology, and whether the exclusive model was infeasible on
    it (then all three are under the independent model)."""

    expected: np.ndarray
    variance: np.ndarray
    bound: np.ndarray
    fell_back: np.ndarray


@dataclass(frozen=True, eq=False)
class RecordedShapes:
    """Recorded tree shapes packed back to back (see :mod:`goose_theory._shape_kernels`); build
    with :meth:`pack`. Evaluations are memoised per acceptance: a group's goodness of fit,
    calibration and bound check ask for the same ones."""

    shapes: tuple[Shape, ...]
    node_at: np.ndarray
    child_at: np.ndarray
    parent: np.ndarray
    source: np.ndarray
    rank: np.ndarray
    depth: np.ndarray
    child_start: np.ndarray
    child_index: np.ndarray
    valid: np.ndarray  # per shape: passes the topology contract
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def pack(cls, shapes: Sequence[Shape]) -> RecordedShapes:
        sizes = np.array([s.parent.shape[0] for s in shapes], dtype=np.int64)
        node_at = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        child_at = np.concatenate([[0], np.cumsum(np.maximum(sizes - 1, 0))]).astype(np.int64)

        def flat(name: str) -> np.ndarray:
            parts = [np.asarray(getattr(s, name), dtype=np.int64) for s in shapes]
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        parent, source, rank = flat("parent"), flat("source"), flat("rank")
        depth = np.zeros(parent.shape[0], np.int64)
        child_start = np.zeros(parent.shape[0] + len(shapes), np.int64)
        child_index = np.zeros(int(child_at[-1]), np.int64)
        valid = np.zeros(len(shapes), dtype=np.bool_)
        _prepare(node_at, child_at, parent, source, rank, depth, child_start, child_index, valid)
        return cls(tuple(shapes), node_at, child_at, parent, source, rank, depth, child_start, child_index, valid)

    @classmethod
    def from_topologies(cls, topologies: Sequence[Topology]) -> RecordedShapes:
        """The same for :class:`Topology` objects (tests, what-if callers)."""
        return cls.pack([Shape(t.parent_array, t.source_array, t.rank_array) for t in topologies])

    def __len__(self) -> int:
        return len(self.shapes)

    def topology(self, s: int) -> Topology | None:
        """Shape ``s`` as a :class:`Topology` (None where it breaks the contract)."""
        if not self.valid[s]:
            return None
        a, b = self.node_at[s], self.node_at[s + 1]
        limit = int(self.depth[a:b].max())
        try:
            return Topology(tuple(self.parent[a:b].tolist()), tuple(self.source[a:b].tolist()),
                            tuple(self.rank[a:b].tolist()), max_depth=limit, max_spine=limit)
        except TopologyError:  # the kernel's check and _validate disagree: a bug (tested not to)
            raise AssertionError(f"recorded shape {s} passed the packed check but not the topology contract") from None

    def evaluate(self, acceptance: Acceptance) -> ShapeEvaluation:
        """Every shape under ``acceptance`` (memoised)."""
        if acceptance not in self._memo:
            e, v, b = (np.empty(len(self.shapes)) for _ in range(3))
            fell = np.zeros(len(self.shapes), dtype=np.bool_)
            _evaluate(self.node_at, self.child_at, self.parent, self.source, self.rank, self.depth, self.child_start,
                      self.child_index, self.valid, acceptance.p_s_array, acceptance.p_t_matrix,
                      acceptance.independent, EXCLUSIVE_TOLERANCE, e, v, b, fell)
            self._memo[acceptance] = ShapeEvaluation(e, v, b, fell)
        return self._memo[acceptance]
