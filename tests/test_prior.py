"""The model's successor prior (goose_runtime.prior) against plain forwards of prefix + token."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from goose_runtime.model import tiny_random_bundle
from goose_runtime.prior import build_prior, load_or_build_prior, prefix_ids, shared_prior


@pytest.fixture(scope="module")
def bundle():
    return tiny_random_bundle(seed=0)


def test_matches_one_plain_forward_per_token(bundle):
    prior = build_prior(bundle, top_k=4, batch=100)  # several batches, the last one short
    prefix = prefix_ids(bundle)
    assert prior.tokens.shape == prior.logits.shape == prior.probs.shape == (512, 4)
    with torch.inference_mode():
        for token in (0, 1, 99, 100, 257, 511):
            logits = bundle.model(input_ids=torch.tensor([prefix + [token]])).logits[0, -1].float()
            vals, idx = torch.topk(logits, 4)
            assert prior.tokens[token].tolist() == idx.tolist()
            np.testing.assert_allclose(prior.logits[token], vals.numpy(), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(prior.probs[token], torch.softmax(logits, -1)[idx].numpy(), rtol=1e-4)
    assert (np.diff(prior.logits, axis=1) <= 0).all()  # best first


def test_cached_on_disk_once_per_model(tmp_path, bundle):
    first = load_or_build_prior(bundle, top_k=3, cache_dir=tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 1 and files[0].endswith(".npz")  # no temporary file left behind
    again = load_or_build_prior(bundle, top_k=3, cache_dir=tmp_path)
    np.testing.assert_array_equal(first.tokens, again.tokens)
    other = load_or_build_prior(tiny_random_bundle(seed=1), top_k=3, cache_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == 2  # same name, other weights: its own file
    assert not np.array_equal(first.tokens, other.tokens)


def test_shared_within_a_process(tmp_path, monkeypatch, bundle):
    monkeypatch.setenv("GOOSE_CACHE_DIR", str(tmp_path))
    assert shared_prior(bundle, top_k=2) is shared_prior(bundle, top_k=2)
    assert shared_prior(bundle, top_k=2).scores("prob") is shared_prior(bundle, top_k=2).probs


def test_another_prefix(bundle):
    prior = build_prior(bundle, top_k=3, batch=200, prefix=[7, 8, 9])
    with torch.inference_mode():
        for token in (0, 300):
            logits = bundle.model(input_ids=torch.tensor([[7, 8, 9, token]])).logits[0, -1]
            assert prior.tokens[token].tolist() == torch.topk(logits, 3).indices.tolist()
