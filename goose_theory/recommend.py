"""Recommend a topology for a fitted acceptance model (returns data; writes nothing).

The ``optimal`` tree under the fitted model (depth-dependent p_s and rank-dependent p_t where
the data support them, p_t by the parent's source where supported, see
:func:`goose_theory.fitcheck.check_group`) at a budget -- by
default the budget of the recorded runs -- next to the paper's default shape, linear,
harmonic and isotropic trees at the *same* budget. With a latency profile the budget itself is
chosen cost-aware (:func:`goose_theory.latency.cost_aware`: max E[tau] / time per cycle).

Example:
    >>> from goose_theory.acceptance import Acceptance
    >>> rec = recommend(Acceptance.parse(0.5, 0.05), budget=20)
    >>> rec.best.rule, rec.rows[0]["rule"], rec.rows[0]["predicted_tau"] >= rec.rows[1]["predicted_tau"]
    ('optimal', 'optimal', True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .acceptance import Acceptance
from .optimize import OptimizeResult, build_topology
from .topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, Topology

COMPARE = ("optimal", "paper", "linear", "harmonic", "isotropic:3", "isotropic:5")


@dataclass(frozen=True)
class Recommendation:
    """The recommended tree and the comparison rows (``rule``, ``budget``, ``predicted_tau``,
    ``spine_length``, ``gain_vs_paper``; fit-acceptance adds ``predicted_ci95`` and
    ``gain_vs_paper_ci95``, :func:`goose_theory.fitinterval.with_intervals`), best first as listed
    in ``rules``."""

    best: OptimizeResult
    budget: int
    budget_source: str  # "recorded", "given" or "cost-aware"
    acceptance: Acceptance
    rows: list[dict[str, Any]]
    cost_table: list[dict[str, Any]] = field(default_factory=list)
    unpriced: tuple[int, int] | None = None  # given budgets past the latency profile's largest tree
    left_out: tuple[str, ...] = ()  # rules of ``rules`` that need more ranks than top_k
    top_k: int = PAPER_TOP_K
    trees: tuple[Topology, ...] = field(default=(), repr=False)  # one per row, in the rows' order

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.best.rule, "budget": self.budget, "budget_source": self.budget_source,
                "predicted_tau": self.best.predicted_tau, "predicted_ci95": self.rows[0].get("predicted_ci95"),
                "acceptance": self.acceptance.to_dict(),
                "comparison": self.rows, "cost_table": self.cost_table}


def recommend(acceptance: Acceptance, *, budget: int, budget_source: str = "given", latency: Any = None,
              rules: Sequence[str] = COMPARE, max_depth: int = PAPER_MAX_DEPTH, max_spine: int = PAPER_MAX_SPINE,
              top_k: int = PAPER_TOP_K) -> Recommendation:
    """Optimal tree vs the reference rules at one budget (cost-aware budget with ``latency``: the
    best of those the profile prices, at most ``budget`` where it is ``"given"``)."""
    limits = {"max_depth": max_depth, "max_spine": max_spine, "top_k": top_k}
    cost_table: list[dict[str, Any]] = []
    unpriced = None
    if latency is not None:
        from .latency import cost_aware  # only needed with a latency profile
        budgets = None  # every budget the profile prices; a given budget is the most it may choose
        if budget_source == "given":  # (as goose optimize --budget B --latency)
            budgets = list(range(latency.sizes[0] - 1, min(latency.sizes[-1], budget + 1))) or [budget]
        if budget >= latency.sizes[-1]:  # no extrapolation: budgets sizes[-1].. (B + 1 tokens) went unpriced
            unpriced = (latency.sizes[-1], budget)  # (the recorded budget too: a 1-token profile chose 0, unremarked)
        chosen = cost_aware(acceptance, latency, rule="optimal", budgets=budgets, **limits)
        budget, budget_source, cost_table = chosen.best.budget, "cost-aware", list(chosen.table)
    # isotropic:K needs K <= top_k candidates per node; leave out what the runs could not build
    usable = [r for r in dict.fromkeys(("optimal", *rules)) if ":" not in r or int(r.split(":")[1]) <= top_k]
    results = [build_topology(r, acceptance, budget=budget, **limits) for r in usable]
    paper = next((r.predicted_tau for r in results if r.rule == "paper"), None)
    rows = []
    for r in results:
        rows.append({"rule": r.rule, "budget": r.topology.budget, "predicted_tau": r.predicted_tau,
                     "spine_length": r.topology.spine_length,
                     "gain_vs_paper": (r.predicted_tau / paper - 1.0) if paper else None})
    left_out = tuple(r for r in rules if r not in usable)
    return Recommendation(results[0], budget, budget_source, acceptance, rows, cost_table, unpriced, left_out, top_k,
                          tuple(r.topology for r in results))
