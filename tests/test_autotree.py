"""auto: the cost-aware optimal tree chosen online. Choices follow the latency profile, the
estimates follow what the walk observes, and decoding stays lossless."""
from __future__ import annotations

import pytest

from goose_theory.latency import LatencyProfile
from goose_theory.topology import SPINE
from goose_runtime.autotree import AutoPolicy
from goose_runtime.decoder import DecodeConfig, Decoder
from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle

FLAT = LatencyProfile(sizes=(1, 64), seconds=(0.040, 0.041))     # big trees nearly free
STEEP = LatencyProfile(sizes=(1, 2, 64), seconds=(0.040, 0.080, 1.0))  # any tree doubles the step


def test_flat_profile_builds_big_trees_steep_profile_plain_steps():
    assert AutoPolicy(FLAT, p_s=0.6, p_t_root=0.2).choose(match_len=8).budget >= 40
    assert AutoPolicy(STEEP, p_s=0.3, p_t_root=0.1, p_t_spine=0.05, p_t_chain=0.2).choose(match_len=8).budget == 0
    # a strong, long match pays even on the steep profile
    strong = AutoPolicy(STEEP, p_s=0.95, p_t_root=0.1).choose(match_len=20)
    assert strong.budget > 0 and strong.spine_length > 0


def test_no_spine_past_what_the_matcher_offers():
    for length in (0, 1, 3, 8):
        topo = AutoPolicy(FLAT, p_s=0.9, p_t_root=0.3).choose(match_len=length)
        assert topo.spine_length <= length


def test_decisions_are_cached_on_the_quantised_state():
    policy = AutoPolicy(FLAT, p_s=0.6, p_t_root=0.2)
    first = policy.choose(match_len=5)
    policy.p_s += 0.001  # same bucket
    assert policy.choose(match_len=5) is first and len(policy._choices) == 1


def test_observe_updates_only_reached_nodes():
    policy = AutoPolicy(FLAT, p_s=0.5, p_t_root=0.5, p_t_spine=0.5, p_t_chain=0.5, p_t_rest=0.5, alpha=0.5)
    # root -> spine(1) -> spine(2); root -> transition rank 0 (3), rank 1 (4); node 5 under the
    # rejected 3 (not reached); node 6: transition rank 0 under the accepted spine node 1 (a hit)
    parent, source = [-1, 0, 1, 0, 0, 3, 1], [0, SPINE, SPINE, 2, 2, 2, 2]
    rank, token = [0, 0, 0, 0, 1, 0, 0], [9, 11, 12, 13, 14, 15, 16]
    argmax = [11, 16, 0, 0, 0, 0, 0]   # spine 1 accepted; at node 1 the argmax is 16 (node 6)
    policy.observe(parent, source, rank, token, argmax, path=[0, 1])
    assert policy.p_s == pytest.approx(0.5 * 0.5 + 0.5 * 0.5)  # 1 of 2 reached spine nodes matched
    assert policy.p_t_root == pytest.approx(0.25) and policy.p_t_rest == pytest.approx(0.25)
    assert policy.p_t_spine == pytest.approx(0.75) and policy.p_t_chain == 0.5  # chain: nothing reached


def test_auto_is_lossless_on_the_tiny_model():
    bundle = tiny_random_bundle()
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    ar = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=24)).decode(prompt)
    for profile in (FLAT, STEEP):
        out = Decoder(bundle, parse_method("auto"), DecodeConfig(max_new_tokens=24, latency=profile)).decode(prompt)
        assert out.token_ids == ar.token_ids
        assert sum(c.tau for c in out.cycles) == len(out.token_ids)


def test_auto_needs_a_latency_profile():
    with pytest.raises(ValueError, match="needs a latency profile"):
        Decoder(tiny_random_bundle(), parse_method("auto"), DecodeConfig())
