"""Top-k, top-p (nucleus) and min-p cuts of sampling (goose_runtime.nucleus): the kept tokens against HF
transformers' own warpers (the reference), the sampler's pick among them against the whole cut row's,
the sampled distribution, and that every method still emits ar's sampled tokens, on the tiny model
and (slow) on the real default model."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from transformers.generation.logits_process import (MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from goose_runtime.config import ConfigError, DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.readout import NaNLogitsError
from goose_runtime.runner import parse_labeled
from goose_runtime.nucleus import truncate
from goose_runtime.sampling import PositionNoise, position_noise
from test_sampling import TINY_METHODS


def hf_kept(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float = 0.0) -> torch.Tensor:
    """The tokens HF generate samples from: temperature, then top-k, top-p, min-p (its warpers' order)."""
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    if min_p > 0:
        scores = MinPLogitsWarper(min_p)(None, scores)
    return torch.isfinite(scores)


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("top_k,top_p,min_p", [(0, 0.5, 0), (0, 0.9, 0), (0, 0.99, 0), (7, 1.0, 0), (40, 1.0, 0),
                                               (40, 0.8, 0), (3, 0.95, 0), (0, 1.0, 0.1), (0, 1.0, 0.005),
                                               (0, 1.0, 1.0), (40, 0.8, 0.2), (0, 0.9, 0.3), (7, 1.0, 0.5)])
def test_the_kept_tokens_are_hfs(temperature, top_k, top_p, min_p):
    # min-p alone at T 2.5 and 0.005 keeps all 300 (the look widens from 64 to the whole row); at 1, the top only
    gen = torch.Generator().manual_seed(int(temperature * 10) + top_k + int(min_p * 1000))
    logits = torch.randn(16, 300, generator=gen) * 3  # no ties: HF breaks them by index, truncate keeps them all
    kept = torch.isfinite(truncate(logits, temperature, top_k, top_p, min_p))
    assert torch.equal(kept, hf_kept(logits, temperature, top_k, top_p, min_p))
    assert bool(kept.any(dim=-1).all())  # the top token always stays
    assert min_p < 1 or int(kept.sum()) == 16


@pytest.mark.parametrize("scale,top_p,sizes", [(4.0, 0.5, (1, 63)), (3.0, 0.9, (65, 511)), (1.0, 0.9, (513, 4095)),
                                               (0.3, 0.9, (4097, 5000))])
def test_a_nucleus_past_the_first_look_is_found_whole(scale, top_p, sizes):
    # the nucleus is looked for among the top 64 logits, then 512, 4096, all: each size, and the same as HF's
    logits = torch.randn(6, 5000, generator=torch.Generator().manual_seed(1)) * scale
    kept = torch.isfinite(truncate(logits, 1.0, top_p=top_p))
    assert torch.equal(kept, hf_kept(logits, 1.0, 0, top_p))
    assert all(sizes[0] <= n <= sizes[1] for n in kept.sum(dim=-1).tolist())


@pytest.mark.parametrize("top_k,top_p,min_p", [(0, 0.9, 0), (5, 1.0, 0), (64, 1.0, 0), (8, 0.7, 0), (0, 0.3, 0),
                                               (0, 1.0, 0.05), (0, 0.9, 0.2), (8, 1.0, 0.3)])
def test_the_sample_among_the_kept_is_the_whole_cut_rows(top_k, top_p, min_p):
    # the sampler draws from the kept tokens' noise alone: the same token as argmax(truncate(row) + T g)
    logits = torch.randn(40, 700, generator=torch.Generator().manual_seed(top_k)) * 2
    logits[::7, :30] = logits[::7, :1]  # ties at the top: top-k's edge and the nucleus's floor cross them
    noise = PositionNoise(700, 1.3, seed=9, top_k=top_k, top_p=top_p, min_p=min_p)
    for p in range(3):
        got = noise.targets(logits, rows=list(range(40)), positions=[p] * 40)
        want = (truncate(logits, 1.3, top_k, top_p, min_p) + 1.3 * position_noise(9, p, 700, noise.prompt)).argmax(dim=-1)
        assert got == want.tolist()


def mixed_rows() -> torch.Tensor:
    """Rows that once made a row's cut depend on its neighbours (a review's cases): no ties; 34
    tokens tied at the 7th logit; a flat row whose nucleus needs widening; a row whose top token is
    token 0; a row with fewer finite logits than k."""
    gen = torch.Generator().manual_seed(2)
    plain, tied, flat, zero_top, short = (torch.randn(100, generator=gen) * s for s in (2, 2, 0.1, 4, 2))
    order = tied.sort(descending=True)
    tied[order.indices[6:40]] = order.values[6]
    zero_top[0] = zero_top.max() + 1
    short[5:] = -math.inf
    return torch.stack([plain, tied, flat, zero_top, short])


@pytest.mark.parametrize("top_k,top_p,min_p", [(7, 0.9413907365075613, 0), (0, 0.9, 0), (5, 1.0, 0), (7, 0.5, 0),
                                               (0, 0.3, 0), (0, 1.0, 0.02), (7, 0.9, 0.1)])
def test_a_rows_sample_and_cut_do_not_depend_on_the_other_rows(top_k, top_p, min_p):
    rows, cut = mixed_rows(), (top_k, top_p, min_p)
    noise = PositionNoise(100, 1.0, seed=0, top_k=top_k, top_p=top_p, min_p=min_p)
    for p in range(4):
        alone = [noise.targets(rows[r : r + 1], rows=[0], positions=[p])[0] for r in range(len(rows))]
        assert noise.targets(rows, rows=list(range(len(rows))), positions=[p] * len(rows)) == alone
    assert torch.equal(truncate(rows, 1.0, *cut), torch.cat([truncate(r[None], 1.0, *cut) for r in rows]))
    assert bool(torch.isfinite(truncate(rows, 1.0, *cut)[3, 0]))  # row 3's top token 0 is never cut


def test_the_uncut_sample_is_kept_only_when_the_cut_surely_keeps_it():
    # a review's case: p within ~1e-8 of the mass above the uncut sample (token 4), which the cut removes
    p = 0.9167638787854004
    row = torch.randn(1, 1000, generator=torch.Generator().manual_seed(3)) * 2
    noise = PositionNoise(1000, 1.0, seed=0, top_p=p)
    want = int((truncate(row, 1.0, top_p=p) + position_noise(0, 0, 1000, noise.prompt)).argmax())
    assert noise.targets(row, rows=[0], positions=[0]) == [want] and want != 4
    assert PositionNoise(8, 1.0, 0, top_k=8).top_k == 0  # top-k of the whole vocabulary: no cut


@pytest.mark.parametrize("cut", [{"min_p": 0.9}, {"top_p": 0.5}, {"top_k": 2}])
def test_an_exact_tie_among_the_kept_goes_to_the_lowest_id(cut):
    # a review's case: tokens 7 and 40 tie at the top, and T g is below one fp32 step of their logit,
    # so their scores tie; top-k's order had put 40 first
    row = 20.0 - 2.0**-19 * torch.randint(1, 20, (64,), generator=torch.Generator().manual_seed(3)).float()
    row[[7, 40]] = 20.0
    noise = PositionNoise(64, 1e-6, seed=3, **cut)
    want = int((truncate(row[None], 1e-6, **cut) + 1e-6 * noise.noise(1)).argmax())
    assert noise.targets(row[None], rows=[0], positions=[1]) == [want] == [7]


def test_ties_at_the_cut_are_kept_and_no_cut_changes_nothing():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0]])
    assert torch.isfinite(truncate(logits, 1.0, top_k=1)).tolist() == [[False, True, True, False]]
    assert torch.equal(truncate(logits, 1.0), logits) and torch.equal(truncate(logits, 1.0, top_k=4), logits)
    assert torch.equal(truncate(logits, 1.0, top_k=99, top_p=1.0), logits)
    # a tiny temperature puts all the mass on the top: the nucleus is the tied top, and no NaN
    assert torch.isfinite(truncate(logits, 1e-40, top_p=0.5)).tolist() == [[False, True, True, False]]


@pytest.mark.parametrize("temperature,top_k,top_p,min_p", [(1.0, 0, 0.8, 0), (1.0, 3, 1.0, 0), (2.0, 4, 0.8, 0),
                                                           (1.0, 0, 1.0, 0.3), (2.0, 0, 0.95, 0.4)])
def test_draws_follow_the_cut_and_renormalised_softmax(temperature, top_k, top_p, min_p):
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    noise = PositionNoise(5, temperature, seed=3, top_k=top_k, top_p=top_p, min_p=min_p)
    drawn = np.bincount([noise.targets(logits, rows=[0], positions=[p])[0] for p in range(4000)], minlength=5)
    kept = hf_kept(logits, temperature, top_k, top_p, min_p)[0].numpy()
    assert 2 <= kept.sum() < 5 and drawn[~kept].sum() == 0  # a cut token is never drawn
    probs = torch.softmax(logits[0].double() / temperature, dim=0).numpy()[kept]
    assert stats.chisquare(drawn[kept], probs / probs.sum() * drawn.sum()).pvalue > 1e-3


def test_a_nan_row_is_named_before_the_cut():
    logits = torch.zeros(2, 8)
    logits[1, 3] = math.nan
    with pytest.raises(NaNLogitsError):
        PositionNoise(8, 1.0, seed=0, top_p=0.9).targets(logits, rows=[0, 1], positions=[4, 4])


@pytest.mark.parametrize("field,value", [("sample_top_k", -1), ("sample_top_k", 2.5), ("sample_top_k", True),
                                         ("sample_top_p", 0.0), ("sample_top_p", 1.01), ("sample_top_p", math.nan),
                                         ("sample_min_p", -0.1), ("sample_min_p", 1.5), ("sample_min_p", math.inf)])
def test_config_refuses_bad_cuts(field, value):
    with pytest.raises(ConfigError, match=field):
        DecodeConfig(temperature=1.0, **{field: value})
    with pytest.raises(ValueError, match="top_k must be"):
        PositionNoise(8, 1.0, 0, top_k=-1)
    with pytest.raises(ValueError, match="min_p in"):
        PositionNoise(8, 1.0, 0, min_p=2.0)


@pytest.mark.parametrize("temperature,top_k,top_p,min_p", [(1.0, 3, 1.0, 0), (1.5, 0, 0.8, 0), (2.0, 5, 0.9, 0),
                                                           (1.5, 0, 1.0, 0.1), (2.0, 0, 0.9, 0.05)])
def test_every_method_emits_ars_cut_samples_on_the_tiny_model(sharp, temperature, top_k, top_p, min_p):
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9, 5, 6, 7]
    cfg = DecodeConfig(max_new_tokens=48, temperature=temperature, seed=2, sample_top_k=top_k, sample_top_p=top_p,
                       sample_min_p=min_p)
    ref = Decoder(sharp, parse_method("ar"), cfg).decode(prompt).token_ids
    uncut = Decoder(sharp, parse_method("ar"), DecodeConfig(max_new_tokens=48, temperature=temperature, seed=2))
    assert len(ref) == 48 and ref != uncut.decode(prompt).token_ids  # the cut changed the sample
    for m in TINY_METHODS:
        assert Decoder(sharp, parse_labeled(m), cfg).decode(prompt).token_ids == ref, m


def test_top_k_one_is_greedy(sharp):
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 9]
    greedy = Decoder(sharp, parse_method("ar"), DecodeConfig(max_new_tokens=32)).decode(prompt).token_ids
    for m in ("ar", "goose", "tr"):
        cfg = DecodeConfig(max_new_tokens=32, temperature=3.0, seed=1, sample_top_k=1)
        assert Decoder(sharp, parse_method(m), cfg).decode(prompt).token_ids == greedy, m


@pytest.mark.slow
@pytest.mark.parametrize("temperature,top_k,top_p,min_p", [(1.0, 0, 0.9, 0), (0.7, 20, 0.95, 0.05)])
def test_every_method_emits_ars_cut_samples_on_the_real_model(temperature, top_k, top_p, min_p):
    from goose_runtime.model import load_model
    from test_lossless import code_prompt, module_docstring

    bundle = load_model("default", device="cpu", dtype="float32")
    passage = module_docstring("heapq.py")[:700]
    prompts = {"code": bundle.tokenizer.encode(code_prompt()),
               "repeat": bundle.tokenizer.encode(passage + "\n\n" + passage[:120])}
    cfg = DecodeConfig(max_new_tokens=64, temperature=temperature, seed=4, sample_top_k=top_k, sample_top_p=top_p,
                       sample_min_p=min_p)
    ar = Decoder(bundle, parse_method("ar"), cfg)
    for name, ids in prompts.items():
        ref = ar.decode(ids).token_ids
        assert len(ref) == 64
        # a cut is made row by row whatever the tree, so the tree shapes are the uncut real-model test's
        # (test_sampling: tr and mixed-iso:3 too); here the matcher's chain, goose and the prior's trees
        for m in ("pld", "goose", "goose+prior@8"):
            res = Decoder(bundle, parse_labeled(m), cfg).decode(ids, prompt_id=name)
            assert res.token_ids == ref, f"{m} diverged from ar on {name} at T={temperature} k={top_k} p={top_p} min-p={min_p}"
