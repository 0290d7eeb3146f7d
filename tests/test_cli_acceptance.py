"""The theory CLI's acceptance (goose_theory/cli.py): --p-s / --p-t flags or --acceptance-from a file, and what
a file's acceptance brings along (its top_k)."""
from __future__ import annotations

import pytest

from goose_runtime.cli import main
from tests.clirun import THEORY_NODES as NODES, run_json
from goose_theory.topology import Topology, load_topology, save_topology



def test_acceptance_from_a_file_equals_the_flags(capsys, tmp_path, topo_file):
    flags = ["--p-s", "0.6,0.5", "--p-t", "0.1,0.05", "--p-t-chain", "0.3,0.1"]
    fitted = tmp_path / "fit.json"  # a file that carries its acceptance, as fit-acceptance --out writes one
    assert main(["optimize", "--budget", "10", *flags, "--out", str(fitted)]) == 0
    capsys.readouterr()
    by_flags = run_json(capsys, ["yield", "--topology", topo_file, *flags, "--json"])
    by_file = run_json(capsys, ["yield", "--topology", topo_file, "--acceptance-from", str(fitted), "--json"])
    assert by_file["exact"] == by_flags["exact"] and by_file["model"] == "exclusive"
    other = run_json(capsys, ["yield", "--topology", topo_file, "--acceptance-from", str(fitted), "--model",
                              "independent", "--json"])
    assert other["model"] == "independent" and other["exact"] != by_flags["exact"]
    out = tmp_path / "u.json"
    assert main(["optimize", "--rule", "uniform-levels", "--budget", "12", "--acceptance-from", str(fitted),
                 "--out", str(out)]) == 0
    assert load_topology(out).meta["acceptance"] == load_topology(fitted).meta["acceptance"]


def test_bursty_takes_p_t_from_a_file_and_p_s_from_the_regime(capsys, tmp_path, topo_file):
    fitted = tmp_path / "fit.json"  # its p_s (0.5 by depth) is replaced by the regime's two values
    save_topology(Topology.from_nodes(NODES).with_meta(acceptance={"p_s": [0.5, 0.4], "p_t": [0.1, 0.05]}), fitted)
    common = ["simulate", "--topology", topo_file, "--bursty", "0.8,0.2,0.05,0.05", "--cycles", "20000", "--json"]
    by_file = run_json(capsys, [*common, "--acceptance-from", str(fitted)])
    by_flags = run_json(capsys, [*common, "--p-t", "0.1,0.05"])
    assert by_file == by_flags


@pytest.mark.parametrize("extra,needle", [
    ([], "--p-s and --p-t required (or --acceptance-from TOPOLOGY)"),
    (["--p-s", "0.5"], "--p-t required (or --acceptance-from TOPOLOGY)"),
    (["--acceptance-from", "FIT", "--p-t", "0.1"], "--acceptance-from gives the acceptance; drop --p-t"),
    (["--acceptance-from", "PLAIN"], "holds no 'acceptance' (goose optimize and fit-acceptance --out write one)"),
    (["--acceptance-from", "missing.json"], "missing.json: no such file"),
    # fuzz review, 7 Dec: a typo was dropped unsaid and the file priced without its override
    (["--acceptance-from", "TYPO"], "TYPO: meta: acceptance: unknown key 'p_t_chian' (an acceptance holds p_s, p_t, "
                                    "model, p_t_spine, p_t_chain); did you mean 'p_t_chain'?"),
])
def test_acceptance_flags_or_file_one_line(capsys, tmp_path, topo_file, extra, needle):
    fitted = tmp_path / "fit.json"
    save_topology(Topology.from_nodes(NODES).with_meta(acceptance={"p_s": 0.5, "p_t": 0.1}), fitted)
    typo = tmp_path / "typo.json"
    typo.write_text(fitted.read_text().replace('"p_t": 0.1', '"p_t": 0.1, "p_t_chian": 0.9'))
    names = {"FIT": str(fitted), "PLAIN": topo_file, "TYPO": str(typo)}
    extra = [names.get(x, x) for x in extra]
    needle = needle.replace("TYPO", str(typo))
    assert main(["yield", "--topology", topo_file, *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_a_files_top_k_bounds_the_ranks_unless_given(capsys, tmp_path):
    # practitioner review, 6 Dec: a fit of traces recording ranks 0-2 (top_k 3) drafted ranks 3-9 at the last p_t
    fitted = tmp_path / "fit.json"
    acceptance = {"p_s": 0.6, "p_t": [0.69, 0.16, 0.065]}
    save_topology(Topology.from_nodes(NODES[:4]).with_meta(acceptance=acceptance, top_k=3), fitted)
    out = tmp_path / "best.json"
    base = ["optimize", "--budget", "20", "--acceptance-from", str(fitted), "--out", str(out), "--json"]
    run_json(capsys, base)
    assert load_topology(out).meta["top_k"] == 3 and max(load_topology(out).rank) == 2
    run_json(capsys, [*base, "--top-k", "5"])
    assert load_topology(out).meta["top_k"] == 5 and max(load_topology(out).rank) == 3  # rank 4 breaks exclusivity
    run_json(capsys, ["optimize", "--budget", "20", "--p-s", "0.6", "--p-t", "0.69,0.16,0.065", "--out", str(out), "--json"])
    assert load_topology(out).meta["top_k"] == 10  # without a file: the paper's 10, the last p_t repeated
