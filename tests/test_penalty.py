"""The repetition penalty (goose_runtime.penalty): each tree row penalised as HF's
RepetitionPenaltyLogitsProcessor penalises that row's own sequence (the reference), ``ar`` under it
against HF's own greedy loop, and every method against ``ar``, on the tiny model and (slow) the real one."""
from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

from goose_runtime.config import ConfigError, DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.penalty import RepetitionPenalty
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


def hf_greedy(model, prompt: list[int], new_tokens: int, penalty: float) -> list[int]:
    """HF's rule in a plain loop: the whole sequence through the model, the processor, the argmax."""
    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(new_tokens):
            logits = model(input_ids=torch.tensor([ids])).logits[:, -1].float()
            ids.append(int(RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor([ids]), logits).argmax()))
    return ids[len(prompt):]


@pytest.mark.parametrize("penalty", [1.5, 0.8])
def test_every_method_emits_ars_penalised_tokens_on_the_tiny_model(sharp, penalty):
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9, 5, 6, 7]
    cfg = DecodeConfig(max_new_tokens=40, repetition_penalty=penalty)
    ref = Decoder(sharp, parse_method("ar"), cfg).decode(prompt).token_ids
    assert ref == hf_greedy(sharp.model, prompt, 40, penalty)
    assert ref != Decoder(sharp, parse_method("ar"), DecodeConfig(max_new_tokens=40)).decode(prompt).token_ids
    for m in TINY_METHODS:
        assert Decoder(sharp, parse_labeled(m), cfg).decode(prompt).token_ids == ref, m


def test_the_penalty_applies_before_sampling(sharp):
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9]
    cfg = DecodeConfig(max_new_tokens=40, temperature=1.0, seed=3, sample_top_p=0.9, repetition_penalty=1.4)
    ref = Decoder(sharp, parse_method("ar"), cfg).decode(prompt).token_ids
    plain = DecodeConfig(max_new_tokens=40, temperature=1.0, seed=3, sample_top_p=0.9)
    assert ref != Decoder(sharp, parse_method("ar"), plain).decode(prompt).token_ids
    for m in ("pld", "goose", "tr"):
        assert Decoder(sharp, parse_labeled(m), cfg).decode(prompt).token_ids == ref, m


@pytest.mark.slow
def test_every_method_emits_hfs_penalised_tokens_on_the_real_model():
    from goose_runtime.model import load_model
    from test_lossless import module_docstring

    bundle = load_model("default", device="cpu", dtype="float32")
    passage = module_docstring("heapq.py")[:700]
    ids = bundle.tokenizer.encode(passage + "\n\n" + passage[:120])  # context matching fires
    with torch.inference_mode():
        hf = bundle.model.generate(torch.tensor([ids]), max_new_tokens=48, do_sample=False, repetition_penalty=1.3,
                                   attention_mask=torch.ones(1, len(ids), dtype=torch.long))[0, len(ids):].tolist()
    cfg = DecodeConfig(max_new_tokens=48, repetition_penalty=1.3)
    ref = Decoder(bundle, parse_method("ar"), cfg).decode(ids).token_ids
    assert ref == hf and ref != Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=48)).decode(ids).token_ids
    for m in ("pld", "goose", "goose+prior@8"):
        assert Decoder(bundle, parse_labeled(m), cfg).decode(ids).token_ids == ref, m
