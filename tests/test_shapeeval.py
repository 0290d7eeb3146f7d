"""Batched evaluation of recorded shapes against the per-tree reference (bit for bit), and the
packed validity check against the topology contract."""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from conftest import random_topology
from goose_theory.acceptance import Acceptance
from goose_theory.bound import bound_with_fallback
from goose_theory.fit import fit_traces
from goose_theory.fitcheck import check_group
from goose_theory.fitshapes import Shape
from goose_theory.shapeeval import RecordedShapes
from goose_theory.topology import Topology, TopologyError
from goose_theory.yields import yield_with_fallback

TRACES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "traces", "*.parquet")))


def _assert_same_as_per_tree(shapes: RecordedShapes, acceptance: Acceptance) -> int:
    """Every valid shape: E, Var, bound and the fallback flag equal to the per-tree functions'."""
    got = shapes.evaluate(acceptance)
    fell = 0
    for s in range(len(shapes)):
        topo = shapes.topology(s)
        if topo is None:
            assert np.isnan(got.expected[s]) and np.isnan(got.bound[s]) and not got.fell_back[s]
            continue
        y, fell_back = yield_with_fallback(topo, acceptance)
        b, bound_fell_back = bound_with_fallback(topo, acceptance)
        assert (got.expected[s], got.variance[s], got.bound[s], bool(got.fell_back[s])) == \
            (y.expected_tau, y.variance, b.lower_bound, fell_back), s
        assert bound_fell_back == fell_back
        fell += fell_back
    return fell


def test_random_trees_match_the_per_tree_evaluation_bit_for_bit():
    rng = np.random.default_rng(5)
    trees = [random_topology(rng, int(rng.integers(1, 40)), spine_prob=float(rng.random()),
                             gap_prob=0.3 * (i % 2)) for i in range(300)]  # every other tree with rank gaps
    shapes = RecordedShapes.from_topologies(trees)
    assert shapes.valid.all()
    for s, t in enumerate(trees):
        back = shapes.topology(s)
        assert (back.parent, back.source, back.rank) == (t.parent, t.source, t.rank)
    curves = Acceptance.parse("0.8,0.85,0.9", "0.4,0.1,0.05", p_t_spine="0.3,0.02", p_t_chain="0.55,0.09")
    falls = [_assert_same_as_per_tree(shapes, acc) for acc in
             (Acceptance.parse(0.7, 0.2), Acceptance.parse(0.7, 0.2, "independent"), curves,
              curves.with_model("independent"), Acceptance.parse(0.95, 0.5))]
    assert falls[1] == falls[3] == 0 and falls[4] > 0 and falls[0] < falls[4]  # the fallback is exercised


@pytest.mark.skipif(not TRACES, reason="needs the shipped traces")
def test_shipped_traces_match_the_per_tree_evaluation_bit_for_bit():
    fit = fit_traces(TRACES, n_boot=10, seed=0)
    shapes = RecordedShapes.pack(fit.counts.shapes)
    assert len(shapes) > 1000 and shapes.valid.all()
    checks = check_group(fit.overall, fit.counts)
    assert _assert_same_as_per_tree(shapes, checks.scalar) > 0  # p_s + p_t > 1 on some recorded roots
    _assert_same_as_per_tree(shapes, checks.selected)


def _mutated(rng: np.random.Generator) -> Shape:
    """A random valid tree with one random fault (or none)."""
    t = random_topology(rng, int(rng.integers(1, 12)), spine_prob=0.5)
    parent, source, rank = t.parent_array.copy(), t.source_array.copy(), t.rank_array.copy()
    i = int(rng.integers(0, t.n_nodes))
    fault = int(rng.integers(0, 8))
    if fault == 1:
        parent[i] = int(rng.integers(-2, t.n_nodes + 2))
    elif fault == 2:
        source[i] = int(rng.integers(0, 4))
    elif fault == 3:
        rank[i] = int(rng.choice([-1, 0, 1, 2, 32767, 32768]))
    elif fault == 4 and t.n_nodes > 2:  # a copy of another node's link: forks, repeated ranks
        j = int(rng.integers(1, t.n_nodes))
        parent[i], source[i], rank[i] = parent[j], source[j], rank[j]
    elif fault == 5:
        parent, source, rank = parent[:0], source[:0], rank[:0]
    return Shape(parent, source, rank)


def _contract_accepts(shape: Shape) -> bool:
    n = shape.parent.shape[0]
    depth = [0] * n
    for i in range(1, n):
        p = int(shape.parent[i])
        depth[i] = depth[p] + 1 if 0 <= p < i else 0
    limit = max(depth, default=0)
    try:
        Topology(tuple(shape.parent.tolist()), tuple(shape.source.tolist()), tuple(shape.rank.tolist()),
                 max_depth=limit, max_spine=limit)
    except TopologyError:
        return False
    return True


def test_packed_check_agrees_with_the_topology_contract():
    rng = np.random.default_rng(11)
    shapes = [_mutated(rng) for _ in range(3000)]
    packed = RecordedShapes.pack(shapes)
    expected = np.array([_contract_accepts(s) for s in shapes])
    assert 0.3 < expected.mean() < 0.9  # both kinds are well represented
    assert (packed.valid == expected).all()
    assert all((packed.topology(s) is None) == (not ok) for s, ok in enumerate(expected))
    bad = packed.evaluate(Acceptance.parse(0.6, 0.1))
    assert np.isnan(bad.expected[~expected]).all() and np.isfinite(bad.expected[expected]).all()


def test_no_shapes():
    shapes = RecordedShapes.pack([])
    assert len(shapes) == 0 and shapes.evaluate(Acceptance.parse(0.5, 0.1)).expected.shape == (0,)
