"""The decoding loop on the tiny model: exact tree scoring, losslessness, EOS/length, records."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from goose_theory.choices import load_choices
from goose_theory.topology import Topology, save_topology
from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.kvcache import cache_for
from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.trees import new_tree
from goose_runtime.verify import MaskBuilder, forward

METHODS = ["ar", "pld", "tr", "iso:3", "mixed-iso:3", "goose", "goose@12", "topology", "choices"]


@pytest.fixture(scope="module")
def bundle():
    return tiny_random_bundle(seed=3)


def random_tree(rng: random.Random, n: int):
    tree = new_tree(rng.randrange(3, 500))
    for _ in range(n):
        tree.add(rng.randrange(tree.n_nodes), 2, 0, rng.randrange(3, 500))
    return tree


def sequential_logits(model, prefix: list[int], path: list[int]) -> torch.Tensor:
    """Plain causal decoding of prefix + path, one token at a time; logits of the last token."""
    cache, logits = cache_for(model), None
    for i, tok in enumerate(prefix + path):
        logits = model(input_ids=torch.tensor([[tok]]), position_ids=torch.tensor([[i]]), cache=cache,
                       use_cache=True).logits[0, -1]
    return logits


@pytest.mark.parametrize("attn", ["sdpa", "eager", "goose_sdpa"])
def test_tree_scoring_equals_sequential_decoding(attn):
    # Why a float mask: in transformers 5 a boolean 4D mask under eager attention scores a tree
    # wrongly without any error; the float 0 / dtype-min mask is right under both implementations.
    bundle = tiny_random_bundle(seed=1)
    bundle.model.config._attn_implementation = attn
    rng = random.Random(7)
    prefix = [rng.randrange(3, 500) for _ in range(9)]
    tree = random_tree(rng, 14)
    masks = MaskBuilder(torch.float32, torch.device("cpu"))
    with torch.inference_mode():
        cache = cache_for(bundle.model)
        forward(bundle.model, torch.tensor(prefix), torch.arange(9), masks.causal_mask(9), cache)
        ids = torch.tensor(tree.token)
        logits = forward(bundle.model, ids, torch.tensor(tree.depth) + 9, masks.tree_mask(tree.parent, 9), cache)
        for node in range(tree.n_nodes):
            path, v = [], node
            while v >= 0:
                path.append(tree.token[v]); v = tree.parent[v]
            ref = sequential_logits(bundle.model, prefix, path[::-1])
            torch.testing.assert_close(logits[node], ref, atol=1e-5, rtol=1e-5)


def repeating_prompts(seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    base = [rng.randrange(3, 500) for _ in range(25)]
    noisy = base * 2 + [rng.randrange(3, 500) for _ in range(5)] + base[:12]
    fresh = [rng.randrange(3, 500) for _ in range(40)]
    return [base * 3, noisy, fresh, [7]]


def make_method(name: str, tmp_path):
    if name == "topology":
        nodes = [(-1, "root", 0)] + [(i, "spine", 0) for i in range(6)]
        nodes += [(s, "transition", r) for s in range(4) for r in range(3)] + [(7, "transition", 0)]
        path = tmp_path / "spine6.json"
        save_topology(Topology.from_nodes(nodes), path)
        return parse_method(f"topology:{path}")
    if name == "choices":  # a Medusa/EAGLE-style rank-path list, imported as a topology file
        (tmp_path / "tree.txt").write_text("[(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 0, 0)]")
        save_topology(load_choices(tmp_path / "tree.txt"), tmp_path / "tree.json")
        return parse_method(f"topology:{tmp_path / 'tree.json'}")
    kind, _, b = name.partition("@")
    return parse_method(kind, budget=int(b) if b else None)


@pytest.mark.parametrize("method", METHODS[1:])
def test_every_method_is_lossless_against_ar(bundle, method, tmp_path):
    spec = make_method(method, tmp_path)
    cfg = DecodeConfig(max_new_tokens=60)
    ar = Decoder(bundle, parse_method("ar"), cfg)
    dec = Decoder(bundle, spec, cfg)
    taus = []
    for prompt in repeating_prompts():
        want, got = ar.decode(prompt), dec.decode(prompt)
        assert got.token_ids == want.token_ids
        assert sum(c.tau for c in got.cycles) == len(got.token_ids)
        taus.append(got.mean_tau)
    if method != "ar":
        assert max(taus) > 1.5  # drafting really happened (and was accepted) on the repeating prompts


@pytest.mark.parametrize("vocab", [512, 50257, 49152])  # the torch readout (two sizes) and the numba one
def test_an_exact_tie_at_the_top_is_broken_as_ar_breaks_it(vocab):
    # two lm_head rows alike: every step ties; greedy decoding (torch.argmax) takes the smaller id,
    # and a tree method read its top-10 with torch.topk, which took the other one (review, 3 Dec)
    bundle = tiny_random_bundle(seed=0, vocab_size=vocab)
    prompt, a, b = [5, 6, 7, 5, 6], 7, vocab - 3
    with torch.inference_mode():
        hidden = bundle.model.model(input_ids=torch.tensor([prompt])).last_hidden_state[0].mean(0)
        bundle.model.lm_head.weight[[a, b]] = 50 * hidden / hidden.norm()
        ids = list(prompt)
        for _ in range(8):  # the reference: greedy decoding by recomputing the whole sequence
            logits = bundle.model(input_ids=torch.tensor([ids])).logits[0, -1]
            assert logits[a] == logits[b]
            ids.append(int(torch.argmax(logits)))
    cfg = DecodeConfig(max_new_tokens=8)
    for method, budget in (("ar", None), ("pld", None), ("iso:2", 4), ("goose", 8), ("tr", 16)):
        got = Decoder(bundle, parse_method(method, budget=budget), cfg).decode(prompt).token_ids
        assert got == ids[len(prompt):] == [a] * 8, method


def test_goose_min_score_is_lossless_and_drafts_only_probable_candidates(bundle):
    # min_score makes goose harvest probabilities; every drafted transition must clear the bar
    # (the tiny random model spreads its mass thinly: its candidates score 0.0026-0.0038)
    cfg = DecodeConfig(max_new_tokens=60, min_score=0.003)
    ar = Decoder(bundle, parse_method("ar"), cfg)
    dec = Decoder(bundle, parse_method("goose", budget=16), cfg)
    plain = Decoder(bundle, parse_method("goose", budget=16), DecodeConfig(max_new_tokens=60))
    kept = dropped = 0
    for prompt in repeating_prompts():
        got = dec.decode(prompt)
        assert got.token_ids == ar.decode(prompt).token_ids
        scores = [s for c in got.cycles for src, s in zip(c.source, c.score) if src == "transition"]
        assert all(0.003 <= s <= 1.0 for s in scores)
        kept += len(scores)
        dropped += sum(len(c.parent) for c in plain.decode(prompt).cycles) - sum(len(c.parent) for c in got.cycles)
    assert kept > 0 and dropped > 0  # the threshold both let candidates through and cut some
    with pytest.raises(ValueError, match="min_score"):
        Decoder(bundle, parse_method("goose"), DecodeConfig(min_score=1.0))


def test_goose_branch_power_is_lossless(bundle):
    cfg = DecodeConfig(max_new_tokens=60, branch_power=2.0)
    ar, dec = Decoder(bundle, parse_method("ar"), cfg), Decoder(bundle, parse_method("goose", budget=30), cfg)
    for prompt in repeating_prompts():
        assert dec.decode(prompt).token_ids == ar.decode(prompt).token_ids
    with pytest.raises(ValueError, match="branch_power"):
        Decoder(bundle, parse_method("goose"), DecodeConfig(branch_power=0.0))


def test_eos_and_max_new_tokens_are_exact(bundle, tmp_path):
    prompt = repeating_prompts()[0]
    ref = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=50)).decode(prompt).token_ids
    eos = ref[17]
    first = ref.index(eos)
    with_eos = dataclasses.replace(bundle, eos_token_ids=(eos,))
    for method in METHODS:
        spec = make_method(method, tmp_path)
        for n in (1, 5, 23):
            got = Decoder(bundle, spec, DecodeConfig(max_new_tokens=n)).decode(prompt).token_ids
            assert got == ref[:n]
        got = Decoder(with_eos, spec, DecodeConfig(max_new_tokens=50)).decode(prompt).token_ids
        assert got == ref[:first + 1]


def test_cycle_records_are_consistent(bundle):
    res = Decoder(bundle, parse_method("goose"), DecodeConfig(max_new_tokens=40)).decode(repeating_prompts()[1])
    assert res.cycles and res.prompt_tokens == len(repeating_prompts()[1])
    for c in res.cycles:
        n = c.n_nodes
        assert all(len(x) == n for x in (c.source, c.rank, c.token, c.match, c.accepted, c.score, c.spine_pos))
        assert c.parent[0] == -1 and c.source[0] == "root" and c.match[0] and c.accepted[0]
        for i in range(1, n):
            if c.accepted[i]:  # the accepted path is connected and every node on it matched
                assert c.accepted[c.parent[i]] and c.match[i]
        accepted_nodes = sum(c.accepted) - 1
        assert c.tau in (accepted_nodes + 1, accepted_nodes)  # bonus, or cut by max_new_tokens
        assert c.verify_s > 0 and c.draft_s > 0 and 0 <= c.ema <= 1
        scores = np.array(c.score)
        assert np.isnan(scores[[s != "transition" for s in c.source]]).all()
    assert any("spine" in c.source for c in res.cycles)


def test_adjacency_reset_option(bundle):
    prompt = repeating_prompts()[2]
    keep = Decoder(bundle, parse_method("tr"), DecodeConfig(max_new_tokens=20, reset_adjacency=False))
    fresh = Decoder(bundle, parse_method("tr"), DecodeConfig(max_new_tokens=20))
    a1, a2 = fresh.decode(prompt), fresh.decode(prompt)
    assert [c.token for c in a1.cycles] == [c.token for c in a2.cycles]  # reset: the same drafts again
    k1, k2 = keep.decode(prompt), keep.decode(prompt)
    assert k1.token_ids == k2.token_ids == a1.token_ids
    assert [c.token for c in k1.cycles] == [c.token for c in a1.cycles]
    assert [c.token for c in k2.cycles] != [c.token for c in k1.cycles]  # carried-over table drafts differently


def test_keep_history_drafts_from_earlier_prompts_and_stays_lossless(bundle, monkeypatch):
    a, b, c = repeating_prompts()[2], repeating_prompts(1)[2], repeating_prompts(2)[2]  # no repeats within each
    cfg = DecodeConfig(max_new_tokens=30)
    want = Decoder(bundle, parse_method("ar"), cfg).decode(a).token_ids
    alone = Decoder(bundle, parse_method("pld"), cfg)
    kept = Decoder(bundle, parse_method("pld"), dataclasses.replace(cfg, keep_history=True))
    a1, a2, k1, k2 = alone.decode(a), alone.decode(a), kept.decode(a), kept.decode(a)
    assert a1.token_ids == a2.token_ids == k1.token_ids == k2.token_ids == want
    offered = lambda res: [c.spine_avail for c in res.cycles]  # noqa: E731
    assert offered(a2) == offered(a1) == offered(k1)  # each prompt alone, or nothing earlier yet
    # the second time, the prompt's end matches its first occurrence, followed by the first output
    assert k2.cycles[0].spine_avail == cfg.max_spine > offered(a1)[0]
    assert len(k2.cycles) < len(a1.cycles)
    # the history is bounded: past the cap only the newest half is kept, so the end of a prompt
    # seen long enough ago no longer matches its first occurrence
    import goose_runtime.decoder as decoder_module
    monkeypatch.setattr(decoder_module, "HISTORY_TOKENS", 64)
    short = Decoder(bundle, parse_method("pld"), dataclasses.replace(cfg, keep_history=True))
    results = [short.decode(p) for p in (a, b, c, a)]
    assert results[0].token_ids == results[3].token_ids == want
    assert results[3].cycles[0].spine_avail == offered(a1)[0] < cfg.max_spine


def test_bad_prompts(bundle):
    dec = Decoder(bundle, parse_method("ar"))
    with pytest.raises(ValueError, match="empty prompt"):
        dec.decode([])
    with pytest.raises(ValueError, match="token ids"):
        dec.decode([5, 10**6])
    with pytest.raises(ValueError, match="max_new_tokens"):
        Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=0))


def test_two_regime_topology_drafts_its_unmatched_tree_without_a_match(bundle, tmp_path):
    from goose_runtime.prompts import Prompt
    from goose_runtime.runner import encode_all

    matched = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1),
                                     (1, "transition", 0)])
    save_topology(matched.with_meta(regimes={"unmatched": unmatched.to_dict()}), tmp_path / "pair.json")
    spec = parse_method(f"topology:{tmp_path / 'pair.json'}")
    assert spec.unmatched is not None and spec.unmatched.parent == unmatched.parent
    # repetitive prompts: the matcher offers a spine in some cycles and nothing in others
    prompts = [Prompt("p0", "abcdefghijklmnop" * 4, "stdlib"), Prompt("p1", "the cat sat on the mat. " * 3, "stdlib")]
    cfg = DecodeConfig(max_new_tokens=40)
    seen = set()
    for ids in encode_all(bundle, prompts, max_new_tokens=40):
        want, got = Decoder(bundle, parse_method("ar"), cfg).decode(ids), Decoder(bundle, spec, cfg).decode(ids)
        assert got.token_ids == want.token_ids
        for c in got.cycles:
            if c.spine_avail == 0:
                assert "spine" not in c.source and len(c.parent) - 1 <= unmatched.budget
                seen.add("unmatched")
            else:
                assert c.source.count("spine") >= 1
                seen.add("matched")
    assert seen == {"matched", "unmatched"}
