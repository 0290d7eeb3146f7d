"""The decoder's extra drafts on the tiny model: the successor prior (+prior) in cycles without a
table row, and the retrieval store's guess (+store) under the root of unmatched cycles, drafted,
accepted, priced by its share in auto, and lossless."""
from __future__ import annotations

import numpy as np
import pytest

from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from tests.test_decoder import make_method, repeating_prompts


@pytest.fixture(scope="module")
def bundle():
    return tiny_random_bundle(seed=3)


@pytest.mark.parametrize("method", ["goose@8", "auto", "topology"])
def test_prior_fills_cycles_without_a_table_row_and_stays_lossless(bundle, method, tmp_path, monkeypatch):
    from goose_theory.latency import LatencyProfile
    from goose_runtime.runner import parse_labeled
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))  # the tiny model's prior is cached here
    latency = LatencyProfile(sizes=(1, 8, 64), seconds=(0.02, 0.021, 0.04)) if method == "auto" else None
    cfg = DecodeConfig(max_new_tokens=40, latency=latency)
    base = make_method(method, tmp_path)  # topology: writes spine6.json
    spec = f"topology:{tmp_path / 'spine6.json'}" if method == "topology" else method
    name, at, budget = spec.rpartition("@") if "@" in spec else (spec, "", "")
    with_prior = parse_labeled(f"{name}+prior{at}{budget}")
    assert with_prior.prior and with_prior.name == base.name + "+prior" and with_prior.budget == base.budget
    ar, plain, prior = (Decoder(bundle, s, cfg) for s in (parse_method("ar"), base, with_prior))
    bare = {"plain": 0, "prior": 0}
    for prompt in repeating_prompts(seed=1):
        want = ar.decode(prompt).token_ids
        for label, dec in (("plain", plain), ("prior", prior)):
            got = dec.decode(prompt)
            assert got.token_ids == want
            # cycles that verified the root alone although the matcher offered nothing
            bare[label] += sum(1 for c in got.cycles if len(c.parent) == 1 and not c.spine_avail)
    assert bare["plain"] > 0
    # auto drafts a candidate only where it pays: the tiny random model's are all too improbable
    assert bare["prior"] == (bare["plain"] if method == "auto" else 0)


@pytest.mark.parametrize("method", ["goose+store@4", "goose+store@1", "auto+store"])
def test_store_guesses_are_drafted_accepted_and_lossless(bundle, method, monkeypatch):
    from goose_theory.latency import LatencyProfile
    from goose_runtime.runner import parse_labeled
    from goose_runtime.store import build_store
    latency = LatencyProfile(sizes=(1, 8, 64), seconds=(0.02, 0.021, 0.04)) if method == "auto+store" else None
    cfg = DecodeConfig(max_new_tokens=40, latency=latency)
    ar = Decoder(bundle, parse_method("ar"), cfg)
    prompts = repeating_prompts(seed=2)
    wants = [ar.decode(p).token_ids for p in prompts]
    # an oracle store: every prompt and its continuation twice, so its guesses are mostly right and
    # the walk accepts store nodes (a path that is not a prefix of the node order: a cache copy)
    oracle = build_store([p + w for p, w in zip(prompts, wants)] * 2)
    monkeypatch.setattr("goose_runtime.decoder.shared_store", lambda *args, **kw: oracle)
    dec = Decoder(bundle, parse_labeled(method), cfg)
    drafted = accepted = 0
    for prompt, want in zip(prompts, wants):
        got = dec.decode(prompt)
        assert got.token_ids == want
        for c in got.cycles:
            store = [i for i in range(1, len(c.parent)) if c.source[i] == "transition" and c.rank[i] == cfg.top_k]
            assert all(c.parent[i] == 0 and c.spine_avail == 0 for i in store)  # unmatched cycles, under the root
            drafted += len(store)
            accepted += sum(c.accepted[i] for i in store)
    assert accepted >= 5 and drafted > accepted


def test_auto_gets_the_store_guess_with_its_share(bundle, monkeypatch):
    """The decoder hands auto the store's whole guess (its share prices it), for the text so far."""
    from goose_theory.latency import LatencyProfile
    from goose_runtime.dyntree import DynamicPolicy
    from goose_runtime.runner import parse_labeled
    from goose_runtime.store import build_store
    cfg = DecodeConfig(max_new_tokens=40, latency=LatencyProfile(sizes=(1, 8, 64), seconds=(0.02, 0.021, 0.04)))
    prompt = np.random.default_rng(3).integers(0, bundle.tokenizer.vocab_size, 12).tolist()
    want = prompt + Decoder(bundle, parse_method("ar"), cfg).decode(prompt).token_ids
    # the text twice, and once with every 5th token changed: some contexts' followers disagree (share 2/3)
    noisy = [t if i % 5 else (t + 1) % bundle.tokenizer.vocab_size for i, t in enumerate(want)]
    store = build_store([want, want, noisy])
    monkeypatch.setattr("goose_runtime.decoder.shared_store", lambda *args, **kw: store)
    seen, build = [], DynamicPolicy.build

    def spy(self, match, adj, before_anchor, anchor, guess):
        seen.append((anchor, guess))
        return build(self, match, adj, before_anchor, anchor, guess)

    monkeypatch.setattr(DynamicPolicy, "build", spy)
    got = Decoder(bundle, parse_labeled("auto+store"), cfg).decode(prompt)
    text = prompt + got.token_ids
    assert text == want
    guessed = [g for _, g in seen if g.token >= 0]
    assert guessed and all(0 < g.share <= 1 and 1 <= g.order <= 4 for g in guessed)
    assert any(g.share < 1 for g in guessed)
    pos, checked = len(prompt) - 1, 0
    for (anchor, guess), c in zip(seen, got.cycles):  # each cycle's context ends at its anchor
        assert text[pos] == anchor
        if c.spine_avail == 0:
            assert guess == store.guess(text[: pos + 1])
            checked += guess.token >= 0
        pos += c.tau
    assert checked >= 3
