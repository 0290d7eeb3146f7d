"""Speculation-tree topologies and the ``goose-topology/1`` JSON contract.

A tree is a list of nodes; node 0 is the root (the anchor token). Every other node has a
``parent`` (an index smaller than its own, so cycles cannot be written down), a ``source``
(``"spine"`` or ``"transition"``) and a ``rank`` (0-based rank among the siblings of the same
source under the same parent; spine rank is 0). Spine nodes form one chain that starts at the
root. Budget = number of non-root nodes. Depth: root 0. ``max_depth`` bounds every transition
node; the spine is bounded by ``max_spine`` instead (paper: 6 and 20).

Children are visited in *priority order*: the spine child first, then transition children by
rank. That is the order of UnifiedGreedyWalk and of the independent acceptance model.

Example:
    >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    >>> t.budget, t.depth.tolist(), t.spine_length
    (2, [0, 1, 1], 1)
"""
from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Mapping

import numpy as np

from .errors import InputError
from .fileio import atomic_output, write_text
from .jsonio import load_json_file, unknown_key
from .topometa import meta_problem

SCHEMA = "goose-topology/1"
ROOT, SPINE, TRANSITION = 0, 1, 2
SOURCE_NAMES = ("root", "spine", "transition")
_SOURCE_CODES = {name: code for code, name in enumerate(SOURCE_NAMES)}
NODE_KEYS = ("parent", "source", "rank")  # what to_dict writes per node
MAX_RANK = 32767  # the traces store rank as int16; an adjacency list is never that long
MAX_FILE_NODES = 100_000  # ten times goose optimize's largest budget; a verification takes at most 1024
# The paper's limits, every builder's and the runtime's defaults: transition branches reach depth
# 6, the spine takes up to 20 matched tokens (the matcher's continuation), ranks come from the
# adjacency table's top 10 successors.
PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K = 6, 20, 10


class TopologyError(InputError):
    """An invalid topology; the message is one line that names the problem."""


@dataclass(frozen=True)
class Topology:
    """An immutable speculation tree; build it with :meth:`from_nodes` or :func:`load_topology`."""

    parent: tuple[int, ...]
    source: tuple[int, ...]  # ROOT, SPINE or TRANSITION
    rank: tuple[int, ...]
    max_depth: int = PAPER_MAX_DEPTH
    max_spine: int = PAPER_MAX_SPINE
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        _validate(self.parent, self.source, self.rank, self.max_depth, self.max_spine)

    @classmethod
    def from_nodes(cls, nodes: Iterable[tuple[int, str | int, int]], *, max_depth: int = PAPER_MAX_DEPTH,
                   max_spine: int = PAPER_MAX_SPINE, meta: Mapping[str, Any] | None = None) -> "Topology":
        """Build from ``(parent, source, rank)`` triples; node 0 must be the root."""
        parents, sources, ranks = [], [], []
        for i, (p, s, r) in enumerate(nodes):
            code = _SOURCE_CODES.get(s, None) if isinstance(s, str) else s
            if code not in (ROOT, SPINE, TRANSITION):
                raise TopologyError(f"node {i}: unknown source {s!r} (expected 'spine' or 'transition')")
            parents.append(int(p)); sources.append(int(code)); ranks.append(int(r))
        return cls(tuple(parents), tuple(sources), tuple(ranks), max_depth, max_spine, dict(meta or {}))

    @classmethod
    def root_only(cls, **kwargs: Any) -> "Topology":
        """The empty tree: plain autoregressive decoding (tau = 1)."""
        return cls.from_nodes([(-1, "root", 0)], **kwargs)

    # ---- derived arrays (computed once; the dataclass is frozen) -------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    @property
    def budget(self) -> int:
        return len(self.parent) - 1

    @cached_property
    def parent_array(self) -> np.ndarray:
        return np.asarray(self.parent, dtype=np.int64)

    @cached_property
    def source_array(self) -> np.ndarray:
        return np.asarray(self.source, dtype=np.int64)

    @cached_property
    def rank_array(self) -> np.ndarray:
        return np.asarray(self.rank, dtype=np.int64)

    @cached_property
    def depth(self) -> np.ndarray:
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for i in range(1, self.n_nodes):  # parents come first, so one pass suffices
            depth[i] = depth[self.parent[i]] + 1
        return depth

    @cached_property
    def spine_length(self) -> int:
        return int(sum(1 for s in self.source if s == SPINE))

    @cached_property
    def children(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR children in priority order: ``(start, index)``; node v's children are
        ``index[start[v]:start[v+1]]``, spine child first, then transition by rank."""
        n = self.n_nodes
        order = sorted(range(1, n), key=lambda i: (self.parent[i], self.source[i] != SPINE, self.rank[i]))
        counts = np.bincount(self.parent_array[1:], minlength=n) if n > 1 else np.zeros(n, np.int64)
        start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        return start, np.asarray(order, dtype=np.int64)

    @cached_property
    def child_lists(self) -> tuple[tuple[int, ...], ...]:
        """:attr:`children` as plain tuples per node (what a per-cycle Python builder wants)."""
        start, order = self.children
        flat = order.tolist()
        return tuple(tuple(flat[start[v]:start[v + 1]]) for v in range(self.n_nodes))

    @cached_property
    def first_level_widths(self) -> np.ndarray:
        """w_i: transition children of the root (i = 0) and of spine node i (i = 1..m)."""
        spine_chain = self.spine_chain
        widths = np.zeros(len(spine_chain), dtype=np.int64)
        pos = {node: i for i, node in enumerate(spine_chain)}
        for i in range(1, self.n_nodes):
            if self.source[i] == TRANSITION and self.parent[i] in pos:
                widths[pos[self.parent[i]]] += 1
        return widths

    @cached_property
    def spine_chain(self) -> tuple[int, ...]:
        """Node indices of the root followed by the spine nodes in depth order."""
        chain = [0]
        spine_child = {self.parent[i]: i for i in range(1, self.n_nodes) if self.source[i] == SPINE}
        while chain[-1] in spine_child:
            chain.append(spine_child[chain[-1]])
        return tuple(chain)

    # ---- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        nodes = [{"parent": p, "source": SOURCE_NAMES[s], "rank": r}
                 for p, s, r in zip(self.parent, self.source, self.rank)]
        out: dict[str, Any] = {"schema": SCHEMA, "budget": self.budget, "max_depth": self.max_depth,
                               "max_spine": self.max_spine}
        out.update({k: v for k, v in self.meta.items() if k not in out})
        out["nodes"] = nodes
        return out

    def with_meta(self, **meta: Any) -> "Topology":
        """The same tree with ``meta`` merged into its metadata. Not validated again (the nodes
        are this valid tree's), and the derived arrays computed so far come along: an optimizer
        scores a tree, then labels it."""
        merged = dict(self.meta); merged.update(meta)
        twin = copy.copy(self)
        object.__setattr__(twin, "meta", merged)
        return twin


def _validate(parent, source, rank, max_depth, max_spine) -> None:
    n = len(parent)
    if not (len(source) == len(rank) == n):
        raise TopologyError("parent, source and rank must have the same length")
    if n == 0:
        raise TopologyError("a topology needs at least the root node")
    if parent[0] != -1 or source[0] != ROOT:
        raise TopologyError("node 0 must be the root (parent -1, source 'root')")
    for name, value in (("max_depth", max_depth), ("max_spine", max_spine)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TopologyError(f"{name} must be a non-negative integer, got {value!r}")
    depth = [0] * n
    spine_child_of: set[int] = set()
    ranks_seen: set[tuple[int, int]] = set()
    for i in range(1, n):
        p, s, r = parent[i], source[i], rank[i]
        if not 0 <= p < i:
            raise TopologyError(f"node {i}: parent {p} is not an earlier node (parents must precede "
                                f"children, so cycles and dangling parents are rejected)")
        if s == ROOT:
            raise TopologyError(f"node {i}: only node 0 may be the root")
        if s not in (SPINE, TRANSITION):
            raise TopologyError(f"node {i}: unknown source code {s!r} "
                                f"(expected {SPINE} spine or {TRANSITION} transition)")
        if not 0 <= r <= MAX_RANK:
            raise TopologyError(f"node {i}: rank {r} is {'negative' if r < 0 else f'above {MAX_RANK}'}")
        depth[i] = depth[p] + 1
        if s == SPINE:
            if p != 0 and source[p] != SPINE:
                raise TopologyError(f"node {i}: a spine node must hang on the root or a spine node, "
                                    f"not on {SOURCE_NAMES[source[p]]} node {p}")
            if p in spine_child_of:
                raise TopologyError(f"node {i}: node {p} already has a spine child (the spine must not fork)")
            if r != 0:
                raise TopologyError(f"node {i}: spine rank must be 0, got {r}")
            spine_child_of.add(p)
            if depth[i] > max_spine:
                raise TopologyError(f"node {i}: spine depth {depth[i]} exceeds max_spine {max_spine}")
        else:
            if (p, r) in ranks_seen:
                raise TopologyError(f"node {i}: node {p} already has a transition child of rank {r}")
            ranks_seen.add((p, r))
            if depth[i] > max_depth:
                raise TopologyError(f"node {i}: transition depth {depth[i]} exceeds max_depth {max_depth}")


def _node_triple(i: int, node: Any) -> tuple[int, str, int]:
    """(parent, source, rank) of the file's ``i``-th node, checked; raises :class:`TopologyError`."""
    if not isinstance(node, dict):
        raise TopologyError(f"node {i}: must be an object with parent, source and rank")
    problem = unknown_key(node, NODE_KEYS, "a node")
    if problem:  # a "depth" that contradicts the parents was ignored unsaid (fuzz review): depths follow from them
        raise TopologyError(f"node {i}: {problem}")
    # a transition's rank says which candidate it takes, so it must be given; a spine node's is 0
    p, s = node.get("parent"), node.get("source")
    p = -1 if p is None and i == 0 else p  # the root's parent may be left out, or null
    r = node.get("rank", None if s == "transition" else 0)
    if r is None:
        raise TopologyError(f"node {i}: a transition node needs its rank (which adjacency candidate it takes)")
    for key, value in (("parent", p), ("rank", r)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TopologyError(f"node {i}: {key} must be an integer, got {value!r}")
    if not isinstance(s, str) or s not in _SOURCE_CODES:  # a list or an object is unhashable: no dict lookup
        raise TopologyError(f"node {i}: unknown source {s!r} (expected 'spine' or 'transition')")
    if i == 0 and r != 0:
        raise TopologyError(f"node 0: the root's rank must be 0, got {r!r}")
    return p, s, r


def topology_from_dict(data: Any) -> Topology:
    """Parse the ``goose-topology/1`` JSON object; raises :class:`TopologyError`."""
    if not isinstance(data, dict):
        raise TopologyError("a topology file must hold a JSON object")
    if "schema" not in data:
        raise TopologyError(f"no 'schema' key (expected {SCHEMA!r}): not a topology file")
    if data["schema"] != SCHEMA:
        raise TopologyError(f"unknown schema {data['schema']!r} (expected {SCHEMA!r})")
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise TopologyError("'nodes' must be a non-empty list")
    if len(nodes) > MAX_FILE_NODES + 1:  # a 3.5M-node chain took yield 26 s and 2.3 GB, then printed 3.5M pmf rows
        raise TopologyError(f"{len(nodes) - 1} nodes past the root: more than the {MAX_FILE_NODES} a file holds here")
    triples = [_node_triple(i, node) for i, node in enumerate(nodes)]
    meta = {k: v for k, v in data.items() if k not in ("schema", "nodes", "max_depth", "max_spine", "budget")}
    topo = Topology.from_nodes(triples, max_depth=data.get("max_depth", 6),
                               max_spine=data.get("max_spine", 20), meta=meta)
    if "budget" in data and type(data["budget"]) is not int:  # true == 1 == 1.0
        raise TopologyError(f"'budget' must be a whole number of nodes, got {data['budget']!r}")
    if "budget" in data and data["budget"] != topo.budget:
        raise TopologyError(f"'budget' is {data['budget']!r} but the file has {topo.budget} non-root "
                            f"node{'' if topo.budget == 1 else 's'}")
    if "regimes" in meta:  # a regime file's other trees are checked on load too (imported here: it imports us)
        from .regimefile import check_regimes
        check_regimes(topo)
    problem = meta_problem(meta)
    if problem:
        raise TopologyError(f"meta: {problem}")
    return topo


def load_topology(path: str | os.PathLike) -> Topology:
    """Read and validate a topology JSON file; every failure is a one-line TopologyError."""
    return load_json_file(path, topology_from_dict, TopologyError)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def json_text(data: Any) -> str:
    """The project's JSON file text: indented, numpy scalars and arrays as plain numbers, no NaN."""
    return json.dumps(data, indent=1, default=_json_default, allow_nan=False) + "\n"


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write JSON to a temp file beside ``path`` and rename it over: never a half file."""
    text = json_text(data)
    with atomic_output(path, ".json") as tmp:
        write_text(tmp, text)


def save_topology(topology: Topology, path: str | os.PathLike) -> None:
    """Write ``topology`` as ``goose-topology/1`` JSON, atomically."""
    write_json_atomic(path, topology.to_dict())

