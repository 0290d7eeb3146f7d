"""A context-free successor prior for every token: the adjacency table's last fallback.

Why: Token Recycling's table only knows a token's successors once the target has been run at an
occurrence of that token. An unmatched cycle whose anchor (the bonus token just produced) is new
to the text finds no bigram row and no unigram row, so it drafts nothing and is a plain one-token
step. On the held-out validation traces of goose@15 that is 30% of the unmatched cycles on
HumanEval and 36% on MT-Bench (``bench/bench_prior.py``).

The prior fills that gap with the target's own guess, computed once per model: for every vocabulary
token ``b``, the top-k next tokens after a short generic prefix followed by ``b`` (a chat turn's
opening, so the guesses are those of an answer in progress). All tokens of a batch sit after the
cached prefix as siblings in one tree forward (each sees the prefix and itself), so the whole
vocabulary costs one position per token: 96 s on this project's 2-core CPU for SmolLM2's 49152
tokens. The table (ids, logits and each row's log-sum-exp; 2.5 MB compressed for SmolLM2) is cached
under the goose cache (``priors/``), keyed by the model's name, dtype, vocabulary size, k, prefix
and a fingerprint of its output embedding. The embedded default model's fp32 table ships with the
package (``goose_runtime/data/priors/``, made by ``make prior``), so ``+prior`` costs it nothing on
first use; any other model builds its own once.

Compromise: one prefix for every prompt set, so the guesses know nothing of the text being decoded;
the table's own rows replace them as soon as the token has been seen. Lossless either way: drafts
only change what is verified, never what is accepted.

Example:
    >>> from goose_runtime.model import tiny_random_bundle
    >>> prior = build_prior(tiny_random_bundle(seed=0), top_k=3, batch=128)
    >>> prior.tokens.shape, prior.tokens.dtype.name
    ((512, 3), 'int64')
"""
from __future__ import annotations

import hashlib
import pathlib
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from goose_theory.fileio import atomic_output
from goose_theory.topology import PAPER_TOP_K

from .kvcache import cache_for
from .verify import MaskBuilder, forward

# 2: stores each row's log-sum-exp instead of its probabilities (they derive from it on load, in
# the same op as at build time), so the shipped file is half the size
PRIOR_VERSION = 2
SHIPPED_DIR = pathlib.Path(__file__).parent / "data" / "priors"
# a chat turn's opening: the model's guesses are then those of an answer in progress (measured
# against a code prefix on the validation traces: bench/bench_prior.py)
CHAT_PREFIX = [{"role": "user", "content": "Hello"}]
PLAIN_PREFIX = "Here is the answer:"


@dataclass(frozen=True)
class Prior:
    """Top-k successors of every token: ``tokens[b]`` best first, ``logits[b]`` and ``probs[b]``
    (softmax over the whole vocabulary) their scores."""

    tokens: np.ndarray
    logits: np.ndarray
    probs: np.ndarray
    lse: np.ndarray  # each row's log-sum-exp over the whole vocabulary (probs = exp(logits - lse))

    def scores(self, kind: str) -> np.ndarray:
        """The score column matching the table's harvest (``"prob"`` or ``"logit"``)."""
        return self.probs if kind == "prob" else self.logits


def prefix_ids(bundle) -> list[int]:
    """The prefix's token ids: the chat template's assistant opening where there is one."""
    tok = bundle.tokenizer
    if bundle.is_chat:
        return list(tok.apply_chat_template(CHAT_PREFIX, add_generation_prompt=True, tokenize=True,
                                            return_dict=False))
    return list(tok(PLAIN_PREFIX, add_special_tokens=False)["input_ids"])


def _probs(logits: np.ndarray, lse: np.ndarray) -> np.ndarray:
    """softmax probabilities of the top-k logits from their rows' log-sum-exp: one float32 torch op,
    the same at build time and on load, so a loaded table equals the built one bit for bit."""
    return torch.exp(torch.from_numpy(logits) - torch.from_numpy(lse)[:, None]).numpy()


def build_prior(bundle, *, top_k: int = PAPER_TOP_K, batch: int = 512, prefix: list[int] | None = None,
                rows: range | None = None) -> Prior:
    """The prior of every token of ``bundle``'s vocabulary (see the module docstring), after
    ``prefix`` (default :func:`prefix_ids`; only the default is cached). ``rows``: only those
    tokens, batched as in the full build (so it must start and end on a batch boundary or at the
    vocabulary's end), the other rows left empty (ids, logits, log-sum-exp and probabilities 0;
    the slow test re-checks part of the shipped table this way)."""
    model, device = bundle.model, bundle.device
    vocab = int(model.get_output_embeddings().weight.shape[0])
    rows = range(vocab) if rows is None else rows
    if rows.step != 1 or not 0 <= rows.start < rows.stop <= vocab or rows.start % batch \
            or (rows.stop % batch and rows.stop != vocab):
        raise ValueError(f"rows must be a non-empty range of step 1 within 0..{vocab} on batch boundaries "
                         f"(batch {batch}), got {rows}")
    prefix = prefix_ids(bundle) if prefix is None else list(prefix)
    masks, cache = MaskBuilder(bundle.dtype, device), cache_for(model)
    tokens = np.zeros((vocab, top_k), dtype=np.int64)
    logits_out = np.zeros((vocab, top_k), dtype=np.float32)
    lse_out = np.zeros(vocab, dtype=np.float32)
    with torch.inference_mode():
        n = len(prefix)
        forward(model, torch.tensor(prefix, device=device), torch.arange(n, device=device),
                masks.causal_mask(n), cache)
        for start in range(rows.start, rows.stop, batch):
            ids = torch.arange(start, min(start + batch, rows.stop), device=device)
            q = len(ids)
            # q siblings after the prefix: every row sees the prefix and itself only
            mask = torch.full((1, 1, q, n + q), masks.min, dtype=bundle.dtype, device=device)
            mask[0, 0, :, :n] = 0
            mask[0, 0].diagonal(offset=n).fill_(0)
            logits = forward(model, ids, torch.full((q,), n, device=device), mask, cache).float()
            cache.crop(-q)
            vals, idx = torch.topk(logits, top_k, dim=-1)
            tokens[start:start + q] = idx.cpu().numpy()
            logits_out[start:start + q] = vals.cpu().numpy()
            lse_out[start:start + q] = torch.logsumexp(logits, dim=-1).cpu().numpy()
    probs = _probs(logits_out, lse_out)
    probs[:rows.start], probs[rows.stop:] = 0, 0  # rows not built: exp(0 - 0) would read as 1
    return Prior(tokens, logits_out, probs, lse_out)


def _key(bundle, top_k: int) -> str:
    """Names the model by its output embedding too, so two models under one name (a re-converted
    checkpoint, the tiny test models of different seeds) never share a cached prior. The
    fingerprint hashes the exact bytes of a fixed strided sample of the weight (at most 4 M values,
    so a large model's is cheap too): a float sum of it would change in its last bits with the
    thread count (torch splits the reduction), and the shipped table would then be missed."""
    w = bundle.model.get_output_embeddings().weight.detach()
    flat = w.reshape(-1)
    sample = flat[:: max(1, flat.numel() // 4_000_000)].float().cpu().contiguous()
    fingerprint = hashlib.sha256(sample.numpy().tobytes()).hexdigest()[:16]
    text = f"{PRIOR_VERSION}|{bundle.name}|{bundle.dtype}|{tuple(w.shape)}|{top_k}|{prefix_ids(bundle)}|{fingerprint}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_MEMO: "weakref.WeakKeyDictionary[object, dict[int, Prior]]" = weakref.WeakKeyDictionary()


def shared_prior(bundle, *, top_k: int = PAPER_TOP_K, log: Callable[[str], None] | None = None) -> Prior:
    """:func:`load_or_build_prior`, once per loaded model and k in this process (every decoder of a
    run shares the same arrays)."""
    per_k = _MEMO.setdefault(bundle.model, {})
    if top_k not in per_k:
        per_k[top_k] = load_or_build_prior(bundle, top_k=top_k, log=log)
    return per_k[top_k]


def load_or_build_prior(bundle, *, top_k: int = PAPER_TOP_K, cache_dir: pathlib.Path | None = None,
                        log: Callable[[str], None] | None = None) -> Prior:
    """The prior of ``bundle``: from the cache folder (``cache_dir`` or the goose cache's
    ``priors/``), else from the tables the package ships (:data:`SHIPPED_DIR`), else built and saved
    atomically into the cache folder (which ``log`` is told of first)."""
    from .model import _cache_root

    folder = cache_dir or (_cache_root() / "priors")
    name = _file_name(bundle, top_k)
    for path in (folder / name, shipped_path(bundle, top_k)):
        if path.exists():
            return read_prior(path)
    if log is not None:
        log(f"building the model's successor prior for +prior methods, once: one position per vocabulary "
            f"token (about 1.5 min for a 135M model with a 49k vocabulary on 2 CPU cores), cached in {folder}")
    prior = build_prior(bundle, top_k=top_k)
    write_prior(folder / name, prior)
    return prior


def _file_name(bundle, top_k: int) -> str:
    return f"prior-{_key(bundle, top_k)}.npz"


def shipped_path(bundle, top_k: int = PAPER_TOP_K) -> pathlib.Path:
    """Where the package keeps ``bundle``'s table if it ships one (``make prior`` writes it)."""
    return SHIPPED_DIR / _file_name(bundle, top_k)


def write_prior(path: pathlib.Path, prior: Prior) -> None:
    """Save ``prior`` atomically, compressed; token ids as uint16 where the vocabulary allows."""
    ids = prior.tokens.astype(np.uint16 if prior.tokens.size and prior.tokens.max() < 2**16 else np.int32)
    with atomic_output(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, tokens=ids, logits=prior.logits, lse=prior.lse)


def read_prior(path: pathlib.Path) -> Prior:
    """A table saved by :func:`write_prior`."""
    with np.load(path) as data:
        logits, lse = data["logits"], data["lse"]
        return Prior(data["tokens"].astype(np.int64), logits, _probs(logits, lse), lse)


def attach_prior(table, bundle, *, score: str) -> None:
    """Give ``table`` (an :class:`~goose_runtime.adjacency.AdjacencyTable` of ``bundle``'s model)
    the model's prior as its last fallback, scored like the table's harvest (``"logit"``/``"prob"``)."""
    prior = shared_prior(bundle, top_k=table.top_k)
    table.set_prior(prior.tokens, prior.scores(score))
