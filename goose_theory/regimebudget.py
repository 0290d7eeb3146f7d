"""The cost-aware budget of a regime export, chosen by the regime file's own prediction.

``goose loop`` (and ``fit-acceptance --regimes --latency``) export the two-regime file
(:func:`goose_theory.regimeexport.regime_topologies`) and the runtime drafts from it. The budget used to be
the single-regime fit's cost-aware choice (:func:`goose_theory.latency.cost_aware` on the fitted
acceptance, which assumes a spine in every cycle), and the regime file was then exported there.
Measured on four runs of ``bench/bench_budget_choice.py`` (two hosts, 12 set-runs,
``docs/bench-budget-choice.md``), that choice ran at 0.94x the fastest export on average, while the
budget that maximises the regime file's own predicted tau per cycle second ran at 0.98x: 8 wins, 1
loss, 3 ties. So the choice is made with the file that is deployed.

:func:`choose_regime_budget` exports the regime file at every candidate budget (each budget from 1
to ``small``, then every ``step``-th up to the single-regime choice, and that choice itself; a few
seconds per prompt set, since small trees optimise fast) and keeps the one with the most predicted
tokens per second under the cost table's cycle times. The first budget wins a tie.

Example:
    >>> candidate_budgets(range(0, 64), chosen=30, small=4, step=8)
    [1, 2, 3, 4, 8, 16, 24, 30]
"""
from __future__ import annotations

from typing import Any, Sequence

from .regimeexport import regime_topologies

SMALL = 16   # every budget up to here is a candidate (each exports in well under a second)
STEP = 4     # above it, every 4th up to the single-regime choice (an export at 28: 0.35 s, 2 Dec)


def candidate_budgets(budgets: Sequence[int], *, chosen: int, small: int = SMALL, step: int = STEP) -> list[int]:
    """The budgets worth exporting, among ``budgets``: every one from 1 up to ``small``, the
    multiples of ``step`` above it up to ``chosen`` (the single-regime cost-aware budget), and
    ``chosen`` itself; sorted."""
    available = {b for b in budgets if b >= 1}
    picked = {b for b in available if b <= small or b == chosen}
    picked |= {b for b in range((small // step + 1) * step, chosen, step) if b in available}
    return sorted(picked)


def choose_regime_budget(files: Sequence[str], *, benchmark: str | None, cost_table: Sequence[dict],
                         chosen: int, provenance: dict | None = None, small: int = SMALL,
                         step: int = STEP) -> tuple[tuple, list[dict[str, Any]]]:
    """Export the regime file at each candidate budget; return the export (single, pair, fit,
    methods) with the most predicted tokens per second, and the table of every candidate
    (budget, predicted_tau of the regime file, cycle_s from ``cost_table``, tokens_per_s)."""
    cycle = {row["budget"]: row["cycle_s"] for row in cost_table}
    best, best_rate, table = None, -1.0, []
    for budget in candidate_budgets(list(cycle), chosen=chosen, small=small, step=step):
        exported = regime_topologies(files, benchmark=benchmark, budget=budget, provenance=provenance or {})
        tau = float(exported[1].meta["predicted_tau"])
        rate = tau / cycle[budget]
        table.append({"budget": budget, "predicted_tau": tau, "cycle_s": cycle[budget], "tokens_per_s": rate})
        if rate > best_rate:
            best, best_rate = exported, rate
    if best is None:
        raise ValueError(f"no budget of at least 1 in the cost table (budgets {sorted(cycle)})")
    return best, table
