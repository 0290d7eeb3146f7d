"""regimebudget: the regime file's budget is where its own predicted tau per cycle second peaks."""
from __future__ import annotations

import pytest

from goose_theory.regimeexport import regime_topologies
from goose_theory.regimebudget import candidate_budgets, choose_regime_budget

TRACES = ["traces/prior/mtbench-b8.parquet"]


@pytest.mark.parametrize("budgets, chosen, small, step, expected", [
    (range(0, 64), 30, 4, 8, [1, 2, 3, 4, 8, 16, 24, 30]),
    (range(0, 64), 19, 16, 4, list(range(1, 17)) + [19]),
    (range(0, 64), 2, 16, 4, list(range(1, 17))),          # small choices still see every small budget
    ([0, 3, 5, 40], 40, 4, 8, [3, 40]),                    # only budgets the cost table has
    (range(0, 64), 32, 16, 4, list(range(1, 17)) + [20, 24, 28, 32]),
])
def test_candidate_budgets(budgets, chosen, small, step, expected):
    assert candidate_budgets(budgets, chosen=chosen, small=small, step=step) == expected


def table(cycle):
    return [{"budget": b, "cycle_s": cycle(b)} for b in range(0, 9)]


def test_a_flat_cost_picks_the_largest_candidate_and_a_steep_one_the_smallest():
    flat, flat_rows = choose_regime_budget(TRACES, benchmark="mtbench", cost_table=table(lambda b: 0.03),
                                           chosen=8, small=2, step=3)
    assert [r["budget"] for r in flat_rows] == [1, 2, 3, 6, 8]
    taus = [r["predicted_tau"] for r in flat_rows]
    assert taus == sorted(taus) and flat[0].budget == 8  # more nodes never predict less
    steep, steep_rows = choose_regime_budget(TRACES, benchmark="mtbench", cost_table=table(lambda b: 0.03 * (1 + b)),
                                             chosen=8, small=2, step=3)
    assert steep[0].budget == 1
    for row in steep_rows:
        assert row["tokens_per_s"] == pytest.approx(row["predicted_tau"] / row["cycle_s"])


def test_the_choice_is_the_regime_file_of_the_best_rate_as_exported_alone():
    cost = table(lambda b: 0.03 + 0.004 * b)
    (single, pair, _, methods), rows = choose_regime_budget(TRACES, benchmark="mtbench", cost_table=cost,
                                                            chosen=6, small=6, step=4)
    best = max(rows, key=lambda r: r["tokens_per_s"])
    alone = regime_topologies(TRACES, benchmark="mtbench", budget=best["budget"], provenance={})
    assert single.budget == best["budget"] and pair.meta["predicted_tau"] == alone[1].meta["predicted_tau"]
    assert pair.to_dict()["nodes"] == alone[1].to_dict()["nodes"] and methods == alone[3]


def test_a_cost_table_without_a_drafting_budget_is_an_error():
    with pytest.raises(ValueError, match="no budget of at least 1"):
        choose_regime_budget(TRACES, benchmark="mtbench", cost_table=[{"budget": 0, "cycle_s": 0.03}], chosen=0)
