"""One decoding loop for every method: draft a tree, verify it in one pass, walk, compact, harvest.

Invariant: between cycles the KV cache holds every token except the last one (the *anchor*); the
last cycle's tree is left in it uncompacted, as the cache is dropped when decoding ends. The prefill runs
``prompt[:-1]``; each cycle verifies ``[anchor] + tree`` and emits the accepted tree tokens plus
the bonus token (the target's argmax at the last accepted node), which becomes the next anchor.
So every emitted token comes out of a verification cycle and ``sum(tau) == len(token_ids)``.
``ar`` is the same loop with an empty tree. Greedy verification makes every method emit exactly
the tokens of ``ar`` (tests/test_decoder.py, tests/test_lossless.py); so does sampling with a
temperature, whose noise is fixed by prompt and position (:mod:`goose_runtime.sampling`), and a
repetition, frequency or presence penalty, applied to each tree row for its own prefix
(:mod:`goose_runtime.penalty`). Under HF's n-gram ban a draft the ban bars at its parent could never be
accepted: the spine is cut before it and any other such node is dropped with its subtree, unverified.

Example:
    >>> from goose_runtime.model import tiny_random_bundle
    >>> from goose_runtime.methods import parse_method
    >>> b = tiny_random_bundle()
    >>> ar = Decoder(b, parse_method("ar"), DecodeConfig(max_new_tokens=8)).decode([5, 6, 7, 5, 6])
    >>> gs = Decoder(b, parse_method("goose"), DecodeConfig(max_new_tokens=8)).decode([5, 6, 7, 5, 6])
    >>> ar.token_ids == gs.token_ids, len(ar.token_ids)
    (True, 8)
"""
from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np
import torch

from . import readout
from .adjacency import AdjacencyTable
from .config import HISTORY_TOKENS, DecodeConfig, harvest_score
from .dyntree import Calibration, DynamicPolicy
from .goose import GoosePolicy, build_goose
from .kvcache import cache_for, compact
from .matcher import NO_MATCH, ContextMatcher
from .methods import MethodError, MethodSpec
from .model import ModelBundle
from .penalty import NoRepeatNGram, penalties_for
from .prior import attach_prior
from .records import CycleRecord, PromptResult
from .sampling import PositionNoise
from .store import NO_GUESS, check_store_bench, shared_store
from .trees import DraftTree, build_chain, build_from_topology, new_tree, without
from .verify import MaskBuilder, forward, greedy_walk, top_candidates, tree_visibility

SOURCE_NAMES = ("root", "spine", "transition")


@functools.cache
def warm_kernels() -> None:
    """Compile (or load from numba's cache) the cycle's compiled kernels once per process, when the
    first decoder is made, so that no timed cycle pays for it (about 3 s in a fresh clone)."""
    readout.warm_up()
    tree_visibility([-1, 0])
    AdjacencyTable(4, top_k=1, n_slots=4).update(np.array([0]), np.array([1]), np.array([[2]]), np.array([[0.5]]))


class Decoder:
    """Decodes prompts with one method on one model; the adjacency table lives across prompts
    unless ``config.reset_adjacency``, the matcher's index only with ``config.keep_history``."""

    def __init__(self, bundle: ModelBundle, method: MethodSpec, config: DecodeConfig = DecodeConfig()) -> None:
        # config's ranges were checked when it was made (DecodeConfig.__post_init__)
        self.bundle, self.method, self.config = bundle, method, config
        self.vocab_size = vocab = int(bundle.model.get_output_embeddings().weight.shape[0])
        self.adjacency = (AdjacencyTable(vocab, top_k=config.top_k, n_slots=config.adjacency_slots)
                          if method.uses_adjacency else None)
        self.masks = MaskBuilder(bundle.dtype, bundle.device)
        self.eos = frozenset(bundle.eos_token_ids) | frozenset(config.stop_token_ids)
        # a stop string ends in the newest token: the last tokens that can hold its bytes, and one more
        self._stop_window = max((len(x.encode()) for x in config.stop_strings), default=0) + 1
        if method.kind == "auto" and config.latency is None:
            raise MethodError("method 'auto' needs a latency profile (DecodeConfig.latency)")
        self._calibration = Calibration()  # auto's acceptance estimates, carried across prompts
        self.score = harvest_score(method, config)
        if method.prior and self.adjacency is not None:  # the table's last fallback (goose_runtime.prior)
            attach_prior(self.adjacency, bundle, score=self.score)
        self.store = shared_store(bundle, config.store_corpus) if method.store else None
        self._history: ContextMatcher | None = None  # keep_history: the matcher of every prompt so far
        self.ban = None  # the n-gram ban of the prompt being decoded, if any (decode sets it)
        warm_kernels()

    # ---- one prompt ---------------------------------------------------------------------------
    def decode(self, prompt_ids: list[int], *, prompt_id: str = "prompt", benchmark: str = "prompt") -> PromptResult:
        """Decode up to ``max_new_tokens`` after ``prompt_ids`` (stops at the first EOS): greedily, or
        at ``config.temperature`` > 0 sampled with ``config.seed`` (the same tokens as ``ar``'s either way)."""
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise ValueError("empty prompt")
        if min(prompt) < 0 or max(prompt) >= self.vocab_size:
            raise ValueError(f"prompt token ids must lie in [0, {self.vocab_size})")
        cfg, bundle = self.config, self.bundle
        if self.store is not None:
            check_store_bench(benchmark, cfg.store_corpus)
        if self.adjacency is not None and cfg.reset_adjacency:
            self.adjacency.reset()
        self.policy = GoosePolicy(alpha=cfg.ema_alpha, rho=cfg.rho, bypass_len=cfg.bypass_len,
                                  min_score=cfg.min_score, branch_power=cfg.branch_power)
        if self.method.kind == "auto":
            self.auto = DynamicPolicy(cfg.latency, max_budget=self.method.budget, top_k=cfg.top_k,
                                      max_depth=cfg.max_depth, max_spine=cfg.max_spine, calibration=self._calibration)
        matcher = self._matcher(prompt) if self.method.uses_matcher else None
        self.sampler = (PositionNoise(self.vocab_size, cfg.temperature, cfg.seed, bundle.device, prompt=prompt,
                                      top_k=cfg.sample_top_k, top_p=cfg.sample_top_p, min_p=cfg.sample_min_p)
                        if cfg.temperature > 0 else None)  # noise by (seed, this prompt, position)
        self._prompt_len = len(prompt)
        self.penalties = penalties_for(cfg, prompt, bundle.device)
        self.ban = next((rule for rule in self.penalties if isinstance(rule, NoRepeatNGram)), None)
        cache = cache_for(bundle.model)
        with torch.inference_mode():
            t0 = time.perf_counter()
            self._prefill(prompt, cache)
            bundle.synchronize()
            prefill_s = time.perf_counter() - t0
            tokens, out, cycles = list(prompt), [], []
            t1 = time.perf_counter()
            while len(out) < cfg.max_new_tokens:
                new, record, stop = self._cycle(tokens, matcher, cache, cfg.max_new_tokens - len(out))
                tokens.extend(new); out.extend(new)
                for rule in self.penalties:
                    rule.extend(new)
                if matcher is not None:
                    matcher.extend(new)
                if record is not None:
                    cycles.append(record)
                if stop:
                    break
            decode_s = time.perf_counter() - t1
        text = bundle.tokenizer.decode(out, skip_special_tokens=True)
        return PromptResult(self.method.name, prompt_id, benchmark, len(prompt), out, text, cycles,
                            prefill_s, decode_s)

    def _matcher(self, prompt: list[int]) -> ContextMatcher:
        """The prompt's context matcher: a new one, or with ``keep_history`` the decoder's one, which
        still indexes the earlier prompts and their outputs (each cycle appends the emitted tokens)."""
        cfg = self.config
        if not cfg.keep_history:
            return ContextMatcher(prompt, ngram_sizes=cfg.ngram_sizes, max_spine=cfg.max_spine)
        if self._history is None or len(self._history) + len(prompt) > HISTORY_TOKENS:
            newest = self._history.tokens[-(HISTORY_TOKENS // 2):] if self._history is not None else []
            self._history = ContextMatcher(newest, ngram_sizes=cfg.ngram_sizes, max_spine=cfg.max_spine)
        self._history.extend(prompt)  # the query is always the current text's end
        return self._history

    def _prefill(self, prompt: list[int], cache) -> None:
        n = len(prompt) - 1
        if n == 0:
            return
        device = self.bundle.device
        ids = torch.tensor(prompt[:-1], dtype=torch.long, device=device)
        logits = forward(self.bundle.model, ids, torch.arange(n, device=device), self.masks.causal_mask(n), cache)
        if self.adjacency is not None:  # harvest the prompt: position i predicts what follows prompt[i]
            top, probs = top_candidates(logits, self.config.top_k, self.score)
            prev = np.asarray([-1] + prompt[: n - 1], dtype=np.int64)
            self.adjacency.update(prev, np.asarray(prompt[:n], dtype=np.int64), top, probs)

    # ---- one cycle ----------------------------------------------------------------------------
    def _build(self, tokens: list[int], matcher: ContextMatcher | None) -> DraftTree:
        m, cfg = self.method, self.config
        anchor = tokens[-1]
        before = tokens[-2] if len(tokens) > 1 else -1
        match = matcher.match() if matcher is not None else NO_MATCH
        if self.ban is not None and match:
            match = self._unbarred(anchor, match)
        if m.kind == "ar":
            return new_tree(anchor)
        if m.kind == "pld":
            return build_chain(anchor, match, m.budget)
        guess = self.store.guess(tokens) if self.store is not None and not match else NO_GUESS
        guess = guess if guess.token < self.vocab_size else NO_GUESS  # a tokenizer's added ids past the embedding
        if m.kind == "auto":
            tree, self._auto_keys = self.auto.build(match, self.adjacency, before, anchor, guess)
            return tree
        if m.kind == "goose":
            return build_goose(self.policy, match, self.adjacency, before, anchor, budget=m.budget, top_k=cfg.top_k,
                               max_depth=cfg.max_depth, max_spine=cfg.max_spine, store_token=guess.token)
        return build_from_topology(m.tree_for(match), match, self.adjacency, before, anchor,
                                   mixed=m.kind == "mixed-iso", budget=m.budget)

    def _unbarred(self, anchor: int, match):
        """``match`` up to its first token the n-gram ban bars: the builders spend the budget elsewhere."""
        barred = self.ban.barred(list(range(-1, len(match))), [anchor, *match.tokens])
        return dataclasses.replace(match, tokens=match.tokens[: barred[0] - 1]) if barred else match

    def _drop_barred(self, tree: DraftTree) -> DraftTree:
        """``tree`` less the nodes the n-gram ban bars at their parent (and their subtrees)."""
        tree, kept = without(tree, self.ban.barred(tree.parent, tree.token))
        if self.method.kind == "auto" and len(kept) < len(self._auto_keys):
            self._auto_keys = [self._auto_keys[i] for i in kept]
        return tree

    def _cycle(self, tokens: list[int], matcher, cache, remaining: int):
        bundle, cfg = self.bundle, self.config
        c0 = time.perf_counter()
        tree = self._build(tokens, matcher)
        if self.ban is not None:
            tree = self._drop_barred(tree)
        past = len(tokens) - 1
        device = bundle.device
        ids = torch.tensor(tree.token, dtype=torch.long, device=device)
        positions = torch.tensor(tree.depth, dtype=torch.long, device=device) + past
        mask = self.masks.tree_mask(tree.parent, past)
        bundle.synchronize()
        v0 = time.perf_counter()
        logits = forward(bundle.model, ids, positions, mask, cache)
        bundle.synchronize()
        verify_s = time.perf_counter() - v0
        for rule in self.penalties:  # each row's own prefix: the committed tokens and its path's
            logits = rule.apply(logits, parent=tree.parent, token=tree.token)
        harvest = self.adjacency is not None
        if self.sampler is None:
            top, probs = top_candidates(logits, cfg.top_k if harvest else 1, self.score if harvest else None)
            argmax = top[:, 0].tolist()  # the target's choice at every node
            path = greedy_walk(tree, argmax)
        else:
            top, probs = top_candidates(logits, cfg.top_k, self.score) if harvest else (None, None)
            argmax, path = self._sampled_walk(tree, logits, past)
        new = [tree.token[n] for n in path[1:]] + [argmax[path[-1]]]
        new = new[:remaining]
        stop = len(new) == remaining
        if (end := self._stop_at(tokens, new)) is not None:
            new, stop = new[: end + 1], True
        if not stop:  # after the last cycle the cache is dropped: compacting it would be wasted work
            compact(cache, past, path)
        if harvest:
            parent_tok = [tokens[-2] if len(tokens) > 1 else -1] + [tree.token[p] for p in tree.parent[1:]]
            self.adjacency.update(np.asarray(parent_tok, dtype=np.int64), np.asarray(tree.token, dtype=np.int64),
                                  top, probs)
        n_spine = tree.n_spine
        if self.method.kind == "goose":
            self.policy.observe(n_spine, sum(1 for n in path[1:] if tree.source[n] == 1))
        elif self.method.kind == "auto":
            self.auto.observe(tree, self._auto_keys, argmax, path)
        record = None
        if cfg.record:
            record = self._record(tree, argmax, path, len(new), verify_s, time.perf_counter() - c0 - verify_s)
        return new, record, stop

    def _stop_at(self, tokens: list[int], new: list[int]) -> int | None:
        """The index in ``new`` of the first token that ends decoding (None: none does): an EOS or stop
        token id, or one after which the generated text's last tokens (enough to hold the longest stop
        string) contain a stop string. Each emitted token is checked in order, one at a time, as ``ar``
        emits them, so every method stops at the same token."""
        strings, window = self.config.stop_strings, self._stop_window
        recent = tokens[max(self._prompt_len, len(tokens) - window):] if strings else []
        for i, t in enumerate(new):
            if t in self.eos:
                return i
            if strings:
                text = self.bundle.tokenizer.decode((recent + new[: i + 1])[-window:], skip_special_tokens=True)
                if any(x in text for x in strings):
                    return i
        return None

    def _sampled_walk(self, tree: DraftTree, logits: torch.Tensor, past: int) -> tuple[list[int], list[int]]:
        """The target's sampled choice at every node with children (-1 at the other leaves) and the
        accepted path; the path's end, when a leaf, gets its sample too (the bonus token). A node at
        depth d predicts position past + d + 1 (goose_runtime.sampling)."""
        self.sampler.forget_before(past + 1)
        choice = [-1] * tree.n_nodes
        rows = sorted(set(tree.parent[1:])) or [0]
        positions = [past + tree.depth[r] + 1 for r in rows]
        for r, t in zip(rows, self.sampler.targets(logits, rows=rows, positions=positions)):
            choice[r] = t
        path = greedy_walk(tree, choice)  # a leaf has no children to match its -1
        if choice[end := path[-1]] < 0:
            choice[end] = self.sampler.targets(logits, rows=[end], positions=[past + tree.depth[end] + 1])[0]
        return choice, path

    def _record(self, tree: DraftTree, argmax: list[int], path: list[int], tau: int, verify_s: float,
                draft_s: float) -> CycleRecord:
        n = tree.n_nodes
        accepted = [False] * n
        for node in path:
            accepted[node] = True
        match = [True] + [tree.token[i] == argmax[tree.parent[i]] for i in range(1, n)]
        goose = self.method.kind == "goose"
        return CycleRecord(parent=list(tree.parent), source=[SOURCE_NAMES[s] for s in tree.source],
                           rank=list(tree.rank), token=list(tree.token), match=match, accepted=accepted,
                           score=list(tree.score), spine_pos=list(tree.spine_pos), tau=tau, verify_s=verify_s,
                           draft_s=draft_s, ngram=tree.match.ngram, consensus=tree.match.consensus,
                           ema=self.policy.ema if goose else (self.auto.spine_estimate() if self.method.kind == "auto"
                                                              else float("nan")), bypass=tree.bypass,
                           # what the matcher offered, before the tree cut it (-1: method has no matcher)
                           spine_avail=len(tree.match) if self.method.uses_matcher else -1,
                           confident=int(tree.match.high_confidence) if self.method.uses_matcher else -1)
