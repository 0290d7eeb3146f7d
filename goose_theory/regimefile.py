"""The regime file (``topology-<set>-regimes.json``): its extra trees and its writer.

A regime file is a ``goose-topology/1`` file whose own tree is drafted in matched cycles and whose
``meta.regimes`` may hold: ``unmatched`` (drafted when the matcher offers nothing), ``confident``
(with ``min_match``: drafted for a confident match at least that long) and ``matched`` (the
matched tree with spare slots beyond the file's budget; the file's own tree, of exactly the
budget, sets how many nodes the runtime verifies), or instead of ``matched``, ``matched_by_length``:
one matched tree per offered match length (:mod:`goose_theory.regimelength`), which the export
writes by default (``regime.BY_LENGTH``). :mod:`goose_theory.regime` writes them.
"""
from __future__ import annotations

import dataclasses

from .allocation import PAPER_BYPASS_LEN
from .topology import SCHEMA, Topology, TopologyError, topology_from_dict

MIN_MATCH = PAPER_BYPASS_LEN  # a confident match this long: goose's consensus bypass threshold
REGIME_KEYS = ("unmatched", "confident", "matched", "matched_by_length")


def _entry(topology: Topology, key: str):
    """``meta.regimes[key]`` as stored, None when absent; a ``regimes`` that is not an object is a
    TopologyError (one line for the CLI), not a TypeError."""
    regimes = topology.meta.get("regimes", {})
    if not isinstance(regimes, dict):
        raise TopologyError(f"regimes must be an object, got {type(regimes).__name__}")
    unknown = sorted(set(regimes) - set(REGIME_KEYS))
    if unknown:  # a typo ("unmatchd") would otherwise draft the file's own tree in silence
        raise TopologyError(f"regimes: unknown entry {unknown[0]!r} (expected {', '.join(REGIME_KEYS)})")
    value = regimes.get(key)
    if key in regimes and not value:
        raise TopologyError(f"regimes.{key} is empty")
    return value


def check_regimes(topology: Topology) -> None:
    """Parse every tree of a regime file (each is a topology, checked as one); raises TopologyError.
    :func:`goose_theory.topology.topology_from_dict` calls it, so every reader of a file checks them."""
    if "regimes" in topology.meta:
        if topology.meta["regimes"] == {}:
            raise TopologyError("regimes is empty (leave it out for a plain file)")
        unmatched_topology(topology), confident_topology(topology)
        matched_topology(topology), matched_by_length(topology)


def _spec(topology: Topology, key: str) -> dict | None:
    """``meta.regimes[key]`` as a dict, None when absent; a malformed entry is a TopologyError."""
    spec = _entry(topology, key)
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise TopologyError(f"regimes.{key} must be a topology object, got {type(spec).__name__}")
    return spec


def _tree(topology: Topology, key: str) -> Topology | None:
    spec = _spec(topology, key)
    return None if spec is None else _one_tree(spec, f"regimes.{key}")


def _one_tree(spec: dict, where: str) -> Topology:
    """One tree of a regime file: this file's format (its schema, if it names one), no regimes of its own."""
    if spec.get("schema", SCHEMA) != SCHEMA:
        raise TopologyError(f"{where}: schema {spec['schema']!r} is not {SCHEMA!r}")
    if "regimes" in spec:
        raise TopologyError(f"{where} holds regimes of its own")
    try:
        return topology_from_dict({**spec, "schema": SCHEMA})
    except TopologyError as exc:  # say which tree: "node 1: ..." alone reads as the file's own nodes
        raise TopologyError(f"{where}: {exc}") from None


def unmatched_topology(topology: Topology) -> Topology | None:
    """The tree a two-regime topology file drafts in cycles without a context match (its
    ``regimes.unmatched``), or None for a plain file. Raises ``TopologyError`` if it is malformed.

    Example:
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
        >>> u = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0)])
        >>> unmatched_topology(t.with_meta(regimes={"unmatched": u.to_dict()})).budget, unmatched_topology(t)
        (1, None)
    """
    tree = _tree(topology, "unmatched")
    if tree is not None and tree.spine_length:  # the matcher offered nothing: no spine token to draft
        raise TopologyError("regimes.unmatched holds spine nodes, which an unmatched cycle cannot draft "
                            "(the matcher offered no token); its tree is transitions only")
    return tree


def confident_topology(topology: Topology) -> tuple[Topology, int] | None:
    """The tree a regime file drafts when the match is confident (several n-gram lengths agree)
    and offers at least ``min_match`` tokens (its ``regimes.confident``), with that length; None
    for a file without one. Raises ``TopologyError`` if it is malformed.

    Example:
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
        >>> c = {**t.to_dict(), "min_match": 8}
        >>> tree, n = confident_topology(t.with_meta(regimes={"confident": c})); tree.budget, n
        (1, 8)
    """
    spec = _spec(topology, "confident")
    if spec is None:
        return None
    tree = _one_tree(spec, "regimes.confident")
    n = spec.get("min_match", MIN_MATCH)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise TopologyError(f"regimes.confident.min_match must be a positive integer, got {n!r}")
    return tree, n


def matched_topology(topology: Topology) -> Topology | None:
    """The matched tree with spare slots of a regime file (its ``regimes.matched``): drafted in
    matched cycles in place of the file's own tree, filled breadth-first up to the file's own
    budget, so spare slots are placed where spine slots beyond a short match drop out. None for
    a file without one. Raises ``TopologyError`` if it is malformed.

    Example:
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
        >>> s = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
        >>> matched_topology(t.with_meta(regimes={"matched": s.to_dict()})).budget, matched_topology(t)
        (2, None)
    """
    return _tree(topology, "matched")


def matched_by_length(topology: Topology) -> tuple[Topology, ...] | None:
    """A regime file's matched trees by match length (its ``regimes.matched_by_length``: a list,
    entry L - 1 drafted for a non-confident match of L tokens, the last one for any longer match;
    :mod:`goose_theory.regimelength`), or None. Raises ``TopologyError`` if it is malformed.

    Example:
        >>> t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
        >>> one = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "transition", 0)])
        >>> trees = matched_by_length(t.with_meta(regimes={"matched_by_length": [one.to_dict(), t.to_dict()]}))
        >>> [x.budget for x in trees], matched_by_length(t)
        ([2, 1], None)
    """
    specs = _entry(topology, "matched_by_length")
    if specs is None:
        return None
    if not isinstance(specs, list) or not all(isinstance(x, dict) for x in specs):
        raise TopologyError("regimes.matched_by_length must be a list of topology objects")
    return tuple(_one_tree(x, f"regimes.matched_by_length[{i}]") for i, x in enumerate(specs))


def regime_pair_path(path: str) -> str:
    """Where the regime file beside the topology file ``path`` goes (``x.json`` -> ``x-regimes.json``)."""
    return path[: -len(".json")] + "-regimes.json"


def save_regime_topologies(single: Topology, pair: Topology, path: str) -> str:
    """Write ``single`` to ``path`` (a ``.json`` file) and ``pair`` beside it as ``*-regimes.json``
    (each atomically); returns the pair's path."""
    from .topology import save_topology

    pair_path = regime_pair_path(path)
    save_topology(single, path)
    save_topology(pair, pair_path)
    return pair_path


def with_fit_provenance(single: Topology, pair: Topology, provenance: dict) -> tuple[Topology, Topology]:
    """``single`` and ``pair`` as they are exported in place of a fit's recommended tree
    (``fit-acceptance --regimes``, ``goose loop``): both carry the fit's ``provenance`` (which traces,
    fitted values) plus what the regime fit adds to ``single``'s."""
    prov = {**provenance, **(single.meta.get("provenance") or {})}
    return single.with_meta(provenance=prov), pair.with_meta(provenance=prov)


def without_interval(topology: Topology) -> Topology:
    """``topology`` without a ``predicted_ci95``: for a tree derived from an exported one (a replay
    variant), whose prediction is its own and whose interval is not the file's."""
    if "predicted_ci95" not in topology.meta:
        return topology
    return dataclasses.replace(topology, meta={k: v for k, v in topology.meta.items() if k != "predicted_ci95"})
