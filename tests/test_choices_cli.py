"""``goose choices export|import``: the files it writes, what it prints, bad input."""
from __future__ import annotations

import json

import pytest

from goose_runtime.cli import main
from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology, load_topology, save_topology
from goose_theory.yields import exact_yield

TREE = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1), (1, "transition", 0)])


def test_export_prints_the_list(tmp_path, capsys):
    save_topology(TREE, tmp_path / "t.json")
    assert main(["choices", "export", str(tmp_path / "t.json")]) == 0
    assert json.loads(capsys.readouterr().out) == [[0], [1], [0, 0]]


def test_optimized_tree_exports_imports_and_keeps_its_tau(tmp_path, capsys):
    out = tmp_path / "opt.json"
    assert main(["optimize", "--budget", "20", "--p-s", "0", "--p-t", "0.4,0.15,0.08,0.05", "--out", str(out)]) == 0
    assert main(["choices", "export", str(out), "--out", str(tmp_path / "c.json")]) == 0
    assert main(["choices", "import", str(tmp_path / "c.json"), "--out", str(tmp_path / "back.json"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert printed["budget"] == 20 and printed["out"] == str(tmp_path / "back.json")
    acc = Acceptance.parse(0.0, [0.4, 0.15, 0.08, 0.05])
    back, original = load_topology(tmp_path / "back.json"), load_topology(out)
    assert exact_yield(back, acc).expected_tau == pytest.approx(original.meta["predicted_tau"], rel=1e-12)
    assert back.meta["rule"] == "tree-choices" and back.meta["imported_from"] == "c.json"


def test_import_python_literal(tmp_path, capsys):
    (tmp_path / "tree.py.txt").write_text("[(0,), (1,), (0, 0), (0, 1)]\n")
    assert main(["choices", "import", str(tmp_path / "tree.py.txt"), "--out", str(tmp_path / "t.json")]) == 0
    assert "4 nodes, depth 2, highest rank 1" in capsys.readouterr().out
    assert load_topology(tmp_path / "t.json").parent == (-1, 0, 0, 1, 1)


def test_export_refuses_a_spine_and_names_the_file(tmp_path, capsys):
    save_topology(Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]), tmp_path / "s.json")
    assert main(["choices", "export", str(tmp_path / "s.json"), "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 's.json'}: the tree has 1 spine node") and err.count("\n") == 1
    assert not (tmp_path / "c.json").exists()


def test_export_takes_a_regime_files_unmatched_tree(tmp_path, capsys):
    spine = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0)])  # TREE's budget
    save_topology(spine.with_meta(regimes={"unmatched": TREE.to_dict()}), tmp_path / "r.json")
    assert main(["choices", "export", str(tmp_path / "r.json")]) == 2  # its own tree has a spine
    assert "it is a regime file: --regime unmatched exports" in capsys.readouterr().err
    assert main(["choices", "export", str(tmp_path / "r.json"), "--regime", "unmatched"]) == 0
    assert json.loads(capsys.readouterr().out) == [[0], [1], [0, 0]]
    # a refusal that is not the spine's gets no spine advice (review, 7 Dec)
    deep = Topology.from_nodes([(-1, "root", 0), *[(i, "transition", 0) for i in range(65)]], max_depth=65)
    save_topology(deep.with_meta(regimes={"unmatched": TREE.to_dict()}), tmp_path / "deep.json")
    assert main(["choices", "export", str(tmp_path / "deep.json")]) == 2
    err = capsys.readouterr().err
    assert "at most 10000 paths of 64" in err and "--regime unmatched" not in err
    save_topology(TREE, tmp_path / "plain.json")
    assert main(["choices", "export", str(tmp_path / "plain.json"), "--regime", "unmatched"]) == 2
    err = capsys.readouterr().err
    assert "is not a regime file with an unmatched tree" in err and err.count("\n") == 1


def test_export_cuts_the_unmatched_trees_spare_slots_to_the_files_budget(tmp_path, capsys):
    # found in review: a regime file of budget 9 exported its unmatched tree's 18 slots, silently; a runtime
    # that drafts every listed path would verify twice the nodes the budget was chosen for
    spine = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])  # budget 2
    wide = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1), (1, "transition", 0),
                                (0, "transition", 2)])  # fill order: ranks 0, 1, 2 under the root, then [0, 0]
    save_topology(spine.with_meta(regimes={"unmatched": wide.to_dict()}), tmp_path / "r.json")
    assert main(["choices", "export", str(tmp_path / "r.json"), "--regime", "unmatched"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [[0], [1]]
    assert "unmatched tree has 4 slots for the file's budget of 2" in err and err.count("\n") == 1
    assert main(["choices", "export", str(tmp_path / "r.json"), "--regime", "unmatched", "--all-slots"]) == 0
    assert json.loads(capsys.readouterr().out) == [[0], [1], [2], [0, 0]]
    assert main(["choices", "export", str(tmp_path / "r.json"), "--all-slots"]) == 2
    assert "--all-slots goes with --regime unmatched" in capsys.readouterr().err


@pytest.mark.parametrize("text,needle", [("[[0, 1]]", "has no parent"), ("{}", "a JSON object without speculative_token_tree"),
                                         ("[[0], [0]]", "appears twice"), ("", "neither JSON")])
def test_import_bad_list_writes_nothing(tmp_path, capsys, text, needle):
    (tmp_path / "c.json").write_text(text)
    assert main(["choices", "import", str(tmp_path / "c.json"), "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and str(tmp_path / "c.json") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


def test_usage_errors(tmp_path, capsys):
    assert main(["choices"]) == 2
    assert "export TOPOLOGY.json or import" in capsys.readouterr().err
    (tmp_path / "c.json").write_text("[[0]]")
    assert main(["choices", "import", str(tmp_path / "c.json"), "--out", str(tmp_path / "c.json")]) == 2
    assert "would replace that input" in capsys.readouterr().err
    assert (tmp_path / "c.json").read_text() == "[[0]]"
    with pytest.raises(SystemExit) as info:  # argparse: --out is required
        main(["choices", "import", str(tmp_path / "c.json")])
    assert info.value.code == 2 and "required: --out" in capsys.readouterr().err
    assert main(["choices", "export", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_export_notes_go_to_stderr(tmp_path, capsys):
    gap = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 2)])
    save_topology(gap, tmp_path / "gap.json")
    assert main(["choices", "export", str(tmp_path / "gap.json")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [[0], [2]] and err.startswith("note: rank gaps (path [2] without [1])")


def test_import_one_list_of_a_python_source(tmp_path, capsys):
    (tmp_path / "trees.py").write_text("a = [[0]]\nb = [[0], [1], [1, 0]]\n")
    out = str(tmp_path / "t.json")
    assert main(["choices", "import", str(tmp_path / "trees.py"), "--out", out]) == 2
    assert "pick one with --name" in capsys.readouterr().err
    assert main(["choices", "import", str(tmp_path / "trees.py"), "--name", "b", "--out", out]) == 0
    assert load_topology(out).parent == (-1, 0, 0, 2)


def test_export_for_vllm_gives_its_config_entries_and_imports_back(tmp_path, capsys):
    # practitioner review, 6 Dec: vLLM takes the tree as a string of tuples in speculative_config, not a JSON list
    save_topology(TREE, tmp_path / "t.json")
    assert main(["choices", "export", str(tmp_path / "t.json"), "--format", "vllm"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries == {"num_speculative_tokens": 3, "speculative_token_tree": "[(0,), (1,), (0, 0)]"}
    config = tmp_path / "config.json"  # as a user merges them into --speculative-config
    config.write_text(json.dumps({"speculative_config": {"method": "eagle", **entries}}))
    assert main(["choices", "import", str(config), "--out", str(tmp_path / "back.json")]) == 0
    back = load_topology(tmp_path / "back.json")
    assert (back.parent, back.rank) == (TREE.parent, TREE.rank)
    save_topology(Topology.root_only(), tmp_path / "root.json")
    assert main(["choices", "export", str(tmp_path / "root.json"), "--format", "vllm"]) == 2
    assert "no node past the root, and vLLM refuses an empty speculative_token_tree" in capsys.readouterr().err
