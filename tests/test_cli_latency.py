"""goose optimize --latency: the cost-aware text table and JSON (rows, the chosen one, what was not priced)."""
from __future__ import annotations

import json

import pytest

from goose_runtime.cli import main
from goose_theory.topology import load_topology
from tests.clirun import run_json


def test_optimize_latency_names_the_budgets_the_profile_cannot_price(capsys, tmp_path):
    profile = tmp_path / "lat.json"
    profile.write_text(json.dumps({"schema": "goose-latency/1", "sizes": [1, 8, 32], "seconds": [0.02, 0.021, 0.03],
                                   "draft_s": 0.0005}))
    argv = ["optimize", "--budget", "100", "--p-s", "0.6", "--p-t", "0.05", "--latency", str(profile),
            "--out", str(tmp_path / "o.json")]
    out = run_json(capsys, [*argv, "--json"])
    # the file keeps the budget asked for and says which it chose (it had requested_budget = the chosen one)
    meta = load_topology(tmp_path / "o.json").meta
    assert (meta["requested_budget"], meta["chosen_budget"], meta["cost_aware"]) == (100, out["chosen_budget"], True)
    assert out["priced_budgets"] == [0, 31] and [row["budget"] for row in out["latency_table"]] == list(range(32))
    best = max(out["latency_table"], key=lambda row: row["tokens_per_s"])
    assert out["budget"] == best["budget"] and out["predicted_tau"] == pytest.approx(best["predicted_tau"])
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"note: --latency {profile} measures trees of at most 32 tokens, so budgets 32..100 were not priced" in text
    # the text table: budgets 0-4, about 1.5x apart, the chosen one (marked) and the last priced, not all 32
    rows = [line.split() for line in text.splitlines() if line.split() and line.split()[0].isdigit()]
    shown = sorted({0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 31, best["budget"]})
    assert [int(row[0]) for row in rows] == shown
    assert [int(row[0]) for row in rows if row[-1] == "*"] == [best["budget"]]
    assert f"({len(shown)} of the 32 priced budgets shown; --json lists every one)" in text
    assert main([*argv[:2], "20", *argv[3:]]) == 0 and "not priced" not in capsys.readouterr().out
    assert main([*argv[:2], "32", *argv[3:]]) == 0 and "so budget 32 was not priced" in capsys.readouterr().out


def test_optimize_latency_marks_the_chosen_row_when_the_tree_holds_fewer_nodes(capsys, tmp_path):
    # p_s + p_t > 1: the paper rule's trees stop growing (the exclusive model caps the ranks), so the
    # chosen row's budget is larger than the tree it builds; the row is marked, not the one whose budget is the node count
    profile = tmp_path / "lat.json"
    profile.write_text(json.dumps({"schema": "goose-latency/1", "sizes": [1, 64], "seconds": [0.035, 0.125],
                                   "draft_s": 0.0}))
    argv = ["optimize", "--rule", "paper", "--budget", "63", "--p-s", "0.9", "--p-t", "0.3", "--latency", str(profile),
            "--out", str(tmp_path / "o.json")]
    out = run_json(capsys, [*argv, "--json"])
    best = max(out["latency_table"], key=lambda row: row["tokens_per_s"])
    assert (out["chosen_budget"], out["budget"]) == (best["budget"], best["nodes"]) and best["nodes"] < best["budget"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [(int(row[0]), int(row[1])) for row in rows if row[-1] == "*"] == [(best["budget"], best["nodes"])]
    assert (f"paper: budget {best['nodes']} (requested 63; the cost-aware choice is the rule's tree at budget "
            f"{best['budget']}, {best['nodes']} nodes)") in text
    assert "each row is priced at its nodes" in text



@pytest.mark.parametrize("command", [
    ["optimize", "--budget", "8", "--p-s", "0.8", "--p-t", "0.2", "--out", "{tmp}/o.json"],
    ["decode", "--method", "auto", "--prompt", "def f(x):"],
    ["loop", "--out-dir", "{tmp}/out"],
    ["fit-acceptance", "traces/stdlib-b8.parquet"]], ids=lambda argv: argv[0])
def test_every_command_names_the_latency_flag_of_a_bad_profile(capsys, tmp_path, no_model, command):
    # optimize, decode and loop said "error: FILE: no such file"; fit-acceptance "error: --latency: ..."
    from goose_runtime.fit_cli import main as fit_main

    missing = tmp_path / "none.json"
    argv = [a.format(tmp=tmp_path) for a in command] + ["--latency", str(missing)]
    assert (fit_main(argv[1:]) if argv[0] == "fit-acceptance" else main(argv)) == 2
    assert capsys.readouterr().err.strip() == f"error: --latency: {missing}: no such file"
    assert not list(tmp_path.iterdir())  # nothing written
