"""dyntree.py (``auto``): calibration, best-first growth, the cost-aware cut, and losslessness."""
from __future__ import annotations

import pytest

from goose_theory.latency import LatencyProfile
from goose_theory.topology import SPINE, TRANSITION
from goose_runtime.adjacency import AdjacencyTable
from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.dyntree import (N_BINS, N_SPINE, N_STORE, ROOT_ALONE, ROOT_WITH_SPINE, STORE_KEY, UNDER_TRANSITION,
                                   Calibration, DynamicPolicy, _best_size, _grow)
from goose_runtime.matcher import NO_MATCH, Match
from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.store import Guess

import numpy as np

FLAT = LatencyProfile(sizes=(1, 64), seconds=(0.040, 0.041))     # big trees nearly free
STEEP = LatencyProfile(sizes=(1, 2, 64), seconds=(0.040, 0.080, 1.0))  # any tree doubles the step


def table_with(rows: dict[tuple[int, int], list[tuple[int, float]]]) -> AdjacencyTable:
    adj = AdjacencyTable(100, top_k=3, n_slots=1024)
    for (prev, cur), succ in rows.items():
        toks = np.array([[t for t, _ in succ] + [0] * (3 - len(succ))])
        probs = np.array([[p for _, p in succ] + [-np.inf] * (3 - len(succ))], dtype=np.float32)
        adj.update(np.array([prev]), np.array([cur]), toks, probs)
    return adj


def test_calibration_keys_and_learning():
    cal = Calibration(prior_weight=2.0, decay=1.0)
    assert Calibration.spine_key(False, 1) == 0 and Calibration.spine_key(True, 9) == N_SPINE - 1
    assert Calibration.transition_key(ROOT_ALONE, 0.0) == N_SPINE
    assert Calibration.transition_key(UNDER_TRANSITION, 0.95) == N_SPINE + 4 * N_BINS - 1
    key = Calibration.transition_key(ROOT_WITH_SPINE, 0.6)
    prior = cal.q[key]
    cal.observe([key] * 8, [False] * 8)
    assert cal.q[key] == pytest.approx(2 * prior / 10)          # Beta posterior mean
    cal.observe([0, 0], [True, True])
    assert cal.q[0] == pytest.approx((2 + 2 * 0.6) / 4)
    forgetful = Calibration(decay=0.5)
    forgetful.observe([0], [False])
    forgetful.observe([], [])
    assert forgetful.seen[0] == pytest.approx(0.5)


def test_best_size_maximises_tokens_per_second():
    cost = [1.0, 1.1, 1.2, 2.0]
    assert _best_size([0.9, 0.5, 0.4], cost) == 2      # 2.4 / 1.2 beats 1.9/1.1 and 2.8/2.0
    assert _best_size([0.05, 0.01, 0.0], cost) == 0    # nothing pays: a plain step


def test_growth_is_best_first_and_every_prefix_is_a_tree():
    adj = table_with({(1, 2): [(10, 0.9), (11, 0.05)], (2, 10): [(12, 0.8)], (10, 12): [(13, 0.7)],
                      (2, 20): [(21, 0.5)]})
    policy = DynamicPolicy(FLAT, max_budget=10, top_k=3, calibration=Calibration(spine_prior=0.97))
    tree, keys = policy.build(Match((20, 22, 23), 3, 3, 2), adj, 1, 2)
    assert tree.source[1] == SPINE and tree.token[1] == 20       # the confident spine goes first
    assert tree.source[2] == SPINE and tree.parent[2] == 1        # 0.97**2 beats the prior 0.8 of bin [0.7, 0.9)
    assert all(tree.parent[i] < i for i in range(1, tree.n_nodes))
    assert len(keys) == tree.n_nodes and keys[0] == -1
    assert TRANSITION in tree.source and 10 in tree.token         # the strong transition is placed
    assert len(set(zip(tree.parent, tree.token))) == tree.n_nodes  # siblings distinct


def test_cost_decides_the_size():
    adj = table_with({(1, 2): [(10, 0.9), (11, 0.3), (14, 0.1)]})
    big, _ = DynamicPolicy(FLAT, max_budget=10, top_k=3).build(NO_MATCH, adj, 1, 2)
    none, keys = DynamicPolicy(STEEP, max_budget=10, top_k=3).build(NO_MATCH, adj, 1, 2)
    assert big.n_nodes == 4 and none.n_nodes == 1 and keys == [-1]
    assert none.children == [[]]


def test_observe_counts_only_reached_nodes():
    adj = table_with({(1, 2): [(10, 0.9), (11, 0.3)], (2, 10): [(12, 0.8)], (2, 11): [(13, 0.8)]})
    policy = DynamicPolicy(FLAT, max_budget=10, top_k=3, calibration=Calibration(decay=1.0))
    tree, keys = policy.build(NO_MATCH, adj, 1, 2)
    argmax = [10 if t == 2 else 99 for t in tree.token]  # root -> 10 accepted, nothing below matches
    node10 = tree.token.index(10)
    policy.observe(tree, keys, argmax, [0, node10])
    reached = {keys[i] for i in range(1, tree.n_nodes) if tree.parent[i] in (0, node10)}
    assert reached and all(policy.calibration.seen[k] > 0 for k in reached)
    unreached = {keys[i] for i in range(1, tree.n_nodes)} - reached
    assert all(policy.calibration.seen[k] == 0 for k in unreached)


def test_store_guess_is_a_root_candidate_of_its_own_class():
    adj = table_with({(1, 2): [(10, 0.4), (11, 0.05)], (2, 10): [(12, 0.5)], (2, 30): [(31, 0.9)]})
    cal = Calibration(decay=1.0)
    # one class per share bin, after the transitions; priced at first by the bin's mid share x 0.6
    assert STORE_KEY == N_SPINE + 4 * N_BINS and len(cal.q) == STORE_KEY + N_STORE
    assert [Calibration.store_key(s) for s in (0.0, 0.19, 0.2, 0.5, 0.96, 1.0)] == \
        [STORE_KEY, STORE_KEY, STORE_KEY + 1, STORE_KEY + 2, STORE_KEY + 5, STORE_KEY + 5]
    assert cal.q[STORE_KEY] == pytest.approx(0.06) and cal.q[STORE_KEY + 5] == pytest.approx(0.585)
    policy = DynamicPolicy(FLAT, max_budget=10, top_k=3, calibration=cal)
    sure, unsure = Guess(30, 2, 0.97), Guess(30, 2, 0.1)
    tree, keys = policy.build(NO_MATCH, adj, 1, 2, sure)
    at = tree.token.index(30)
    assert (tree.parent[at], tree.source[at], tree.rank[at], keys[at]) == (0, TRANSITION, 3, STORE_KEY + 5)
    assert at == 1  # priced above the table's 0.4 candidate (0.585 against 0.425): the first node grown
    assert 31 in tree.token and tree.parent[tree.token.index(31)] == at  # the table's successors of the guess
    low, low_keys = policy.build(NO_MATCH, adj, 1, 2, unsure)
    assert low_keys[low.token.index(30)] == STORE_KEY and low.token.index(30) > low.token.index(12)  # after 10 -> 12
    # a guess the table already has under the root, or any guess in a matched cycle: not drafted again
    dup, dup_keys = policy.build(NO_MATCH, adj, 1, 2, Guess(11, 1, 0.97))
    assert not set(dup_keys) & set(range(STORE_KEY, STORE_KEY + N_STORE)) and dup.token.count(11) == 1
    matched, m_keys = policy.build(Match((20,), 3, 1, 1), adj, 1, 2, sure)
    assert 30 not in matched.token
    # the walk teaches the class: a guess that never matches (the table's 10 always does) loses its price
    for _ in range(20):
        tree, keys = policy.build(NO_MATCH, adj, 1, 2, sure)
        policy.observe(tree, keys, [10] + [99] * (tree.n_nodes - 1), [0, tree.token.index(10)])
    tree, keys = policy.build(NO_MATCH, adj, 1, 2, sure)
    assert cal.q[STORE_KEY + 5] < 0.1 and cal.q[keys[tree.token.index(10)]] > 0.9
    assert 30 not in tree.token or tree.token.index(30) > tree.token.index(10)
    assert cal.q[STORE_KEY] == pytest.approx(0.06)  # other share bins untouched


def test_auto_is_lossless_on_the_tiny_model():
    bundle = tiny_random_bundle()
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    ar = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=24)).decode(prompt)
    for profile in (FLAT, STEEP):
        out = Decoder(bundle, parse_method("auto"), DecodeConfig(max_new_tokens=24, latency=profile)).decode(prompt)
        assert out.token_ids == ar.token_ids
        assert sum(c.tau for c in out.cycles) == len(out.token_ids)
    assert max(c.tau for c in out.cycles) >= 1


def test_auto_needs_a_latency_profile():
    with pytest.raises(ValueError, match="needs a latency profile"):
        Decoder(tiny_random_bundle(), parse_method("auto"), DecodeConfig())


def test_early_stop_keeps_the_cut_of_growing_to_the_budget():
    """The exact stop (``_min_slopes``) must pick the same tree as growing every node the budget
    allows, on random tables, matches and latency profiles; and it grows fewer nodes to get there."""
    rng = np.random.default_rng(7)
    grown_with, grown_without, sizes_cut = 0, 0, []
    for trial in range(60):
        rows = {}
        for prev in range(1, 6):
            for cur in range(1, 30):
                toks = rng.choice(np.arange(1, 30), size=3, replace=False)
                probs = np.sort(rng.uniform(0, 1, 3) ** 2)[::-1]
                rows[prev, cur] = list(zip(toks.tolist(), probs.tolist()))
        adj = table_with(rows)
        step = 0.03 + 0.01 * rng.uniform()
        sizes = (1, 2, 3, 4, 9, 17, 33, 64)
        jump = rng.uniform(0.0, 0.5) * step          # a kernel switch between 3 and 4 rows
        per_row = rng.uniform(0.01, 0.3)               # from a GPU-like flat cost to a steep CPU one
        secs = tuple(step * (1 + per_row * (s - 1)) + (jump if s >= 4 else 0.0) for s in sizes)
        profile = LatencyProfile(sizes=sizes, seconds=secs)
        chain = tuple(rng.integers(1, 30, size=int(rng.integers(0, 8))).tolist())
        match = Match(chain, 3, 2, int(rng.integers(1, 3))) if chain else NO_MATCH
        cal = Calibration(spine_prior=float(rng.uniform(0.3, 0.95)))
        stopping = DynamicPolicy(profile, max_budget=40, top_k=3, calibration=cal)
        growing = DynamicPolicy(profile, max_budget=40, top_k=3, calibration=cal)
        growing.min_slope = [float("-inf")] * len(growing.min_slope)   # never stop early
        a, keys_a = stopping.build(match, adj, 1, 2)
        b, keys_b = growing.build(match, adj, 1, 2)
        assert (a.token, a.parent, a.source, keys_a) == (b.token, b.parent, b.source, keys_b), trial
        sizes_cut.append(a.n_nodes)
        grown_with += len(_grow(stopping, match, adj, 1, 2)[2])
        grown_without += len(_grow(growing, match, adj, 1, 2)[2])
    assert grown_with < 0.5 * grown_without
    assert min(sizes_cut) <= 3 and max(sizes_cut) > 10    # small and large trees were both cut
