"""Shape tally against a plain-Python reference: one entry per distinct tree, exact per-cluster sums."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

import goose_theory.fitshapes as fitshapes
from goose_theory.fitshapes import ShapeTally


def _cycles(seed: int, n: int):
    """``n`` random cycles of three tree shapes: (cluster, tau, per-row parent, source, rank)."""
    trees = [([-1, 0, 0], [0, 1, 2], [0, 0, 0]), ([-1, 0, 1], [0, 1, 1], [0, 0, 0]), ([-1, 0, 0], [0, 2, 2], [0, 0, 1])]
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, 4)), int(rng.integers(1, 4)), trees[int(rng.integers(0, 3))]) for _ in range(n)]


def _add(tally: ShapeTally, cycles) -> None:
    parent = np.concatenate([np.array(t[0]) for _, _, t in cycles])
    source = np.concatenate([np.array(t[1]) for _, _, t in cycles])
    rank = np.concatenate([np.array(t[2]) for _, _, t in cycles])
    lens = np.array([len(t[0]) for _, _, t in cycles])
    roots = np.concatenate([[0], np.cumsum(lens)[:-1]])
    node = np.concatenate([np.arange(k) for k in lens])
    tally.add(node, parent, source, rank, roots, lens, np.array([c for c, _, _ in cycles]),
              np.array([tau for _, tau, _ in cycles]))


def _reference(cycles):
    sums = defaultdict(lambda: [0, 0, 0])
    for cluster, tau, tree in cycles:
        key = (cluster, tuple(map(tuple, tree)))
        sums[key][0] += 1
        sums[key][1] += tau
        sums[key][2] += tau * tau
    return sums


def _as_dict(shapes, table):
    trees = [(tuple(s.parent.tolist()), tuple(s.source.tolist()), tuple(s.rank.tolist())) for s in shapes]
    return {(int(r.cluster), trees[int(r.shape)]): [int(r.n), int(r.tau_sum), int(r.tau_sq)]
            for r in table.itertuples()}


def test_tally_equals_a_plain_python_count():
    cycles = _cycles(0, 200)
    tally = ShapeTally()
    for start in range(0, 200, 40):  # several batches, as a streamed file gives them
        _add(tally, cycles[start:start + 40])
    shapes, table = tally.table(np.arange(4))
    assert len(shapes) == 3 and _as_dict(shapes, table) == dict(_reference(cycles))


def test_merging_parts_and_the_order_of_cycles_change_nothing(monkeypatch):
    cycles = _cycles(1, 120)
    one = ShapeTally()
    _add(one, cycles)
    monkeypatch.setattr(fitshapes, "MERGE_PARTS", 2)  # merge after every second batch
    many = ShapeTally()
    for start in range(0, 120, 7):
        _add(many, cycles[::-1][start:start + 7])
    (s1, t1), (s2, t2) = one.table(np.arange(4)), many.table(np.arange(4))
    # shapes are numbered by hash, not by first appearance, so the tables are equal as they stand
    assert [s.parent.tolist() for s in s1] == [s.parent.tolist() for s in s2] and t1.equals(t2)


def test_clusters_are_renumbered_and_an_empty_tally_has_an_empty_table():
    tally = ShapeTally()
    _add(tally, [(0, 2, ([-1, 0], [0, 1], [0, 0])), (1, 1, ([-1, 0], [0, 1], [0, 0]))])
    _, table = tally.table(np.array([1, 0]))
    assert table["cluster"].tolist() == [0, 1] and table["tau_sum"].tolist() == [1, 2]
    shapes, empty = ShapeTally().table(np.zeros(0, np.int64))
    assert shapes == () and len(empty) == 0 and list(empty.columns) == ["cluster", "shape", "n", "tau_sum", "tau_sq"]
