"""Topology optimizer: build the tree a rule gives for a budget and score it exactly.

Rules (:data:`RULES`; ``K`` a positive integer <= top_k):

=====================  =====================================================================
``optimal``            exact best tree of the candidate tree. Exclusive model: best-first on
                       path probability (the B candidates of highest path probability form a
                       tree, since a child's never exceeds its parent's). Independent model: a
                       dynamic programme over node types (:mod:`goose_theory._dp`), because
                       there a node's qeff depends on which earlier siblings exist. Tests
                       check both against exhaustive search of all trees where no cap binds.
                       Where the exclusive model caps a node's children (p_s + p_t of
                       the ranks over 1), the node takes the best of its maximal child sets
                       that fit (:mod:`goose_theory.childsets`; the dynamic programme scores
                       each): budget 60, p_s 0.7, p_t 0.36, 0.09, 0.05, 0.04 -> root ranks
                       1-6 beside the spine, E 4.389 (a rank prefix left a bare 20-node spine,
                       E 3.33); p_s 0.9, p_t 0.66, 0.37, 0.37, budget 4, max_spine 1 -> ranks
                       1 and 2 under a transition node, 2.934 (first fit, rank 0 alone: 2.886).
                       Tests check it against exhaustive search of all feasible trees.
``linear``             spine length m searched, branch widths falling linearly along the spine.
``harmonic``           the same with weights 1/(i+1).
``isotropic:K``        K transition children at every node, no spine (the paper's Iso(K)).
``mixed-isotropic:K``  the same shape, rank-0 child of spine-eligible nodes = spine token.
``paper``              BuildSpineTree at the paper's defaults (tiers, rho = 0.5, harmonic).
``source-blind``       Sequoia: one positional acceptance vector for both sources.
``uniform-levels``     no spine; every node of a level has children ranks 0..c_d-1, the best
                       widths (c_1, c_2, ...) by exhaustive search: the trees vLLM can draft.
=====================  =====================================================================

Plus two references (accepted by :func:`build_topology`, listed by :func:`compare_rules`):
``spine-only`` (pure chain) and ``transition-only`` (the optimal tree with no spine). The
candidate tree, its exclusive-model truncation and the growth rules are documented in
:mod:`goose_theory.candidate`, :mod:`goose_theory.shapes` and :mod:`goose_theory.allocation`.

Every result's ``predicted_tau`` is :func:`goose_theory.yields.exact_yield` of the returned tree
under the given acceptance; the tree's meta carries rule, acceptance, predicted_tau, budget and
top_k, so a saved topology says what it was optimised for.

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> res = build_topology("optimal", Acceptance.parse(0.6, 0.05), budget=60)
    >>> res.topology.budget, res.details["spine_length"] >= 5, res.predicted_tau > 2.3
    (60, True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .acceptance import Acceptance
from .allocation import paper_tree, weighted_tree
from .candidate import Candidate
from .errors import InputError, did_you_mean
from .shapes import (isotropic_tree, optimal_curve, optimal_tree, source_blind_tree, spine_chain_tree,
                     transition_only_tree, uniform_levels_tree)
from .topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, Topology
from .yields import exact_yield

RULES = ("optimal", "linear", "harmonic", "isotropic:K", "mixed-isotropic:K", "paper", "source-blind",
         "uniform-levels")
REFERENCE_RULES = ("spine-only", "transition-only")
DEFAULT_COMPARE = ("optimal", "linear", "harmonic", "paper", "source-blind", "isotropic:3", "isotropic:5",
                   "mixed-isotropic:3", "mixed-isotropic:5", "spine-only", "transition-only", "uniform-levels")


def too_wide(top_k: int) -> list[str]:
    """The :data:`DEFAULT_COMPARE` rules a ``top_k`` leaves out: a K-ary level needs K ranks."""
    return [r for r in DEFAULT_COMPARE if ":" in r and int(r.split(":")[1]) > top_k]


class OptimizeError(InputError):
    """A bad rule, budget or limit; the message is one line naming the bad value."""


@dataclass(frozen=True)
class OptimizeResult:
    """One rule's tree for one budget, with its exact expected yield."""

    topology: Topology
    rule: str
    budget: int
    predicted_tau: float
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the nodes; see ``topology.to_dict()`` for those)."""
        return {"rule": self.rule, "budget": self.budget, "predicted_tau": self.predicted_tau,
                "nodes": self.topology.budget, **{k: v for k, v in self.details.items()}}


def _check_int(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise OptimizeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_inputs(acceptance: Any, *, budget: Any, max_depth: Any, max_spine: Any, top_k: Any) -> None:
    _check_int("budget", budget, 0)
    _check_int("max_depth", max_depth, 0)
    _check_int("max_spine", max_spine, 0)
    _check_int("top_k", top_k, 1)
    if not isinstance(acceptance, Acceptance):
        raise OptimizeError(f"acceptance must be an Acceptance, got {type(acceptance).__name__}")


def parse_rule(rule: str, top_k: int) -> tuple[str, int | None]:
    """Split ``"isotropic:5"`` into ``("isotropic", 5)``; validate the name and K."""
    if not isinstance(rule, str):
        raise OptimizeError(f"rule must be a string, got {rule!r}")
    name, sep, arg = rule.partition(":")
    if name in ("isotropic", "mixed-isotropic"):
        try:
            k = int(arg)
        except ValueError:
            raise OptimizeError(f"rule {rule!r}: K must be a positive integer (e.g. {name}:3)") from None
        if not 1 <= k <= top_k:
            raise OptimizeError(f"rule {rule!r}: K={k} must be between 1 and top_k={top_k}")
        return name, k
    if sep or name not in RULES + REFERENCE_RULES:
        known = ", ".join(RULES + REFERENCE_RULES)
        hint = did_you_mean(name, RULES + REFERENCE_RULES)
        raise OptimizeError(f"unknown rule {rule!r} (expected one of {known}){hint}")
    return name, None


def build_topology(rule: str, acceptance: Acceptance, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                   max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K) -> OptimizeResult:
    """The tree ``rule`` gives for ``budget`` non-root nodes, scored exactly.

    The tree has exactly ``budget`` non-root nodes unless the candidate tree is too small, or
    (``paper``) the paper's split gives a deep spine node more than it can hang, as goose's builder
    does (then ``details["unplaced"]`` counts the missing ones; ``spine-only`` is capped at
    max_spine by definition). Raises :class:`OptimizeError` for a bad rule or limit.
    """
    _check_inputs(acceptance, budget=budget, max_depth=max_depth, max_spine=max_spine, top_k=top_k)
    name, k = parse_rule(rule, top_k)
    cand = Candidate(acceptance, max_depth=max_depth, max_spine=max_spine, top_k=top_k)
    if name == "optimal":
        builder, details = optimal_tree(cand, budget=budget)
    elif name in ("linear", "harmonic"):
        builder, details = weighted_tree(cand, budget=budget, weighting=name)
    elif name in ("isotropic", "mixed-isotropic"):
        builder, details = isotropic_tree(cand, budget=budget, k=k, mixed=name == "mixed-isotropic")
    elif name == "paper":
        builder, details = paper_tree(cand, budget=budget)
    elif name == "source-blind":
        builder, details = source_blind_tree(cand, budget=budget)
    elif name == "spine-only":
        builder, details = spine_chain_tree(cand, budget=budget)
    elif name == "uniform-levels":
        builder, details = uniform_levels_tree(cand, budget=budget)
    else:
        builder, details = transition_only_tree(cand, budget=budget)
    return _finish(rule, builder.topology(), acceptance, budget, top_k, details)


def optimal_tau_curve(acceptance: Acceptance, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                      max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K) -> list[float]:
    """The ``optimal`` rule's E[tau] at every budget 0..``budget`` from one optimisation (equal,
    to 1e-12, to ``build_topology("optimal", ..., budget=b).predicted_tau`` for each b).

    Example:
        >>> [round(t, 3) for t in optimal_tau_curve(Acceptance.parse(0.5, 0.1), budget=2)]
        [1.0, 1.5, 1.75]
    """
    return optimal_curve_nodes(acceptance, budget=budget, max_depth=max_depth, max_spine=max_spine, top_k=top_k)[0]


def optimal_curve_nodes(acceptance: Acceptance, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                        max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K) -> tuple[list[float], list[int]]:
    """:func:`optimal_tau_curve` and the node count of the ``optimal`` tree at every budget (equal
    to ``build_topology("optimal", ..., budget=b).topology.budget``): fewer than b where the
    candidate tree runs out or no larger tree ties the best."""
    _check_inputs(acceptance, budget=budget, max_depth=max_depth, max_spine=max_spine, top_k=top_k)
    cand = Candidate(acceptance, max_depth=max_depth, max_spine=max_spine, top_k=top_k)
    taus, nodes = optimal_curve(cand, budget=budget)
    return taus.tolist(), nodes.tolist()


def _finish(rule: str, topology: Topology, acceptance: Acceptance, budget: int, top_k: int,
            details: dict[str, Any]) -> OptimizeResult:
    tau = exact_yield(topology, acceptance).expected_tau
    details = dict(details)
    details["spine_length"] = topology.spine_length
    details["first_level_widths"] = topology.first_level_widths.tolist()
    if topology.budget < 2:  # one child fits at any node: a cap cannot bind on a tree of 0 or 1 nodes
        details["truncated"] = []
    meta = {"rule": rule, "acceptance": acceptance.to_dict(), "predicted_tau": tau,
            "requested_budget": budget, "top_k": top_k}
    if details.get("truncated"):
        meta["truncated"] = list(details["truncated"])
    return OptimizeResult(topology.with_meta(**meta), rule, budget, tau, details)


def compare_rules(acceptance: Acceptance, *, budget: int, max_depth: int = PAPER_MAX_DEPTH,
                  max_spine: int = PAPER_MAX_SPINE, top_k: int = PAPER_TOP_K, rules: Sequence[str] | None = None) -> list[OptimizeResult]:
    """Every rule side by side (default :data:`DEFAULT_COMPARE`, whose isotropic entries with
    K > top_k are left out; an explicit ``rules`` list is taken as given and validated)."""
    if rules is None:
        rules = [r for r in DEFAULT_COMPARE if r not in too_wide(top_k)]
    return [build_topology(r, acceptance, budget=budget, max_depth=max_depth, max_spine=max_spine,
                           top_k=top_k) for r in rules]
