"""Tree choices <-> topologies: round trips, the textbook E[tau] of a choices list, bad lists."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import random_topology
from goose_theory.acceptance import Acceptance
from goose_theory.choices import (MAX_NODES, MAX_PATH, MAX_RANKS, MAX_TEXT, ChoicesError, choices_from_topology,
                                  choices_text, load_choices, parse_choices_text, portability_notes, save_choices,
                                  topology_from_choices)
from goose_theory.topology import TRANSITION, Topology
from goose_theory.yields import exact_yield


def random_choices(rng: np.random.Generator, n: int, max_rank: int = 6, max_depth: int = 5) -> list[list[int]]:
    """A random prefix-closed set of rank paths, ranks drawn with gaps (a tree may skip a rank)."""
    paths: set[tuple[int, ...]] = set()
    while len(paths) < n:
        parent = () if not paths or rng.random() < 0.3 else sorted(paths)[int(rng.integers(len(paths)))]
        if len(parent) < max_depth:
            paths.add(parent + (int(rng.integers(max_rank + 1)),))
    order = rng.permutation(len(paths))
    listed = sorted(paths)
    return [list(listed[i]) for i in order]


def textbook_tau(paths, p_t) -> float:
    """E[tau] = 1 + sum over nodes of the product of the rank acceptances along the node's path:
    the formula of Medusa's and Sequoia's tree searches (at most one sibling can be the target's
    token, so a path is accepted with the product of its ranks' rates)."""
    rate = lambda r: p_t[min(r, len(p_t) - 1)]  # ranks past the list share its last rate
    return 1.0 + sum(math.prod(rate(r) for r in path) for path in paths)


@pytest.mark.parametrize("seed", range(5))
def test_exact_yield_of_imported_choices_is_the_textbook_sum(seed):
    rng = np.random.default_rng(seed)
    paths = random_choices(rng, int(rng.integers(1, 60)))
    # exclusive model: a node's children's rates sum to at most 1 (7 ranks: 3 x 0.25 + 4 x 0.05)
    p_t = sorted(rng.uniform(0.01, 0.25, size=3), reverse=True) + [0.05]
    topo = topology_from_choices(paths)
    tau = exact_yield(topo, Acceptance.parse(0.0, list(p_t))).expected_tau
    assert tau == pytest.approx(textbook_tau(paths, p_t), rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_round_trip_keeps_the_paths(seed):
    rng = np.random.default_rng(seed)
    paths = random_choices(rng, int(rng.integers(1, 80)))
    exported = choices_from_topology(topology_from_choices(paths))
    assert exported == sorted(paths, key=lambda p: (len(p), p))


@pytest.mark.parametrize("seed", range(5))
def test_transition_only_topology_round_trips_to_the_same_tree(seed):
    topo = random_topology(np.random.default_rng(seed), 40, spine_prob=0.0)
    back = topology_from_choices(choices_from_topology(topo))
    # same tree up to node order: compare each node's path
    assert choices_from_topology(back) == choices_from_topology(topo)
    acc = Acceptance.parse(0.0, [0.3, 0.1, 0.05, 0.01])
    assert exact_yield(back, acc).expected_tau == pytest.approx(exact_yield(topo, acc).expected_tau, rel=1e-12)


def test_export_sorts_by_length_then_path():
    # nodes listed depth-first, ranks out of order: the export is Medusa's (len, path) order
    topo = Topology.from_nodes([(-1, "root", 0), (0, "transition", 1), (1, "transition", 1), (1, "transition", 0),
                                (0, "transition", 0), (4, "transition", 0)])
    assert choices_from_topology(topo) == [[0], [1], [0, 0], [1, 0], [1, 1]]


def test_tuples_in_any_order_and_empty_list():
    topo = topology_from_choices([(0, 0), (1,), (0,)])
    assert topo.parent == (-1, 0, 0, 1) and topo.rank == (0, 0, 1, 0)
    assert all(s == TRANSITION for s in topo.source[1:])
    assert topology_from_choices([]).budget == 0 and choices_from_topology(Topology.root_only()) == []


def test_depth_bound_follows_the_deepest_path():
    assert topology_from_choices([[0]]).max_depth == 6
    deep = [[0] * d for d in range(1, 10)]
    assert topology_from_choices(deep).max_depth == 9


def test_spine_refused_on_export():
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    with pytest.raises(ChoicesError, match="1 spine node"):
        choices_from_topology(topo)


@pytest.mark.parametrize("nodes", [[(0, "transition", r) for r in range(10_001)],  # wide
                                   [(i, "transition", 0) for i in range(65)]])  # deep
def test_export_refuses_what_import_would_refuse(nodes):
    """Fuzz review, 7 Dec: a 20,000-node tree was exported to a file choices import then refused."""
    tree = Topology.from_nodes([(-1, "root", 0), *nodes], max_depth=65)
    with pytest.raises(ChoicesError, match="a choices list here holds at most 10000 paths of 64"):
        choices_from_topology(tree)
    paths = choices_from_topology(Topology.from_nodes([(-1, "root", 0), *nodes[:64]], max_depth=65))
    assert topology_from_choices(paths).budget == 64  # at the limits: both ways


@pytest.mark.parametrize("bad,needle", [
    ({"0": [0]}, "must be a list of rank paths"),
    ("[[0]]", "must be a list of rank paths"),
    ([[0], []], "non-empty list of ranks"),
    ([[0], 1], "non-empty list of ranks"),
    ([[0], [True]], "ranks must be integers"),
    ([[0], [-1]], "ranks must be integers"),
    ([[0.0]], "ranks must be integers"),
    ([[40000]], "ranks must be integers in 0..32767"),
    ([[0], [0]], r"path \[0\] appears twice"),
    ([[0], (0,)], r"path \[0\] appears twice"),
    ([[0, 1]], r"path \[0, 1\] has no parent: \[0\]"),
    ([[0], [0, 0, 0]], r"has no parent: \[0, 0\]"),
    ([[0] * (MAX_PATH + 1)], "deeper than 64"),
    ([[i] for i in range(MAX_NODES + 1)], "more than the 10000 nodes"),
])
def test_bad_choices_one_line(bad, needle):
    with pytest.raises(ChoicesError, match=needle) as info:
        topology_from_choices(bad)
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_parse_json_and_python_literals():
    assert parse_choices_text("[[0], [1, 2]]") == [[0], [1, 2]]
    assert parse_choices_text(" [(0,), (0, 1)]\n") == [(0,), (0, 1)]
    for text in ("[[0], [1]", "__import__('os')", "[(0,), x]", "[" * 100_000, "[" + "9" * 5000 + "]"):
        with pytest.raises(ChoicesError, match="neither JSON"):
            parse_choices_text(text)


def test_file_round_trip(tmp_path):
    paths = [[0], [1], [0, 0]]
    save_choices(paths, tmp_path / "c.json")
    assert (tmp_path / "c.json").read_text() == choices_text(paths) == "[[0], [1], [0, 0]]\n"
    topo = load_choices(tmp_path / "c.json")
    assert choices_from_topology(topo) == paths and topo.meta["imported_from"] == "c.json"


def test_bad_file_names_the_file(tmp_path):
    bad = tmp_path / "c.txt"
    bad.write_text("[[0, 1]]")
    with pytest.raises(ChoicesError, match=r"c\.txt: path \[0, 1\] has no parent"):
        load_choices(bad)
    bad.write_bytes(b"\xff[[0]]")
    with pytest.raises(ChoicesError, match=r"c\.txt: not UTF-8 text, so not a tree choices file"):
        load_choices(bad)
    with pytest.raises(ChoicesError, match="is a directory"):
        load_choices(tmp_path)
    with pytest.raises(ChoicesError, match="no such file"):
        load_choices(tmp_path / "missing.json")


def test_portability_notes():
    assert portability_notes([[0], [1], [0, 0], [1, 0]]) == []  # ranks 0-9, no gaps, 2 then 1 child per node
    notes = portability_notes([[0], [1], [3], [0, 0], [1, 0], [3, 0]])
    assert len(notes) == 1 and "path [3] without [2]" in notes[0]
    notes = portability_notes([[i] for i in range(12)])
    assert notes == ["rank 11 is past the top 10 that Medusa and EAGLE-1 draft"]
    notes = portability_notes([[0], [1], [0, 0]])  # vLLM: level 1 has a node with a child and one without
    assert len(notes) == 1 and notes[0].startswith("levels not uniform (level 1: 0 to 1 children per node)")
    # vLLM's own formula, children per level = nodes(L + 1) // nodes(L), describes a uniform tree exactly
    uniform = [[a] for a in range(3)] + [[a, b] for a in range(3) for b in range(2)] + [[a, b, 0] for a in range(3)
                                                                                     for b in range(2)]
    assert portability_notes(uniform) == []


def test_python_source_of_named_lists_is_parsed_not_run(tmp_path):
    source = ("# trees by model\nimport os\nsmall = [[0], [1], [0, 0]]\nbig = [(0,), (1,), (2,), (0, 0)]\n"
              "other = os.getcwd()\nwidth = 3\nvllm = '[(0,), (1,)]'\n")
    assert parse_choices_text(source, name="big") == [(0,), (1,), (2,), (0, 0)]
    assert parse_choices_text(source, name="vllm") == [(0,), (1,)]  # a string holding the literal
    with pytest.raises(ChoicesError, match=r"assigns 3 lists \(small, big, vllm\): pick one with --name"):
        parse_choices_text(source)
    with pytest.raises(ChoicesError, match=r"no list assigned to 'other' \(it assigns small, big, vllm\)"):
        parse_choices_text(source, name="other")
    assert parse_choices_text("tree = [[0], [0, 0]]\n") == [[0], [0, 0]]  # the only one
    (tmp_path / "trees.py").write_text(source)
    topo = load_choices(tmp_path / "trees.py", name="small")
    assert choices_from_topology(topo) == [[0], [1], [0, 0]] and topo.meta["imported_from"] == "trees.py:small"


def test_byte_order_mark_and_quoted_lists():
    assert parse_choices_text("\ufeff[[0], [1]]") == [[0], [1]]
    assert parse_choices_text('"[(0,), (0, 0)]"') == [(0,), (0, 0)]  # vLLM's speculative_token_tree, as a JSON string
    with pytest.raises(ChoicesError, match="a string that is not a list literal"):
        parse_choices_text('"not a tree"')


def test_a_json_object_with_a_key_twice_is_named_not_taken_for_python():
    # review, 7 Dec: it failed as JSON, then Python's literal parser took the last entry's list and the
    # error said "must be a list of rank paths ..., got dict"
    with pytest.raises(ChoicesError, match="the key 'medusa_choices' appears twice in one object"):
        parse_choices_text('{"medusa_choices": [[0]], "medusa_choices": [[0], [1]]}')


@pytest.mark.parametrize("text,needle", [
    ("[" + "0," * (MAX_RANKS + MAX_NODES + 1) + "]", "more than the 640000 ranks"),  # refused before parsing
    ("x = 1\n" * 200_000, "larger than 1 MB for Python"),  # no commas, but a Python parse of 1.2 MB
    ("[" + "0, " * 100 + "]" + " " * (MAX_TEXT - 1000), "not JSON"),  # JSON path fails; too big for literal_eval
])
def test_texts_too_big_to_parse_are_refused_before_parsing(text, needle):
    with pytest.raises(ChoicesError, match=needle):
        parse_choices_text(text)


def test_runtime_json_configs():
    vllm = '{"method": "eagle", "num_speculative_tokens": 3, "speculative_token_tree": "[(0,), (1,), (0, 0)]"}'
    assert parse_choices_text(vllm) == [(0,), (1,), (0, 0)]
    nested = '{"speculative_config": {"speculative_token_tree": "[(0,)]"}, "model": "m"}'
    assert parse_choices_text(nested) == [(0,)]
    assert parse_choices_text('{"medusa_choices": [[0], [0, 0]]}') == [[0], [0, 0]]
    assert parse_choices_text('{"mine": [[0]], "tree_choices": [[1]]}', name="mine") == [[0]]
    with pytest.raises(ChoicesError, match="a JSON object without an entry 'other'"):
        parse_choices_text('{"mine": [[0]]}', name="other")
    with pytest.raises(ChoicesError, match=r"--name picks another entry"):
        parse_choices_text('{"mine": [[0]]}')
    with pytest.raises(ChoicesError, match="this is a JSON list"):
        parse_choices_text("[[0]]", name="x")
    # two trees in one config: eagle_choices was taken silently (walkthrough, 5 Dec); --name picks
    both = '{"eagle_choices": [[0]], "medusa_choices": [[0], [1]]}'
    with pytest.raises(ChoicesError, match=r"with 2 trees \(eagle_choices, medusa_choices\): pick one with --name"):
        parse_choices_text(both)
    assert parse_choices_text(both, name="medusa_choices") == [[0], [1]]
