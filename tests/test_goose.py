"""The adaptive Goose tree (build_goose, GoosePolicy, grow_branches) and the baselines' static
shapes (iso_topology, tr_topology)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goose_theory.acceptance import Acceptance
from goose_theory.allocation import harmonic_split
from goose_theory.optimize import build_topology
from goose_theory.topology import SPINE, TRANSITION
from goose_runtime.adjacency import AdjacencyTable
from goose_runtime.goose import GoosePolicy, build_goose, iso_topology, tr_topology
from goose_runtime.matcher import Match
from goose_runtime.trees import build_chain
from tests.conftest import V, check_tree, full_table


def test_chain_and_bypass():
    m = Match(tuple(range(10, 22)), 5, 3, 3)  # high confidence, 12 tokens -> bypass
    tree = build_goose(GoosePolicy(), m, full_table(), 1, 2, budget=60)
    assert tree.bypass and tree.token == [2] + list(range(10, 22)) and tree.parent == list(range(-1, 12))
    assert build_chain(2, m, 3).token == [2, 10, 11, 12]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 90), st.integers(0, 12), st.floats(0, 1), st.booleans())
def test_goose_tree_respects_budget_and_tiers(budget, spine_len, ema, confident):
    agree = 2 if confident else 1
    m = Match(tuple(range(40, 40 + spine_len)), 3 if spine_len else 0, 1, agree if spine_len else 0)
    policy = GoosePolicy(ema=ema)
    tree = build_goose(policy, m, full_table(), 1, 2, budget=budget)
    check_tree(tree)
    assert tree.n_nodes - 1 <= budget
    expect = min(spine_len, budget) if confident else min(spine_len, max(1, round(budget * policy.spine_ratio)))
    assert tree.n_spine == expect
    assert list(range(1, expect + 1)) == [i for i in range(tree.n_nodes) if tree.source[i] == SPINE]
    if not tree.bypass and budget <= 30:
        assert tree.n_nodes - 1 == budget  # a full table always fills a small budget


@pytest.mark.parametrize("ema", [0.1, 0.3, 0.5])
@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 16, 30, 60, 90])
def test_goose_builds_the_theory_paper_tree_when_every_node_has_candidates(budget, ema):
    # goose_theory's `paper` rule is the tree goose drafts from a full table (validate predicts goose by
    # it): the same spine, shares, recursive growth, carries and ranks, node for node
    chain = tuple(range(40, 60))
    rng = np.random.default_rng(7)
    table = AdjacencyTable(V, top_k=10)  # successors drawn off the chain's tokens: no spine token to skip
    toks = np.stack([rng.permutation(40)[:10] for _ in range(V)])
    table.update(np.full(V, -1), np.arange(V), toks, np.sort(rng.random((V, 10)))[:, ::-1].astype(np.float32))
    tree = build_goose(GoosePolicy(ema=ema), Match(chain, 3, 1, 1), table, 1, 2, budget=budget)
    topo = build_topology("paper", Acceptance.parse(ema, 0.02), budget=budget).topology
    assert (tuple(tree.parent), tuple(tree.source), tuple(tree.rank)) == (topo.parent, topo.source, topo.rank)


def test_policy_tiers_and_ema():
    p = GoosePolicy(ema=0.1)
    assert p.spine_ratio == 0.15
    p.observe(4, 4)  # all four accepted: observation 1.0
    assert abs(p.ema - (0.7 * 0.1 + 0.3)) < 1e-12 and p.spine_ratio == 0.30
    p.observe(4, 1)  # one accepted of two reached
    assert abs(p.ema - (0.7 * 0.37 + 0.3 * 0.5)) < 1e-12 and p.spine_ratio == 0.50
    p.observe(0, 0)
    assert abs(p.ema - 0.409) < 1e-12


def test_static_shapes():
    tr = tr_topology()
    assert tr.budget == 80 and int(tr.depth.max()) == 6
    widths = np.bincount(tr.depth)[1:]
    assert widths[0] >= widths[-1]  # wide at the top, narrow deep
    iso = iso_topology(3, 60)
    assert iso.budget == 60 and np.bincount(iso.depth).tolist()[:4] == [1, 3, 9, 27]


def test_grow_branches_min_score_drops_improbable_candidates():
    from goose_runtime.goose import grow_branches
    from goose_runtime.trees import new_tree
    table = AdjacencyTable(V, top_k=4)
    table.update(np.array([-1]), np.array([2]), np.array([[10, 11, 12, 13]]),
                 np.array([[0.6, 0.2, 0.009, 0.001]], dtype=np.float32))
    for min_score, want in ((0.0, [10, 11, 12, 13]), (0.01, [10, 11]), (0.7, [])):
        tree = new_tree(2)
        placed = grow_branches(tree, 0, 8, table, -1, top_k=4, max_depth=1, min_score=min_score)
        assert tree.token[1:] == want and placed == len(want)


def test_goose_branch_power_gives_the_best_rank_a_larger_subtree():
    # no match: the whole budget is a transition tree; power 2 (TR's split) favours rank 0 more
    def rank0_subtree(power):
        tree = build_goose(GoosePolicy(branch_power=power), Match(()), full_table(), 1, 2, budget=40)
        check_tree(tree)
        first = tree.children[0][0]
        inside = {first}
        for i in range(first + 1, tree.n_nodes):
            if tree.parent[i] in inside:
                inside.add(i)
        return tree.n_nodes - 1, len(inside)
    (n1, r1), (n2, r2) = rank0_subtree(1.0), rank0_subtree(2.0)
    assert n1 == n2 == 40 and r2 > r1


def _reference_grow(tree, node, budget, adj, before, *, top_k, max_depth, exclude=None, power=1.0, min_score=0.0):
    """grow_branches as first written (node by node with ``DraftTree.add``, all candidates listed
    first): the reference the faster builder must reproduce exactly."""
    from goose_runtime.trees import candidates
    if budget <= 0 or tree.depth[node] >= max_depth:
        return 0
    cands = candidates(adj, tree, node, before, exclude or set())
    if min_score > 0:
        cands = [c for c in cands if c[2] >= min_score]
    width = min(len(cands), top_k, max(1, -(-budget // 2)))
    if width == 0:
        return 0
    kids = [tree.add(node, TRANSITION, r, t, s) for r, t, s in cands[:width]]
    used, carry = width, 0
    shares = harmonic_split(budget - width, width, power)
    for kid, share in zip(kids, shares):
        if share + carry <= 0:
            continue
        placed = _reference_grow(tree, kid, share + carry, adj, before, top_k=top_k, max_depth=max_depth,
                                 power=power, min_score=min_score)
        carry = share + carry - placed
        used += placed
    return used


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 90), st.integers(0, 1000), st.sampled_from([1.0, 2.0]), st.sampled_from([0.0, 0.3]),
       st.integers(1, 10), st.booleans(), st.sampled_from(["prob", "logit", "nan"]))
def test_grow_branches_matches_the_reference(budget, seed, power, min_score, top_k, sparse, scores_are):
    from goose_runtime.goose import grow_branches
    from goose_runtime.trees import new_tree
    rng = np.random.default_rng(seed)
    table = full_table(seed)
    rows = rng.choice(V, V // 2, replace=False) if sparse else np.arange(V)
    if sparse or scores_are != "prob":  # rows missing or short (budgets pass to siblings); logits, NaN
        table.reset()
        toks = np.stack([rng.permutation(V)[:10] for _ in rows])
        scores = np.sort(rng.random((len(rows), 10)))[:, ::-1].astype(np.float32)
        if scores_are == "logit":  # goose's default harvest: raw logits, often negative
            scores = (6 * scores - 3).astype(np.float32)
        elif scores_are == "nan":
            scores[rng.random(scores.shape) < 0.2] = np.nan
        if sparse:
            scores[:, 6:] = -np.inf  # short rows: ranks 6-9 are absent
        table.update(np.full(len(rows), -1), rows, toks, scores)
    fast, ref = new_tree(2), new_tree(2)
    exclude = {int(table.lookup(-1, 2)[0][0])} if table.lookup(-1, 2)[0] else None
    got = grow_branches(fast, 0, budget, table, 1, top_k=top_k, max_depth=6, exclude=exclude, power=power,
                        min_score=min_score)
    want = _reference_grow(ref, 0, budget, table, 1, top_k=top_k, max_depth=6, exclude=exclude, power=power,
                           min_score=min_score)
    assert got == want
    for field in ("parent", "source", "rank", "token", "depth", "children", "spine_pos"):
        assert getattr(fast, field) == getattr(ref, field), field
    assert np.array_equal(np.array(fast.score), np.array(ref.score), equal_nan=True)


def test_a_node_with_no_room_lists_no_candidate():
    from goose_runtime.trees import candidates
    from goose_runtime.trees import new_tree
    table, tree = full_table(3), new_tree(2)
    first = table.lookup(-1, 2)[0][0]
    for exclude, min_score in ((None, 0.0), ({first}, 0.0), (None, 0.5)):   # the fast path and the filtered one
        assert candidates(table, tree, 0, -1, exclude, limit=0, min_score=min_score) == []
        assert len(candidates(table, tree, 0, -1, exclude, limit=3, min_score=0.0)) == 3


def test_budget_the_table_cannot_place_grows_under_the_guess():
    guess, table = 7, AdjacencyTable(V, top_k=10)  # a row for the guess only: none for the anchor 2
    table.update(np.array([-1]), np.array([guess]), np.arange(20, 30)[None],
                 np.linspace(0.9, 0.1, 10, dtype=np.float32)[None])
    none = Match((), 0, 0, 0)
    assert build_goose(GoosePolicy(), none, table, 1, 2, budget=4).token == [2]  # the table alone: nothing
    tree = build_goose(GoosePolicy(), none, table, 1, 2, budget=4, store_token=guess)
    check_tree(tree)
    # the three nodes left pass to the guess: two children (half of 3, rounded up), and the third has
    # nowhere to go (20 and 21 have no rows)
    assert tree.token[:2] == [2, guess] and tree.n_nodes == 4
    assert tree.children[0] == [1] and set(tree.token[2:]) <= set(range(20, 30))
    assert [t for t, p in zip(tree.token, tree.parent) if p == 1] == [20, 21]  # its best successors, as goose grows


def test_store_guess_takes_the_last_node_of_an_unmatched_tree():
    table, none = full_table(), Match((), 0, 0, 0)
    plain = build_goose(GoosePolicy(), none, table, 1, 2, budget=6)
    kids = [plain.token[c] for c in plain.children[0]]
    guess = next(t for t in range(V) if t not in plain.token)
    tree = build_goose(GoosePolicy(), none, table, 1, 2, budget=6, store_token=guess, top_k=10)
    check_tree(tree)
    assert tree.n_nodes == plain.n_nodes
    assert (tree.token[-1], tree.parent[-1], tree.source[-1], tree.rank[-1]) == (guess, 0, TRANSITION, 10)
    assert np.isnan(tree.score[-1])
    # the other nodes are goose's own tree at one node less
    five = build_goose(GoosePolicy(), none, table, 1, 2, budget=5)
    assert tree.token[:-1] == five.token and tree.parent[:-1] == five.parent
    # a guess the table drafts under the root anyway: the plain full-budget tree
    same = build_goose(GoosePolicy(), none, table, 1, 2, budget=6, store_token=kids[0])
    assert same.token == plain.token and same.parent == plain.parent
    # budget 1: the guess alone; a matched cycle ignores the guess
    assert build_goose(GoosePolicy(), none, table, 1, 2, budget=1, store_token=guess).token == [2, guess]
    m = Match((40, 41, 42), 3, 1, 1)
    assert build_goose(GoosePolicy(), m, table, 1, 2, budget=6, store_token=guess).token == \
        build_goose(GoosePolicy(), m, table, 1, 2, budget=6).token


def _unmatched_reference(table, budget, guess, **kw):
    """The store's unmatched tree as first written (grown at budget - 1, grown again at the full
    budget when the guess turned out to be a root child): what the builder must still produce."""
    from goose_runtime.goose import grow_branches
    from goose_runtime.trees import new_tree
    tree = new_tree(2, Match((), 0, 0, 0))
    placed = grow_branches(tree, 0, budget - 1, table, 1, **kw)
    if any(tree.token[kid] == guess for kid in tree.children[0]):
        tree = new_tree(2, Match((), 0, 0, 0))
        grow_branches(tree, 0, budget, table, 1, **kw)
    else:
        kid = tree.add(0, TRANSITION, kw["top_k"], guess)
        grow_branches(tree, kid, budget - 1 - placed, table, 1, **kw)
    return tree


@pytest.mark.parametrize("min_score", [0.0, 0.5])
def test_store_tree_equals_the_grow_twice_reference(min_score):
    # the builder checks the root's candidates before growing instead of growing twice
    table, none = full_table(seed=3), Match((), 0, 0, 0)
    policy = GoosePolicy(min_score=min_score)
    kw = dict(top_k=10, max_depth=6, min_score=min_score, power=policy.branch_power)
    duplicates = 0
    for budget in range(1, 22):
        plain = build_goose(policy, none, table, 1, 2, budget=budget)
        for guess in range(V):
            tree = build_goose(policy, none, table, 1, 2, budget=budget, store_token=guess)
            ref = _unmatched_reference(table, budget, guess, **kw)
            assert (tree.token, tree.parent, tree.rank) == (ref.token, ref.parent, ref.rank), (budget, guess)
            duplicates += tree.token == plain.token
    assert duplicates > 20  # both branches ran
