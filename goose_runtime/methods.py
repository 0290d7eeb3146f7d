"""Decoding methods by name: what the one decoding loop drafts each cycle.

Canonical names: ``ar`` (no draft), ``pld`` (the matched chain), ``tr`` (static adjacency tree,
80 nodes, depth 6), ``iso:K`` (K-ary adjacency tree, budget B), ``mixed-iso:K`` (same shape, the
rank-0 slot under the root and spine nodes takes the spine token), ``goose`` (the paper's adaptive
tree, budget B), ``auto`` (Goose's spine and transition candidates placed best-first by calibrated
acceptance, cut where tokens per second peak on the device's latency profile;
:mod:`goose_runtime.dyntree`) and ``topology:NAME``
(a fixed ``goose-topology/1`` file; NAME is the file stem; a two-regime file, one with
``regimes.unmatched`` as ``goose loop`` writes, drafts that tree in cycles without a context match,
one with ``regimes.confident`` drafts that tree when the match is confident, i.e. several n-gram
lengths agree and it offers at least ``min_match`` tokens, the paper's consensus-bypass condition,
and one with ``regimes.matched_by_length`` drafts the tree for the offered length in other matched
cycles).
Budget default: 60 (``iso``, ``mixed-iso``, ``goose``); a topology file brings its own, and a
smaller explicit budget truncates it breadth-first. A ``+prior`` suffix on any method that drafts
adjacency candidates (``goose+prior``, label ``goose+prior@8``) lets its table fall back on the
model's context-free successor prior for tokens it has no row for (:mod:`goose_runtime.prior`).
A ``+store`` suffix on ``goose`` or ``auto`` (``goose+store@2``, ``auto+store``; both suffixes:
``goose+prior+store``) drafts a retrieval store's guess of the next token under the root of every
unmatched cycle: goose in place of the last adjacency node of its budget, auto as one more root
candidate priced by the calibration class of the guess's share (:mod:`goose_runtime.store`).

Example:
    >>> parse_method("iso:3", budget=20).topology.budget
    20
    >>> parse_method("goose").name, parse_method("goose").budget
    ('goose', 60)
    >>> parse_method("goose+prior", budget=8).name, parse_method("goose+prior", budget=8).prior
    ('goose+prior', True)
    >>> parse_method("goose+store", budget=2).store
    True
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from goose_theory.errors import InputError, did_you_mean
from goose_theory.regimefile import confident_topology, matched_by_length, matched_topology, unmatched_topology
from goose_theory.regimefill import PRIOR_SUFFIX  # one spelling: the regime fit reads it in trace labels
from goose_theory.topology import Topology, TopologyError, load_topology

from .goose import iso_topology, tr_topology

DEFAULT_BUDGET = 60
AUTO_MAX_BUDGET = 63
TR_BUDGET = 80
STORE_SUFFIX = "+store"
KINDS = ("ar", "pld", "tr", "iso", "mixed-iso", "goose", "topology", "auto")
SPELLINGS = KINDS + tuple(k + s for k in KINDS for s in (PRIOR_SUFFIX, STORE_SUFFIX))  # for "did you mean"


class MethodError(InputError):
    """An unknown or malformed method; the message is one line."""


@dataclass(frozen=True)
class MethodSpec:
    """A parsed method. ``kind`` picks the builder; ``topology`` is the static shape, if any;
    ``unmatched`` the tree a two-regime topology file drafts when the matcher offers nothing;
    ``confident`` the tree a regime file drafts for a confident match of >= ``min_match`` tokens;
    ``matched`` the tree with spare slots it drafts for any other match (else ``topology``);
    ``by_length`` one such tree per offered match length (entry L - 1; the last for longer ones)."""

    name: str
    kind: str
    budget: int | None = None
    topology: Topology | None = None
    k: int = 0
    unmatched: Topology | None = None
    confident: Topology | None = None
    min_match: int = 0
    matched: Topology | None = None
    by_length: tuple[Topology, ...] = ()
    prior: bool = False  # ``+prior``: the table falls back on the model's prior (goose_runtime.prior)
    store: bool = False  # ``+store``: unmatched cycles draft the retrieval store's guess (goose_runtime.store)

    def tree_for(self, match) -> Topology | None:
        """The fixed tree to draft for a cycle whose matcher offered ``match``: a regime file's
        ``unmatched`` tree when it offers nothing, its ``confident`` tree for a confident match of
        >= ``min_match`` tokens, its tree for the match's length (``by_length``) or its ``matched``
        tree (spare slots stand in for spine slots past a short match) for any other match, else
        ``topology``."""
        if not match:
            return self.unmatched or self.topology
        if self.confident is not None and match.high_confidence and len(match) >= self.min_match:
            return self.confident
        if self.by_length:
            return self.by_length[min(len(match), len(self.by_length)) - 1]
        return self.matched or self.topology

    @property
    def fixed_trees(self) -> tuple[Topology, ...]:
        """Every fixed tree :meth:`tree_for` may return (none for the adaptive and plain methods)."""
        return tuple(t for t in (self.topology, self.unmatched, self.confident, self.matched, *self.by_length)
                     if t is not None)

    @property
    def uses_adjacency(self) -> bool:
        return self.kind in ("tr", "iso", "mixed-iso", "goose", "topology", "auto")

    @property
    def uses_matcher(self) -> bool:
        return self.kind in ("pld", "mixed-iso", "goose", "topology", "auto")


MAX_BUDGET = 1024  # nodes per verification; the paper's largest tree has 80 (a bigger one only wastes a forward)


def is_count(text: str) -> bool:
    """``text`` is ASCII digits [0-9]+: str.isdigit also takes '²' (which int() refuses), and int()
    reads '+3', ' 3', '1_0' and '٣', none of which a method name should be spelt with."""
    return text.isascii() and text.isdigit()


def _positive(value: str | int | None, what: str) -> int:
    n = _integer(value)
    if n is None or n < 1:
        # goose_theory scores a budget of 0 (the root alone, tau 1); a method drafting nothing is ar
        hint = " (a budget of 0 drafts nothing: that is method 'ar')" if n == 0 and what == "budget" else ""
        raise MethodError(f"{what} must be a positive integer, got {value!r}{hint}"[:200])  # 10**5000: one short line
    if n > MAX_BUDGET:
        raise MethodError(f"{what} must be at most {MAX_BUDGET}, got {value}"[:200])
    return n


def _integer(value: str | int | None) -> int | None:
    """An int as it is, a text of ASCII digits as its number, else None. Past MAX_BUDGET the exact
    number does not matter (and int() refuses a text of more than 4300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and is_count(value):
        digits = value.lstrip("0") or "0"
        return int(digits) if len(digits) <= 9 else MAX_BUDGET + 1
    return None


def parse_method(spec: str, *, budget: int | str | None = None, topology_path: str | None = None) -> MethodSpec:
    """Parse ``spec`` (see the module docstring). ``topology_path`` serves a bare ``topology``;
    ``budget`` may be a text of ASCII digits (the ``NAME@B`` of a label).

    Raises :class:`MethodError` (one line) for an unknown name, a bad K or budget, or a topology
    file that does not load or validate.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise MethodError("empty method name")
    spec = spec.strip()
    if spec.lower().endswith(STORE_SUFFIX):
        return _with_store(parse_method(spec[: -len(STORE_SUFFIX)], budget=budget, topology_path=topology_path))
    if spec.lower().endswith(PRIOR_SUFFIX):
        return _with_prior(parse_method(spec[: -len(PRIOR_SUFFIX)], budget=budget, topology_path=topology_path))
    kind, _, arg = spec.partition(":")
    kind = kind.lower()
    if budget is not None:
        budget = _positive(budget, "budget")
    if kind in ("ar", "pld", "tr", "goose", "auto") and arg:
        raise MethodError(f"method {kind!r} takes no argument, got {spec!r}")
    if kind == "ar":
        return MethodSpec("ar", "ar", 0, None)
    if kind == "pld":
        return MethodSpec("pld", "pld", budget, None)
    if kind == "tr":
        b = budget or TR_BUDGET
        return MethodSpec("tr", "tr", b, tr_topology(b))
    if kind == "goose":
        return MethodSpec("goose", "goose", budget or DEFAULT_BUDGET, None)
    if kind == "auto":  # cost-aware optimal tree per cycle; budget = the largest it may choose
        return MethodSpec("auto", "auto", budget or AUTO_MAX_BUDGET, None)
    if kind in ("iso", "mixed-iso"):
        if not arg:  # "iso:" said "got None"
            raise MethodError(f"method {spec!r} needs its K, the branching factor: {kind}:3, for example")
        k = _positive(arg, f"K in {kind}:K")
        b = budget or DEFAULT_BUDGET
        return MethodSpec(f"{kind}:{k}", kind, b, iso_topology(k, b), k)
    if kind == "topology":
        return _topology_file_method(arg or topology_path, budget=budget)
    raise MethodError(f"unknown method {spec!r} (expected one of ar, pld, tr, iso:K, mixed-iso:K, goose, auto, "
                      f"topology:FILE){did_you_mean(kind, SPELLINGS)}")


def _topology_file_method(path: str | None, *, budget: int | None) -> MethodSpec:
    """``topology:FILE``: the file loaded and validated, labelled by its stem."""
    if not path:
        raise MethodError("method 'topology' needs a file: topology:FILE or --topology FILE")
    name = os.path.splitext(os.path.basename(path))[0]
    # the label goes into one-line tables and UTF-8 traces: a name's bytes that were not UTF-8
    # reach Python as lone surrogates, which are not printable (nor is a newline)
    if not name.isprintable():
        raise MethodError(f"topology file {path!r}: its name (the method's label) is not printable UTF-8 text; "
                          f"rename the file")
    try:
        topo = load_topology(path)
    except TopologyError as exc:
        raise MethodError(f"bad topology: {exc}") from None
    return topology_method(topo, name, budget=budget)


def label_kind(label: str) -> tuple[str, str | None]:
    """The kind (lower case) and argument of a method label, read as :func:`parse_method` and
    ``runner.parse_labeled`` read it (``+prior`` / ``+store`` in any case, a trailing ``@B``),
    without loading or checking anything: for checks that must not load a topology file.

    Example:
        >>> label_kind(" topology:runs/a@b/t.json+PRIOR+store@8"), label_kind("Topology+prior@8")
        (('topology', 'runs/a@b/t.json'), ('topology', None))
    """
    spec = label.strip()
    name, at, tail = spec.rpartition("@")
    if at and is_count(tail):
        spec = name.strip()
    while (low := spec.lower()).endswith(PRIOR_SUFFIX) or low.endswith(STORE_SUFFIX):
        suffix = PRIOR_SUFFIX if low.endswith(PRIOR_SUFFIX) else STORE_SUFFIX
        spec = spec[: -len(suffix)].strip()
    kind, _, arg = spec.partition(":")
    return kind.strip().lower(), arg or None


def topology_file(label: str) -> str | None:
    """The FILE of a ``topology:FILE`` method label (see :func:`label_kind`), else None.

    Example:
        >>> topology_file("topology:t.json+prior"), topology_file("goose@8"), topology_file("topology")
        ('t.json', None, None)
    """
    kind, arg = label_kind(label)
    return arg if kind == "topology" else None


def _with_prior(spec: MethodSpec) -> MethodSpec:
    if spec.prior:
        raise MethodError(f"method {spec.name!r} already has {PRIOR_SUFFIX!r}")
    if not spec.uses_adjacency:
        raise MethodError(f"method {spec.name!r} drafts no adjacency candidates, so {PRIOR_SUFFIX!r} does not apply")
    # one name whatever the order of the suffixes: goose+store+prior is goose+prior+store
    name = spec.name.removesuffix(STORE_SUFFIX) + PRIOR_SUFFIX + (STORE_SUFFIX if spec.store else "")
    return dataclasses.replace(spec, name=name, prior=True)


def _with_store(spec: MethodSpec) -> MethodSpec:
    if spec.store:
        raise MethodError(f"method {spec.name!r} already has {STORE_SUFFIX!r}")
    if spec.kind not in ("goose", "auto"):
        raise MethodError(f"{STORE_SUFFIX!r} applies to goose and auto only (their unmatched trees take the store's "
                          f"guess), not to {spec.name!r}")
    return dataclasses.replace(spec, name=spec.name + STORE_SUFFIX, store=True)


def topology_method(topo: Topology, name: str, *, budget: int | None = None) -> MethodSpec:
    """``topology:NAME`` for a loaded topology (a regime file's extra trees included); a smaller
    ``budget`` truncates it. Raises :class:`MethodError` for malformed regime trees."""
    try:
        unmatched = unmatched_topology(topo)
        confident, min_match = confident_topology(topo) or (None, 0)
        matched = matched_topology(topo)
        by_length = matched_by_length(topo) or ()
    except TopologyError as exc:
        raise MethodError(f"bad topology: {exc}") from None
    b = topo.budget if budget is None else min(budget, topo.budget)
    if b > MAX_BUDGET:  # the cap NAME@B and --budget keep; a smaller --budget cuts the file to it
        raise MethodError(f"topology {name} has {topo.budget} nodes, more than the {MAX_BUDGET} a verification "
                          f"takes (--budget {MAX_BUDGET} or less cuts it)")
    return MethodSpec(f"topology:{name}", "topology", b, topo, unmatched=unmatched, confident=confident,
                      min_match=min_match, matched=matched, by_length=by_length)
