"""One decoding loop for every method: draft a tree, verify it in one pass, walk, compact, harvest.

Invariant: the KV cache holds every token except the last one (the *anchor*). The prefill runs
``prompt[:-1]``; each cycle verifies ``[anchor] + tree`` and emits the accepted tree tokens plus
the bonus token (the target's argmax at the last accepted node), which becomes the next anchor.
So every emitted token comes out of a verification cycle and ``sum(tau) == len(token_ids)``.
``ar`` is the same loop with an empty tree. Greedy verification makes every method emit exactly
the tokens of ``ar`` (tests/test_decoder.py, tests/test_lossless.py).

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

import functools
import math
import numbers
import time
from dataclasses import dataclass

import numpy as np
import torch

from goose_theory.allocation import PAPER_BYPASS_LEN
from goose_theory.errors import InputError
from goose_theory.latency import LatencyProfile

from . import readout
from .adjacency import AdjacencyTable
from .dyntree import Calibration, DynamicPolicy
from .goose import GoosePolicy, build_goose
from .kvcache import cache_for, compact
from .matcher import NO_MATCH, ContextMatcher
from .methods import MethodError, MethodSpec
from .model import ModelBundle
from .prior import attach_prior
from .records import CycleRecord, PromptResult
from .store import NO_GUESS, check_store_bench, shared_store
from .trees import DraftTree, build_chain, build_from_topology, new_tree
from .verify import MaskBuilder, forward, greedy_walk, top_candidates, tree_visibility

SOURCE_NAMES = ("root", "spine", "transition")
# keep_history: the matcher keeps at most this many earlier tokens (prompts and outputs); past it, the
# next prompt starts from the newest half. Its dicts cost about 0.9 KB a token (three n-gram sizes;
# docs/bench-runtime.md, "The matcher's history").
HISTORY_TOKENS = 1 << 15
SCORES = ("logit", "prob")


class ConfigError(InputError):
    """A :class:`DecodeConfig` field out of range (a ``ValueError``): ``field`` and ``problem``, so a
    CLI can name its flag instead (``cli_checks.make_config``: ``--min-score must be in [0, 1), ...``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def _real(v) -> bool:  # a finite number (not a bool)
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _count(v) -> bool:  # an integer >= 1 (not a bool)
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1


# field -> (what a good value is, test); every DecodeConfig checks its fields against these
_RULES = {
    "max_new_tokens": ("must be at least 1", _count),
    "top_k": ("must be at least 1", _count),
    "ngram_sizes": ("must be a non-empty tuple of integers >= 1",
                    lambda v: isinstance(v, tuple) and len(v) > 0 and all(_count(n) for n in v)),
    "max_spine": ("must be at least 1", _count),
    "max_depth": ("must be at least 1", _count),
    "adjacency_slots": ("must be at least 1", _count),
    "ema_alpha": ("must be in (0, 1]", lambda v: _real(v) and 0 < v <= 1),  # 0 would never update the EMA
    "rho": ("must be in [0, 1]", lambda v: _real(v) and 0 <= v <= 1),  # a share of the branch budget
    "bypass_len": ("must be at least 1", _count),
    "score": ("must be 'logit' or 'prob'", lambda v: v in SCORES),
    "min_score": ("must be in [0, 1)", lambda v: _real(v) and 0 <= v < 1),
    "keep_history": ("must be True or False", lambda v: isinstance(v, bool)),
    "store_corpus": ("must be paths of files or folders (an empty one names nothing)", lambda v: isinstance(v, tuple) and all(isinstance(p, str) and p for p in v)),
    "branch_power": ("must be in (0, 16]", lambda v: _real(v) and 0 < v <= 16),  # 1/rank**16 is 0 past rank 0
}


@dataclass(frozen=True)
class DecodeConfig:
    """Decoding options (paper defaults). ``reset_adjacency``: empty the adjacency table before each
    prompt (False carries it over, as Token Recycling's own code does). ``keep_history``: the context
    matcher also indexes the earlier prompts and outputs of this decoder (the last
    :data:`HISTORY_TOKENS`), so a phrase the model wrote for an earlier prompt is drafted as a spine
    (off by default: the paper matches within one prompt; Lookahead, Zhao et al. 2023, retrieves
    drafts from a trie of earlier prompts and outputs in the same way).

    Every range is checked here, once, when a config is made (also by ``dataclasses.replace``): a
    bad value raises :class:`ConfigError` naming the field.

    Example:
        >>> DecodeConfig(min_score=1.5)
        Traceback (most recent call last):
        ...
        goose_runtime.decoder.ConfigError: min_score must be in [0, 1), got 1.5
    """

    max_new_tokens: int = 128
    reset_adjacency: bool = True
    keep_history: bool = False
    top_k: int = 10
    ngram_sizes: tuple[int, ...] = (5, 4, 3)
    max_spine: int = 20
    max_depth: int = 6
    record: bool = True
    adjacency_slots: int = 1 << 16
    ema_alpha: float = 0.3
    rho: float = 0.5
    bypass_len: int = PAPER_BYPASS_LEN
    score: str = "logit"   # adjacency score: "logit" (free with the top-k) or "prob" (softmax over
                           # the top-k's blocks; verify.top_candidates). ``auto`` always uses "prob"
    # goose: transition candidates harvested with a probability below this are not drafted. The
    # paper lists 0.01; off by default here: on the shipped prompt sets it moves tau by -0.3% to
    # +2.2% at B = 4-16 and trims 7-10% of the nodes at B = 60 for -1.3% / -6.3% / 0% tau (README).
    # > 0 makes goose harvest "prob" scores, an upper bound on the probability (normalised over the
    # top-k's blocks only), so it cuts fewer candidates than a threshold on exact probabilities.
    min_score: float = 0.0
    # goose: a branch budget is split over sibling candidates with weights 1/rank**branch_power
    # (goose.grow_branches). 1 (harmonic) is the default and what every goose number in the README
    # used; 2 is the shape of Token Recycling's static tree, and measured higher tau in 15 of 18
    # cases (README, "Branch split").
    branch_power: float = 1.0
    latency: LatencyProfile | None = None  # device profile; required by the ``auto`` method
    store_corpus: tuple[str, ...] = ()  # +store methods: files / folders of the store (): the default (store.py)

    def __post_init__(self) -> None:  # the Decoder and the CLIs rely on these checks (decode_cli also
        # checks --max-new-tokens early, for record-traces, whose config runner.py builds)
        for field, (rule, ok) in _RULES.items():
            if not ok(value := getattr(self, field)):
                shown = repr(value) if isinstance(value, str) else value
                raise ConfigError(field, f"{rule}, got {shown}")


def harvest_score(method: MethodSpec, config: DecodeConfig) -> str:
    """The adjacency score a method's decoder harvests: ``auto`` needs probabilities to rank
    candidates, ``goose`` to apply ``min_score``; the rest use only their order (``config.score``)."""
    if method.kind == "auto" or (method.kind == "goose" and config.min_score > 0):
        return "prob"
    return config.score


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
        self.eos = frozenset(bundle.eos_token_ids)
        if method.kind == "auto" and config.latency is None:
            raise MethodError("method 'auto' needs a latency profile (DecodeConfig.latency)")
        self._calibration = Calibration()  # auto's acceptance estimates, carried across prompts
        self.score = harvest_score(method, config)
        if method.prior and self.adjacency is not None:  # the table's last fallback (goose_runtime.prior)
            attach_prior(self.adjacency, bundle, score=self.score)
        self.store = shared_store(bundle, config.store_corpus) if method.store else None
        self._history: ContextMatcher | None = None  # keep_history: the matcher of every prompt so far
        warm_kernels()

    # ---- one prompt ---------------------------------------------------------------------------
    def decode(self, prompt_ids: list[int], *, prompt_id: str = "prompt", benchmark: str = "prompt") -> PromptResult:
        """Greedy-decode up to ``max_new_tokens`` after ``prompt_ids`` (stops at the first EOS)."""
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

    def _cycle(self, tokens: list[int], matcher, cache, remaining: int):
        bundle, cfg = self.bundle, self.config
        c0 = time.perf_counter()
        tree = self._build(tokens, matcher)
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
        harvest = self.adjacency is not None
        top, probs = top_candidates(logits, cfg.top_k if harvest else 1, self.score if harvest else None)
        argmax = top[:, 0].tolist()
        path = greedy_walk(tree, argmax)
        new = [tree.token[n] for n in path[1:]] + [argmax[path[-1]]]
        new = new[:remaining]
        stop = len(new) == remaining
        for i, t in enumerate(new):
            if t in self.eos:
                new, stop = new[: i + 1], True
                break
        if not stop:
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
