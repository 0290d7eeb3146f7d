"""The theory CLI (goose yield / simulate / optimize / compare): contracts, JSON keys, bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from goose_runtime.cli import main
from tests.clirun import THEORY_NODES as NODES, run_json
from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology, load_topology, save_topology
from goose_theory.yields import exact_yield



def test_yield_json(capsys, topo_file):
    out = run_json(capsys, ["yield", "--topology", topo_file, "--p-s", "0.6", "--p-t", "0.1", "--json"])
    expected = exact_yield(Topology.from_nodes(NODES), Acceptance.parse(0.6, 0.1))
    assert out["exact"] == pytest.approx(expected.expected_tau)
    assert out["variance"] == pytest.approx(expected.variance)
    assert out["lower_bound"] <= out["exact"] and sum(out["pmf"]) == pytest.approx(1)


def test_yield_per_parent_transition_acceptance(capsys, topo_file):
    out = run_json(capsys, ["yield", "--topology", topo_file, "--p-s", "0.6", "--p-t", "0.1", "--p-t-spine", "0.02",
                            "--p-t-chain", "0.5", "--json"])
    acc = Acceptance.parse(0.6, 0.1, p_t_spine=0.02, p_t_chain=0.5)
    assert out["exact"] == pytest.approx(exact_yield(Topology.from_nodes(NODES), acc).expected_tau)
    assert out["exact"] != pytest.approx(exact_yield(Topology.from_nodes(NODES), Acceptance.parse(0.6, 0.1)).expected_tau)


def test_yield_of_a_regime_file_says_it_scores_the_top_level_tree(capsys, tmp_path):
    tree = Topology.from_nodes(NODES)
    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1)])
    pair, plain = tmp_path / "pair.json", tmp_path / "plain.json"
    save_topology(tree.with_meta(regimes={"unmatched": unmatched.to_dict()}), pair)
    save_topology(tree, plain)
    assert main(["yield", "--topology", str(pair), "--p-s", "0.6", "--p-t", "0.1", "--json"]) == 0
    captured = capsys.readouterr()
    want = exact_yield(tree, Acceptance.parse(0.6, 0.1)).expected_tau
    assert json.loads(captured.out)["exact"] == pytest.approx(want)
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"note: {pair} is a two-regime export; this scores its top-level (matched)")
    assert main(["yield", "--topology", str(plain), "--p-s", "0.6", "--p-t", "0.1"]) == 0
    assert capsys.readouterr().err == ""
    # --regimes' single tree has no 'regimes', only its fit; simulate and compare say it too (not "(matched)")
    single = tmp_path / "single.json"
    fit = {"psi": 0.5, "matched": Acceptance.parse(0.6, 0.1).to_dict(), "unmatched": Acceptance.parse(0.0, 0.1).to_dict()}
    save_topology(tree.with_meta(regime_fit=fit), single)
    for argv, verb in ((["yield"], "scores"), (["simulate", "--cycles", "1000"], "simulates")):
        assert main([*argv, "--topology", str(single), "--p-s", "0.6", "--p-t", "0.1"]) == 0
        assert capsys.readouterr().err.startswith(f"note: {single} is a two-regime export; this {verb} its one tree "
                                                  "(run in both regimes) under the given rates alone")
    assert main(["compare", "--budget", "4", "--p-s", "0.6", "--p-t", "0.1", "--topology", str(single)]) == 0
    assert capsys.readouterr().err.startswith(f"note: {single} is a two-regime export; this prices")


def test_yield_lists_and_table(capsys, topo_file):
    assert main(["yield", "--topology", topo_file, "--p-s", "0.6,0.5", "--p-t", "0.1,0.05", "--model", "independent"]) == 0
    text = capsys.readouterr().out
    assert "E[tau] =" in text and "paper lower bound" in text


def test_simulate_json(capsys, topo_file):
    out = run_json(capsys, ["simulate", "--topology", topo_file, "--p-s", "0.6", "--p-t", "0.1",
                            "--cycles", "200000", "--seed", "3", "--json"])
    assert {"mean", "std", "ci95", "cycles"} <= out.keys() and out["cycles"] == 200000
    # against the flags' acceptance worked out here, not the command's own "exact" (both would share its error)
    truth = exact_yield(Topology.from_nodes(NODES), Acceptance.parse(0.6, 0.1)).expected_tau
    se = out["std"] / 200000 ** 0.5
    assert out["exact"] == pytest.approx(truth) and abs(out["mean"] - truth) < 5 * se


def test_simulate_bursty_takes_p_s_from_the_regime(capsys, topo_file):
    out = run_json(capsys, ["simulate", "--topology", topo_file, "--bursty", "0.8,0.2,0.05,0.05", "--p-t", "0.1",
                            "--cycles", "200000", "--seed", "3", "--json"])
    tree = Topology.from_nodes(NODES)
    mixture = 0.5 * exact_yield(tree, Acceptance.parse(0.8, 0.1)).expected_tau \
        + 0.5 * exact_yield(tree, Acceptance.parse(0.2, 0.1)).expected_tau  # stationary share 0.05 / 0.1
    assert out["exact"] == pytest.approx(mixture) and 0.4 < out["fraction_repetitive"] < 0.6
    assert out["lag1_autocorrelation"] > 0.3


def test_optimize_reports_dropped_ranks(capsys, tmp_path):
    target = tmp_path / "opt.json"
    out = run_json(capsys, ["optimize", "--budget", "30", "--p-s", "0.6", "--p-t", "0.05", "--out", str(target), "--json"])
    assert out["truncated"] and "only ranks 0..7" in out["truncated"][0]
    assert load_topology(target).meta["truncated"] == out["truncated"]
    assert main(["optimize", "--budget", "30", "--p-s", "0.6", "--p-t", "0.05", "--out", str(target)]) == 0
    assert "note: exclusive model: at the root only ranks 0..7" in capsys.readouterr().out
    assert run_json(capsys, ["optimize", "--budget", "30", "--p-s", "0.3", "--p-t", "0.05", "--out", str(target),
                             "--json"])["truncated"] == []


def test_optimize_writes_topology(capsys, tmp_path):
    target = tmp_path / "opt.json"
    out = run_json(capsys, ["optimize", "--budget", "12", "--p-s", "0.5", "--p-t", "0.05", "--out", str(target), "--json"])
    topo = load_topology(target)
    assert out["rule"] == "optimal" and out["budget"] == 12 == topo.budget
    assert out["predicted_tau"] == pytest.approx(exact_yield(topo, Acceptance.parse(0.5, 0.05)).expected_tau)
    assert topo.meta["predicted_tau"] == pytest.approx(out["predicted_tau"])


def test_optimize_reports_the_trees_own_budget(capsys, tmp_path):
    # the candidate tree holds one node: the file has budget 1, and so must the report
    target = tmp_path / "small.json"
    argv = ["optimize", "--budget", "8", "--max-spine", "0", "--max-depth", "1", "--top-k", "1",
            "--p-s", "0.6", "--p-t", "0.05", "--out", str(target)]
    out = run_json(capsys, argv + ["--json"])
    assert out["budget"] == 1 == load_topology(target).budget and out["requested_budget"] == 8
    assert main(argv) == 0
    assert "optimal: budget 1 (requested 8)," in capsys.readouterr().out
    assert main(["optimize", "--budget", "8", "--p-s", "0.6", "--p-t", "0.05", "--out", str(target)]) == 0
    assert "optimal: budget 8, predicted" in capsys.readouterr().out


def test_compare_reports_each_trees_own_budget(capsys):
    # p_s = 1: the paper rule stops at its 4-node spine (no rank fits beside a sure spine child; depth 4 holds none)
    out = run_json(capsys, ["compare", "--budget", "8", "--p-s", "1", "--p-t", "0.05", "--max-depth", "4", "--json"])
    budgets = {r["rule"]: r["budget"] for r in out["rules"]}
    assert out["budget"] == 8 and budgets["paper"] == 4 and budgets["optimal"] == 8
    assert main(["compare", "--budget", "8", "--p-s", "1", "--p-t", "0.05", "--max-depth", "4"]) == 0
    text = capsys.readouterr().out
    paper_row = next(line.split() for line in text.splitlines() if line.startswith("paper "))
    assert paper_row[1] == "4" and "paper built fewer than --budget 8" in text


def test_compare_lists_rules(capsys):
    out = run_json(capsys, ["compare", "--budget", "20", "--p-s", "0.5", "--p-t", "0.05", "--json"])
    rules = {r["rule"]: r["predicted_tau"] for r in out["rules"]}
    assert "optimal" in rules and "paper" in rules
    assert rules["optimal"] >= max(rules.values()) - 1e-12
    assert main(["compare", "--budget", "20", "--p-s", "0.5", "--p-t", "0.05"]) == 0
    assert "left out" not in capsys.readouterr().out
    # a K-ary level needs K ranks: the isotropic rows above --top-k are left out, and said to be
    assert main(["compare", "--budget", "8", "--p-s", "0.6", "--p-t", "0.1", "--top-k", "3"]) == 0
    text = capsys.readouterr().out
    assert "note: isotropic:5, mixed-isotropic:5 left out: K is above --top-k 3" in text
    rows = [line.split()[0] for line in text.splitlines() if line.split() and not line.startswith("note")]
    assert "isotropic:3" in rows and "isotropic:5" not in rows and "mixed-isotropic:5" not in rows


@pytest.mark.parametrize("argv, message", [
    (["yield", "--p-s", "1.5", "--p-t", "0.1"], "p_s: 1.5 is not a probability"),
    (["yield", "--p-s", "nan", "--p-t", "0.1"], "p_s: nan is not a probability"),
    (["yield", "--p-s", "0.6", "--p-t", "0.5"], "tree.json: exclusive model: the children of node 0"),  # names the file
    (["simulate", "--p-s", "0.6", "--p-t", "0.5"], "tree.json: exclusive model: the children of node 0"),
    (["simulate", "--p-t", "0.5", "--bursty", "0.9,0.1,0.5,0.5"], "tree.json: exclusive model: the children of node 0"),
    (["yield", "--p-s", "0.6", "--p-t", "0.1", "--model", "magic"], "unknown acceptance model 'magic'"),
    (["yield", "--p-s", "0.6", "--p-t", "0.1", "--p-t-chain", "2"], "p_t_chain: 2.0 is not a probability"),
    (["yield", "--p-s", "0.6", "--p-t", "0.1", "--lbar", "x"], "--lbar"),
    (["simulate", "--p-s", "0.6", "--p-t", "0.1", "--cycles", "0"], "--cycles must be in 1..1e+11, got 0"),
    (["simulate", "--p-s", "0.6", "--p-t", "0.1", "--cycles", str(10**20)], "--cycles must be in 1..1e+11"),
    (["simulate", "--p-t", "0.1", "--bursty", ""], "is not four comma-separated probabilities"),
    (["yield", "--p-s", "0.6", "--p-t", "0.1", "--lbar", "inf"], "--lbar: 'inf' must be a finite"),
    (["optimize", "--budget", "1000000000", "--p-s", "0.6", "--p-t", "0.1", "--out", "OUT"], "at most 10000"),
    (["compare", "--budget", "1000", "--p-s", "0.9", "--p-t", "0.0001", "--top-k", "2000"],
     "--top-k must be at most 1000, got 2000"),  # ran for minutes
    (["optimize", "--budget", "10000", "--p-s", "0.6", "--p-t", "0.1", "--max-depth", "10000", "--out", "OUT"],
     "--max-depth must be at most 64, got 10000"),  # ran for minutes, with --max-spine too out of memory
    (["compare", "--budget", "100", "--p-s", "0.6", "--p-t", "0.1", "--max-spine", "65"],
     "--max-spine must be at most 64, got 65"),
    (["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--out", ""], "--out: '' is empty"),
    (["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--out", "DIR"], "is a directory"),
    (["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--out", "/dev/null"], "not a regular file"),
    (["simulate", "--p-t", "0.1"], "--p-s is required (or --bursty"),
    (["simulate", "--p-s", "0.6", "--p-t", "0.1", "--bursty", "0.8,0.2,0.05,0.05"], "drop --p-s"),
    (["simulate", "--p-t", "0.1", "--bursty", "0.8,1.2,0.05,0.05"], "p_s_novel: 1.2 is not a probability"),
    (["simulate", "--p-t", "0.1", "--bursty", "0.8,0.2"], "--bursty needs four"),
    (["simulate", "--p-t", "0.1", "--bursty", "0.8,a,0.1,0.1"], "is not four comma-separated probabilities"),
    (["optimize", "--budget", "-1", "--p-s", "0.6", "--p-t", "0.1", "--out", "OUT"], "--budget must be >= 0"),
    (["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--rule", "magic", "--out", "OUT"], "magic"),
    # an empty path was taken as "no --latency" and a plain tree written
    (["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--latency", "", "--out", "OUT"],
     "--latency: '' is empty"),
    (["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--latency", "OUT", "--out", "OUT"],
     "is also --latency: writing it would replace that input"),
])
def test_bad_input_one_line_exit_2(capsys, topo_file, tmp_path, argv, message):
    argv = [a.replace("OUT", str(tmp_path / "never.json")).replace("DIR", str(tmp_path)) for a in argv]
    if argv[0] in ("yield", "simulate"):
        argv += ["--topology", topo_file]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "never.json").exists()


def test_optimize_refuses_to_overwrite_the_file_it_reads_its_acceptance_from(capsys, tmp_path):
    # the atomic rename replaced a fit-acceptance export, provenance and all, exit 0 (walkthrough, 5 Dec)
    fitted = tmp_path / "fit.json"
    assert main(["optimize", "--budget", "5", "--p-s", "0.6", "--p-t", "0.1", "--out", str(fitted)]) == 0
    before = fitted.read_bytes()
    capsys.readouterr()
    assert main(["optimize", "--budget", "9", "--acceptance-from", str(fitted), "--out", str(tmp_path / "." / "fit.json")]) == 2
    assert "is also --acceptance-from: writing it would replace that input" in capsys.readouterr().err
    assert fitted.read_bytes() == before


def test_a_given_lbar_that_breaks_the_bound_is_noted(capsys, topo_file):
    # --lbar 100 printed "paper lower bound = 28.95...; gap -26.19" of a tree whose tau cannot pass 8 (walkthrough)
    argv = ["yield", "--topology", topo_file, "--p-s", "0.6", "--p-t", "0.1", "--lbar"]
    assert main([*argv, "100"]) == 0 and "note: the given lbar puts the bound above E[tau]" in capsys.readouterr().out
    for fine in ("0.01", "topology", "zero"):
        assert main([*argv, fine]) == 0 and "note:" not in capsys.readouterr().out


def test_simulate_notes_too_few_cycles_for_its_interval(capsys, topo_file):
    argv = ["simulate", "--topology", topo_file, "--p-s", "0.6", "--p-t", "0.1", "--seed", "1", "--cycles"]
    assert main([*argv, "2"]) == 0 and "note: 2 cycles are too few for the normal 95% interval" in capsys.readouterr().out
    assert main([*argv, "100"]) == 0 and "note:" not in capsys.readouterr().out


def test_malformed_topology_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "goose-topology/1", "nodes": [{"source": "root"}, {"parent": 5, "source": "spine", "rank": 0}]}')
    assert main(["yield", "--topology", str(bad), "--p-s", "0.5", "--p-t", "0.1"]) == 2
    assert "bad.json: node 1: parent 5 is not an earlier node" in capsys.readouterr().err


def test_console_script_exit_code(topo_file):
    exe = os.path.join(os.path.dirname(sys.executable), "goose")
    proc = subprocess.run([exe, "yield", "--topology", topo_file, "--p-s", "2", "--p-t", "0.1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: p_s: 2.0 is not a probability")
    assert proc.stdout == ""


def test_closed_pipe_stops_quietly(topo_file):
    """``goose ... | head`` closes the pipe early: no traceback, exit 141 as a shell reports SIGPIPE."""
    exe = os.path.join(os.path.dirname(sys.executable), "goose")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a user's shell: stdout block-buffered
    proc = subprocess.Popen([exe, "compare", "--budget", "20", "--p-s", "0.5", "--p-t", "0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # before the child has written a byte (it is still importing)
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait() == 141 and "Traceback" not in err and err == ""


def test_compare_prices_a_given_tree_beside_the_rules(capsys, topo_file):
    out = run_json(capsys, ["compare", "--budget", "6", "--p-s", "0.6", "--p-t", "0.1", "--topology", topo_file,
                            "--json"])
    mine = out["rules"][-1]
    assert mine["rule"] == f"topology:{topo_file}" and mine["budget"] == 6 and mine["spine_length"] == 2
    assert mine["predicted_tau"] == pytest.approx(exact_yield(Topology.from_nodes(NODES),
                                                              Acceptance.parse(0.6, 0.1)).expected_tau)
    assert mine["predicted_tau"] <= next(r for r in out["rules"] if r["rule"] == "optimal")["predicted_tau"] + 1e-12
    assert main(["compare", "--budget", "6", "--p-s", "0.6", "--p-t", "0.1", "--topology", "missing.json"]) == 2
    assert capsys.readouterr().err.strip() == "error: missing.json: no such file"
