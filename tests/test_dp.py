"""The dynamic programme's tree reconstruction (a numba kernel) against the Python walk it
replaced, kept here as the reference: the same trees, node for node, and the same notes; the
notes name the child sets of the nodes that have children, by depth where transition nodes differ."""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory._dp import _filled, has_variants, solve, tree_notes
from goose_theory.acceptance import Acceptance
from goose_theory.candidate import Candidate, TreeBuilder
from goose_theory.topology import SPINE, TRANSITION


def _reference_solve(candidate: Candidate, *, budget: int) -> TreeBuilder:
    spec, (F, choice, alt) = _filled(candidate, budget)
    _, n_child, _, child_type, child_kind, child_rank, capacity, variant, types = spec
    top = min(budget, int(capacity[0]))
    values = F[0, : top + 1]
    best = float(values.max())
    b = max(i for i in range(top + 1) if values[i] >= best - 1e-12 * abs(best))
    builder = TreeBuilder(candidate)
    queue, head, used = [(0, 0, b)], 0, []
    while head < len(queue):
        node, t, left = queue[head]; head += 1
        while alt[t, left]:
            t = int(variant[t])
        kind, depth, (with_spine, ranks) = types[t]
        assert (kind, depth) == (builder.source[node], builder.depth[node])
        assert with_spine == (bool(n_child[t]) and child_kind[t, 0] == SPINE)
        remaining = left
        for j in range(n_child[t]):
            s = int(choice[t, j, remaining])
            if s:
                child = builder.add(node, int(child_kind[t, j]), int(child_rank[t, j]))
                queue.append((child, int(child_type[t, j]), s - 1))
                remaining -= s
        if remaining < left:  # the node has children: its child set is drafted
            used.append((kind, depth, (with_spine, ranks)))
    builder.notes.update(dict.fromkeys(tree_notes(candidate, used)))
    return builder


def _random_candidate(rng: np.random.Generator) -> Candidate:
    model = str(rng.choice(["exclusive", "independent"]))
    p_s = np.sort(rng.uniform(0.05, 0.95, int(rng.integers(1, 5))))[::-1]
    p_t = np.sort(rng.uniform(0.0, 0.5, int(rng.integers(1, 6))))[::-1]
    extra = {}
    if rng.random() < 0.4:
        extra = {"p_t_spine": rng.uniform(0.0, 0.4, 2), "p_t_chain": rng.uniform(0.0, 0.6, 3)}
    acc = Acceptance.parse(p_s, p_t, model, **extra)
    return Candidate(acc, max_depth=int(rng.integers(1, 8)), max_spine=int(rng.integers(0, 25)),
                     top_k=int(rng.integers(1, 12)), spine=bool(rng.random() < 0.9))


@pytest.mark.parametrize("seed", range(4))
def test_reconstruction_equals_the_python_walk(seed):
    rng = np.random.default_rng(seed)
    variants = 0
    for _ in range(60):
        cand = _random_candidate(rng)
        variants += has_variants(cand)
        for budget in (0, 1, 7, int(rng.integers(2, 120))):
            got, want = solve(cand, budget=budget), _reference_solve(cand, budget=budget)
            assert (got.parent, got.source, got.rank, got.depth, got.prob) == \
                (want.parent, want.source, want.rank, want.depth, want.prob)
            assert list(got.notes) == list(want.notes)
    assert variants  # the variant types (other child sets) are exercised


def test_notes_name_the_depth_where_transition_nodes_differ():
    cand = Candidate(Acceptance.parse(0.9, "0.66,0.37,0.37"), max_spine=1, top_k=3)
    first, best = (False, (0,)), (False, (1, 2))
    assert tree_notes(cand, [(TRANSITION, 1, best), (TRANSITION, 2, best), (TRANSITION, 1, best)]) == [
        "exclusive model: at transition nodes ranks 1, 2 of top_k=3 may be used (the best set whose p_t fits in 1; "
        "first fit in rank order does worse)"]  # one set everywhere: no depth
    assert tree_notes(cand, [(TRANSITION, 1, first), (TRANSITION, 2, best)]) == [
        "exclusive model: at transition nodes of depth 1 only rank 0 of top_k=3 may be used (p_t summed over "
        "more ranks would exceed 1)",
        "exclusive model: at transition nodes of depth 2 ranks 1, 2 of top_k=3 may be used (the best set whose p_t "
        "fits in 1; first fit in rank order does worse)"]
    assert [n.split(" only")[0].split(" ranks")[0] for n in tree_notes(cand, [(TRANSITION, 2, first), (TRANSITION, 2, best)])] == [
        "exclusive model: at some transition nodes of depth 2"] * 2
    full = Candidate(Acceptance.parse(0.9, "0.3,0.3,0.3"), max_spine=1, top_k=3)  # every rank fits: no note
    assert tree_notes(full, [(TRANSITION, 1, (False, (0, 1, 2)))]) == []
