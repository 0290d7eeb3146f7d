"""The penalties (goose_runtime.penalty): each tree row penalised as HF's RepetitionPenaltyLogitsProcessor,
vLLM's frequency / presence rule (written out below from vLLM's ``apply_penalties``) and HF's
NoRepeatNGramLogitsProcessor treat that row's own sequence (the references), ``ar`` under them against a
plain greedy loop over the references (and HF ``generate`` itself on the real model), and every method
against ``ar``, on the tiny model and (slow) the real one."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers.generation.logits_process import NoRepeatNGramLogitsProcessor, RepetitionPenaltyLogitsProcessor

from goose_runtime.config import ConfigError, DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.penalty import CountPenalty, NoRepeatNGram, RepetitionPenalty, penalties_for
from goose_runtime.runner import parse_labeled
from test_sampling import TINY_METHODS


def random_tree(gen: torch.Generator, n: int, vocab: int) -> tuple[list[int], list[int]]:
    """A tree of ``n`` nodes (parents before children) with tokens drawn from a small vocabulary, so
    that paths repeat tokens and meet the committed ones."""
    parent = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
    return parent, torch.randint(0, vocab, (n,), generator=gen).tolist()


def row_sequence(committed: list[int], parent: list[int], token: list[int], node: int) -> list[int]:
    path = []
    while node > 0:
        path.append(token[node])
        node = parent[node]
    return committed + path[::-1]


def vllm_penalised(row: torch.Tensor, prompt: list[int], generated: list[int], *, repetition: float = 1.0,
                   frequency: float = 0.0, presence: float = 0.0, ngram: int = 0) -> torch.Tensor:
    """vLLM's ``apply_penalties`` on one fp32 row: the repetition penalty over prompt + generated tokens
    (HF's rule), then ``logits -= frequency * output counts`` and ``logits -= presence * output mask``;
    then with ``ngram`` HF's NoRepeatNGramLogitsProcessor over prompt + generated tokens."""
    row = RepetitionPenaltyLogitsProcessor(repetition)(torch.tensor([prompt + generated]), row[None].clone())[0]
    counts = torch.bincount(torch.tensor(generated, dtype=torch.long), minlength=row.shape[0]).float()
    row = row - frequency * counts
    row = row - presence * (counts > 0).float()
    return NoRepeatNGramLogitsProcessor(ngram)(torch.tensor([prompt + generated]), row[None])[0] if ngram else row


@pytest.mark.parametrize("penalty", [1.3, 0.7, 3.0])
def test_every_row_is_penalised_as_hf_penalises_its_own_sequence(penalty):
    gen = torch.Generator().manual_seed(int(penalty * 10))
    for _ in range(20):
        committed = torch.randint(0, 30, (12,), generator=gen).tolist()
        parent, token = random_tree(gen, 25, 30)
        token[0] = committed[-1]  # the root is the last committed token
        logits = torch.randn(25, 30, generator=gen) * 3
        want = torch.cat([RepetitionPenaltyLogitsProcessor(penalty)(
            torch.tensor([row_sequence(committed, parent, token, r)]), logits[r : r + 1].clone()) for r in range(25)])
        got = logits.clone()
        rule = RepetitionPenalty(penalty, committed[:5])
        rule.extend(committed[5:])  # committed in two steps, as the decoder adds each cycle's output
        assert rule.apply(got, parent=parent, token=token) is got  # fp32: in place
        assert torch.equal(got, want)


def test_half_precision_logits_are_penalised_in_fp32_as_hf_generate_does():
    # a review's cases: bf16 2.0 / 1.3 rounded back tied with 1.539 and took the top from it; fp16 overflowed
    for logits, penalty, seen, want in (([[2.0, 1.5390625]], 1.3, [0], 1), ([[70.0, 80.0]], 0.001, [0, 1], 1)):
        for dtype in (torch.bfloat16, torch.float16):
            half = torch.tensor(logits, dtype=dtype)
            got = RepetitionPenalty(penalty, seen).apply(half, parent=[-1], token=[seen[0]])
            hf = RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor([seen]), half.float())
            assert got.dtype == torch.float32 and torch.equal(got, hf) and int(got.argmax()) == want


def test_a_penalty_must_be_positive():
    with pytest.raises(ValueError, match="must be > 0"):
        RepetitionPenalty(0.0, [1])
    for bad in (0.0, -1.0, float("nan"), 101.0):
        with pytest.raises(ConfigError, match="repetition_penalty"):
            DecodeConfig(repetition_penalty=bad)


def reference_greedy(model, prompt: list[int], new_tokens: int, eos: tuple[int, ...] = (), **penalties: float) -> list[int]:
    """The references in a plain loop: the whole sequence through the model, :func:`vllm_penalised`
    (``repetition``, ``frequency``, ``presence``), the argmax; up to the first of ``eos``."""
    out: list[int] = []
    with torch.inference_mode():
        while len(out) < new_tokens and not (out and out[-1] in eos):
            logits = model(input_ids=torch.tensor([prompt + out])).logits[0, -1].float()
            out.append(int(vllm_penalised(logits, prompt, out, **penalties).argmax()))
    return out


# DecodeConfig's fields (HF generate's names for the repetition penalty and the n-gram ban) -> the reference's
REFERENCE_KEYWORDS = {"repetition_penalty": "repetition", "frequency_penalty": "frequency",
                      "presence_penalty": "presence", "no_repeat_ngram_size": "ngram"}
NO_PENALTY = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "no_repeat_ngram_size": 0}
TINY_PROMPT = [5, 6, 7, 5, 6, 7, 5, 6, 9, 5, 6, 7]
REAL_METHODS = ("pld", "goose", "goose+prior@8")


def assert_every_method_emits_ars_tokens(bundle, prompt: list[int], cfg: DecodeConfig, methods) -> list[int]:
    """``ar``'s tokens under ``cfg``, which differ from those without its penalties (they act), and every
    method's equal to them."""
    ref = Decoder(bundle, parse_method("ar"), cfg).decode(prompt).token_ids
    assert ref != Decoder(bundle, parse_method("ar"), dataclasses.replace(cfg, **NO_PENALTY)).decode(prompt).token_ids
    for m in methods:
        assert Decoder(bundle, parse_labeled(m), cfg).decode(prompt).token_ids == ref, m
    return ref


@pytest.mark.parametrize("setting", [{"repetition_penalty": 1.5}, {"repetition_penalty": 0.8},
                                     {"frequency_penalty": 1.0, "presence_penalty": 0.5}, {"frequency_penalty": -0.6},
                                     {"presence_penalty": -1.5}, {"no_repeat_ngram_size": 2}, {"no_repeat_ngram_size": 3}])
def test_every_method_emits_the_references_tokens_on_the_tiny_model(sharp, setting):
    ref = assert_every_method_emits_ars_tokens(sharp, TINY_PROMPT, DecodeConfig(max_new_tokens=40, **setting), TINY_METHODS)
    assert ref == reference_greedy(sharp.model, TINY_PROMPT, 40, **{REFERENCE_KEYWORDS[k]: v for k, v in setting.items()})


@pytest.mark.parametrize("setting", [{"sample_top_p": 0.9, "repetition_penalty": 1.4},
                                     {"sample_min_p": 0.05, "repetition_penalty": 1.2, "frequency_penalty": 1.0,
                                      "presence_penalty": 0.5},
                                     {"sample_top_p": 0.9, "no_repeat_ngram_size": 2, "repetition_penalty": 1.1,
                                      "presence_penalty": 0.3}])
def test_the_penalties_apply_before_sampling(sharp, setting):
    cfg = DecodeConfig(max_new_tokens=40, temperature=1.0, seed=3, **setting)
    assert_every_method_emits_ars_tokens(sharp, TINY_PROMPT, cfg, ("pld", "goose", "tr"))


@pytest.mark.slow
@pytest.mark.parametrize("setting", [{"repetition_penalty": 1.3}, {"no_repeat_ngram_size": 3}])
def test_every_method_emits_hfs_tokens_on_the_real_model(setting):
    from goose_runtime.model import load_model
    from test_lossless import module_docstring

    bundle = load_model("default", device="cpu", dtype="float32")
    passage = module_docstring("heapq.py")[:700]
    ids = bundle.tokenizer.encode(passage + "\n\n" + passage[:120])  # context matching fires (the ban bars its repeats)
    with torch.inference_mode():
        hf = bundle.model.generate(torch.tensor([ids]), max_new_tokens=48, do_sample=False, **setting,
                                   attention_mask=torch.ones(1, len(ids), dtype=torch.long))[0, len(ids):].tolist()
    assert assert_every_method_emits_ars_tokens(bundle, ids, DecodeConfig(max_new_tokens=48, **setting), REAL_METHODS) == hf


@pytest.mark.parametrize("frequency, presence, repetition", [(0.5, 0.0, 1.0), (0.0, -1.0, 1.0), (0.7, 0.3, 1.3),
                                                             (-0.4, 2.0, 0.8)])
def test_every_row_is_count_penalised_as_vllm_penalises_its_own_sequence(frequency, presence, repetition):
    gen = torch.Generator().manual_seed(7)
    cfg = DecodeConfig(repetition_penalty=repetition, frequency_penalty=frequency, presence_penalty=presence)
    for _ in range(20):
        prompt, output = torch.randint(0, 30, (6,), generator=gen).tolist(), torch.randint(0, 30, (8,), generator=gen).tolist()
        parent, token = random_tree(gen, 25, 30)
        token[0] = output[-1]  # the root is the last committed token
        logits = torch.randn(25, 30, generator=gen) * 3
        want = torch.stack([vllm_penalised(logits[r], prompt, row_sequence(output, parent, token, r), repetition=repetition,
                                           frequency=frequency, presence=presence) for r in range(25)])
        rules = penalties_for(cfg, prompt)
        assert len(rules) == (2 if repetition != 1 else 1)
        got = logits.clone()
        for rule in rules:
            rule.extend(output[:3]); rule.extend(output[3:])  # as the decoder adds each cycle's output
            assert rule.apply(got, parent=parent, token=token) is got  # fp32: in place
        assert torch.equal(got, want)


def test_counts_start_at_the_output_and_half_precision_is_penalised_in_fp32():
    assert penalties_for(DecodeConfig(), [1, 2]) == []
    rule = CountPenalty(frequency=1.5, presence=0.25)
    half = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.bfloat16)
    assert torch.equal(rule.apply(half, parent=[-1], token=[2]), torch.tensor([[1.0, 2.0, 3.0]]))  # nothing generated
    rule.extend([2, 2])
    got = rule.apply(half, parent=[-1], token=[2])
    assert got.dtype == torch.float32 and torch.equal(got, torch.tensor([[1.0, 2.0, -0.25]]))


def test_count_penalties_must_lie_in_minus_two_to_two():
    for field in ("frequency_penalty", "presence_penalty"):
        for bad in (2.5, -2.01, float("nan"), float("inf"), True):
            with pytest.raises(ConfigError, match=rf"{field} must be in \[-2, 2\] \(0: none\)"):
                DecodeConfig(**{field: bad})
    for frequency, presence in ((float("nan"), 0.0), (0.0, float("inf"))):  # the rule alone needs finite ones
        with pytest.raises(ValueError, match="the frequency and presence penalties must be finite"):
            CountPenalty(frequency, presence)


@pytest.mark.slow
def test_every_method_emits_the_references_count_penalised_tokens_on_the_real_model():
    from goose_runtime.model import load_model
    from goose_runtime.prompts import encode_prompt, load_prompts

    bundle = load_model("default", device="cpu", dtype="float32")
    ids = encode_prompt(bundle, load_prompts("humaneval", limit=3)[2])  # a HumanEval prompt through the chat template
    cfg = DecodeConfig(max_new_tokens=48, frequency_penalty=0.4, presence_penalty=0.6)
    ref = assert_every_method_emits_ars_tokens(bundle, ids, cfg, REAL_METHODS)
    assert ref == reference_greedy(bundle.model, ids, 48, tuple(bundle.eos_token_ids), frequency=0.4, presence=0.6)
    assert ref[-1] in bundle.eos_token_ids  # it stops where the reference does


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_row_bans_the_ngrams_hf_bans_in_its_own_sequence(size):
    gen, fired = torch.Generator().manual_seed(size), 0
    for trial in range(30):
        committed = torch.randint(0, 6, (int(torch.randint(1, 14, (1,), generator=gen)),), generator=gen).tolist()
        parent, token = random_tree(gen, 20, 6)  # 6 tokens: n-grams repeat along paths and across the boundary
        token[0] = committed[-1]
        logits = torch.randn(20, 6, generator=gen)
        want = torch.cat([NoRepeatNGramLogitsProcessor(size)(torch.tensor([row_sequence(committed, parent, token, r)]),
                                                             logits[r : r + 1].clone()) for r in range(20)])
        rule = NoRepeatNGram(size, committed[:2])
        rule.extend(committed[2:])
        got = logits.clone()
        assert rule.apply(got, parent=parent, token=token) is got
        assert torch.equal(got, want), (trial, committed, parent, token)
        fired += int(torch.isinf(want).sum())
    assert fired > 10  # the bans do fire (19 times at size 4, more below)


def test_an_ngram_ban_size_must_be_a_count():
    for bad in (-1, 1025, 2.0, True):
        with pytest.raises(ConfigError, match=r"no_repeat_ngram_size must be an integer in \[0, 1024\]"):
            DecodeConfig(no_repeat_ngram_size=bad)
    for bad in (0, -2, 2.0, True):  # the rule alone: 0 means no rule, so none is made
        with pytest.raises(ValueError, match="the n-gram ban's size must be a positive integer"):
            NoRepeatNGram(bad, [1, 2])


def test_the_barred_nodes_are_those_banned_in_their_parents_row():
    gen, fired = torch.Generator().manual_seed(7), 0
    for size in (1, 2, 3):
        for _ in range(20):
            committed = torch.randint(0, 5, (8,), generator=gen).tolist()
            parent, token = random_tree(gen, 16, 5)
            token[0] = committed[-1]
            rule = NoRepeatNGram(size, committed)
            banned = torch.isinf(rule.apply(torch.zeros(16, 5), parent=parent, token=token))
            want = [n for n in range(1, 16) if banned[parent[n], token[n]]]
            assert rule.barred(parent, token) == want
            fired += len(want)
    assert fired > 50


@pytest.mark.parametrize("size", [2, 3])
def test_no_tree_verifies_a_node_the_ngram_ban_bars(sharp, size, monkeypatch):
    # the builders' trees (spied) do hold barred nodes; the verified ones (recorded) never do
    from goose_theory.latency import LatencyProfile
    from test_lossless import CPU_PROFILE

    built = []
    build = Decoder._build
    monkeypatch.setattr(Decoder, "_build", lambda self, *a: built.append(self.ban.barred(
        (t := build(self, *a)).parent, t.token)) or t)
    cfg = DecodeConfig(max_new_tokens=40, no_repeat_ngram_size=size, latency=LatencyProfile(**CPU_PROFILE))
    ref = Decoder(sharp, parse_method("ar"), cfg).decode(TINY_PROMPT).token_ids
    for method in ("pld", "tr", "goose", "mixed-iso:3", "auto"):
        built.clear()
        res = Decoder(sharp, parse_method(method), cfg).decode(TINY_PROMPT)
        assert res.token_ids == ref, method
        done = 0
        for cycle in res.cycles:
            rule = NoRepeatNGram(size, TINY_PROMPT + res.token_ids[:done])
            assert cycle.token[0] == (TINY_PROMPT + res.token_ids)[len(TINY_PROMPT) + done - 1]
            assert rule.barred(cycle.parent, cycle.token) == [], (method, done)
            done += cycle.tau
        # the spine is cut before the tree is built (pld has no other node); the rest is pruned after
        assert (sum(map(len, built)) > 0) == (method != "pld"), method
