"""Running several methods on the same prompts in one run, and summarising them against ``ar``.

Used by ``goose decode``, ``goose record-traces`` and ``bench/bench_runtime.py``, so the CLI and
the benchmark measure the same way:

- one :class:`~goose_runtime.decoder.Decoder` per method, kept for the whole run (so
  ``reset_adjacency=False`` really carries the adjacency table across prompts);
- prompts outer, methods inner, so every method sees the machine in the same state;
- a short untimed warm-up decode before the first prompt (first forwards allocate and are slow);
- summaries pool cycles over prompts: ``tau`` = all tokens produced by verification cycles / all
  cycles (prefill excluded), ``tokens_per_s`` = new tokens / decode seconds (prefill excluded),
  ``speedup_vs_ar`` = tokens_per_s / ar's tokens_per_s in the same run.
"""
from __future__ import annotations

import dataclasses
import datetime
import uuid
from dataclasses import dataclass
from typing import Callable

from goose_theory.errors import InputError

from .prompts import Prompt, encode_prompt, longest_token
from .records import PromptResult


class PromptLengthError(InputError):
    """A prompt that is empty or does not fit the model's context with the requested new tokens."""


@dataclass(frozen=True)
class MethodSummary:
    """One method over a prompt set (see the module docstring for the definitions)."""

    method: str
    prompts: int
    new_tokens: int
    cycles: int
    tau: float
    tokens_per_s: float
    decode_s: float
    speedup_vs_ar: float
    matches_ar: bool          # token for token equal to ar on every prompt
    agree_with_ar: float      # share of ar's tokens before the first divergence
    draft_ms: float           # mean per-cycle time outside the forward pass
    verify_ms: float          # mean per-cycle forward time
    mean_nodes: float         # mean non-root nodes per verified tree

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def method_label(spec) -> str:
    """A unique label for a method spec: its name, plus ``@B`` when the budget is not the method's default.

    Example: ``goose`` (budget 60), ``goose@16``, ``iso:3``, ``iso:3@16``, ``ar``.
    """
    from .methods import AUTO_MAX_BUDGET, DEFAULT_BUDGET, TR_BUDGET

    default = {"ar": spec.budget, "pld": None, "tr": TR_BUDGET, "auto": AUTO_MAX_BUDGET}.get(spec.kind, DEFAULT_BUDGET)
    if spec.kind == "topology":
        default = spec.topology.budget
    return spec.name if spec.budget == default else f"{spec.name}@{spec.budget}"


def distinct_methods(specs: list) -> dict:
    """``{label: spec}``, one per label: ``goose`` and ``goose@60`` are the same method, and so is a
    file given twice. Two *different* methods under one label (two topology files with the same file
    name in different folders) raise :class:`~goose_runtime.methods.MethodError`, since one would
    silently replace the other in every table and trace."""
    from .methods import MethodError

    out: dict = {}
    for spec in specs:
        label = method_label(spec)
        if label in out and out[label] != spec:
            raise MethodError(f"two different methods are both labelled {label!r} (topology files are labelled "
                              f"by file name): rename one of the files")
        out.setdefault(label, spec)
    return out


def parse_labeled(spec: str, *, budget: int | None = None, topology_path: str | None = None):
    """:func:`~goose_runtime.methods.parse_method`, plus the ``NAME@B`` form of :func:`method_label`
    (``goose@16``: goose with budget 16), so labels round-trip."""
    from .methods import MethodError, is_count, parse_method

    name, at, tail = spec.strip().rpartition("@")
    a_file = spec.strip().lower().startswith("topology:")  # a file's name may hold an '@'
    if at and "@" in name and not a_file:  # goose@8@9 was "unknown method 'goose@8'"
        raise MethodError(f"{spec.strip()!r}: one budget, after one '@' (goose@16, for example)"[:200])
    if at and is_count(tail):  # ASCII digits: '²' passes str.isdigit, then int() raised a traceback
        if name.strip().lower() in ("ar", "ar+prior"):
            raise MethodError(f"{spec.strip()!r}: ar drafts nothing, so it takes no budget")
        return parse_method(name, budget=tail, topology_path=topology_path)
    if at and not a_file:  # not [0-9]+ (-3, 2.5, ², ٣, x): goose@x was "unknown method 'goose@x'"
        raise MethodError(f"{spec.strip()!r}: the budget after '@' must be a positive integer"[:200])
    return parse_method(spec, budget=budget, topology_path=topology_path)


def encode_all(bundle, prompts: list[Prompt], *, max_new_tokens: int, margin: int = 32) -> list[list[int]]:
    """Encoded prompts; raises :class:`PromptLengthError` for an empty or over-long one."""
    context = getattr(bundle.model.config, "max_position_embeddings", None)
    longest = longest_token(bundle.tokenizer) if context else 0
    out = []
    for prompt in prompts:
        who = "--prompt" if prompt.benchmark == "prompt" else f"prompt {prompt.id!r} of {prompt.benchmark}"  # not its hash id
        if not prompt.text.strip():
            raise PromptLengthError(f"{who} is empty")
        if context and len(prompt.text) > context * longest:  # tokenizing 10M characters took 22 s and 4.5 GB:
            head = encode_prompt(bundle, dataclasses.replace(prompt, text=prompt.text[: context * longest]))
            if len(head) > context:  # a prefix that alone overflows (a fused <unk> can beat the longest token)
                raise PromptLengthError(f"{who} has {len(prompt.text)} characters, and its first {context * longest} "
                                        f"alone make {len(head)} tokens: more than the model's context of {context}")
        ids = encode_prompt(bundle, prompt)
        if context and len(ids) + max_new_tokens + margin > context:
            raise PromptLengthError(f"{who} has {len(ids)} tokens; with {max_new_tokens} new tokens "
                                    f"and {margin} positions for a drafted tree it does not fit the model's "
                                    f"context of {context} tokens")
        out.append(ids)
    return out


def deepest_tree(specs: list) -> int:
    """The deepest node of the fixed trees ``specs`` draft (a ``topology:`` file's, every regime's):
    a drafted node sits at position past + depth, which must stay inside the model's context (a
    file's spine may be deeper than the adaptive builders' ``max_spine``)."""
    trees = [t for s in specs for t in s.fixed_trees]
    return max((int(t.depth.max()) for t in trees), default=0)


def tree_margin(config, specs: list, *, floor: int = 0) -> int:
    """Positions a prompt must leave free past its new tokens: the deepest tree ``specs`` may draft,
    + 2 (at least ``floor``: a check made before the trees are known)."""
    return max(floor, max(config.max_spine, config.max_depth, deepest_tree(specs)) + 2)


def run_methods(bundle, specs: list, prompts: list[Prompt], *, config,
                on_result: Callable[[PromptResult], None] | None = None,
                warmup: bool = True) -> dict[str, list[PromptResult]]:
    """Decode every prompt with every method; ``{label: [PromptResult per prompt]}`` in prompt order."""
    from .decoder import Decoder
    from .methods import parse_method

    ids = encode_all(bundle, prompts, max_new_tokens=config.max_new_tokens, margin=tree_margin(config, specs))
    if warmup and ids:
        warm = dataclasses.replace(config, max_new_tokens=min(8, config.max_new_tokens), record=False)
        Decoder(bundle, parse_method("ar"), warm).decode(ids[0][-64:], prompt_id="warmup", benchmark="warmup")
    decoders = {label: Decoder(bundle, s, config) for label, s in distinct_methods(specs).items()}
    return decode_all(decoders, prompts, ids, on_result=on_result)


def decode_all(decoders: dict, prompts: list[Prompt], ids: list[list[int]], *,
               on_result: Callable[[PromptResult], None] | None = None) -> dict[str, list[PromptResult]]:
    """Decode every prompt (its token ids in ``ids``) with every decoder, prompts outer and
    decoders inner, so that a drift of the host's speed falls on all methods alike; ``{label:
    [PromptResult per prompt]}``, each result's ``method`` set to its label. :func:`run_methods`
    runs through it, and so do benchmarks whose decoders differ in config, not only in method."""
    results: dict[str, list[PromptResult]] = {label: [] for label in decoders}
    for prompt, prompt_ids in zip(prompts, ids):
        for label, decoder in decoders.items():
            result = decoder.decode(prompt_ids, prompt_id=prompt.id, benchmark=prompt.benchmark)
            result = dataclasses.replace(result, method=label)
            results[label].append(result)
            if on_result is not None:
                on_result(result)
    return results


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def summarize(results: dict[str, list[PromptResult]], *, reference: str = "ar") -> dict[str, MethodSummary]:
    """Per-method summaries; ``speedup_vs_ar`` and agreement are against ``results[reference]``."""
    ref = results.get(reference)
    ref_rate = _rate(ref) if ref else float("nan")
    out = {}
    for label, runs in results.items():
        cycles = [c for r in runs for c in r.cycles]
        new_tokens = sum(len(r.token_ids) for r in runs)
        rate = _rate(runs)
        agree, matches = float("nan"), False
        if ref:
            matches = all(r.token_ids == a.token_ids for r, a in zip(runs, ref))
            total = sum(len(a.token_ids) for a in ref)
            agree = sum(common_prefix(r.token_ids, a.token_ids) for r, a in zip(runs, ref)) / total if total else 1.0
        out[label] = MethodSummary(
            method=label, prompts=len(runs), new_tokens=new_tokens, cycles=len(cycles),
            tau=_mean([c.tau for c in cycles]), tokens_per_s=rate, decode_s=sum(r.decode_s for r in runs),
            speedup_vs_ar=rate / ref_rate if ref_rate > 0 else float("nan"),
            matches_ar=matches, agree_with_ar=agree,
            draft_ms=1e3 * _mean([c.draft_s for c in cycles]), verify_ms=1e3 * _mean([c.verify_s for c in cycles]),
            mean_nodes=_mean([c.n_nodes - 1 for c in cycles]))
    return out


def _rate(runs: list[PromptResult]) -> float:
    seconds = sum(r.decode_s for r in runs)
    return sum(len(r.token_ids) for r in runs) / seconds if seconds > 0 else float("nan")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def run_config(specs, config, **extra) -> dict:
    """The full config of a run, as stored in the trace metadata; each method also records the
    adjacency score its decoder harvested (``score``) and, for goose, the ``min_score`` and
    ``branch_power`` it applied."""
    from .config import harvest_score

    def goose_only(s) -> dict:
        return {"min_score": config.min_score, "branch_power": config.branch_power} if s.kind == "goose" else {}

    methods = [{"label": method_label(s), "name": s.name, "budget": s.budget,
                "topology": s.topology.to_dict() if s.topology is not None else None,
                "score": harvest_score(s, config), **goose_only(s)} for s in specs]
    return {"methods": methods, "decode": dataclasses.asdict(config),
            "reset_adjacency": config.reset_adjacency, "keep_history": config.keep_history, **extra}


def new_run_id(prefix: str) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:6]}"


def write_results_trace(path: str, bundle, specs, results: dict[str, list[PromptResult]], config, *,
                        run_id_prefix: str, benchmark: str, prompt_ids: list[str] | None = None, **extra) -> int:
    """Write one run (every method on every prompt) as a trace file, atomically; the stored config
    is :func:`run_config`'s with the benchmark, the prompt ids (default: one per result), the torch
    thread count, the CPU's linear plan (``bundle.linears``: CPU name, MKL/oneDNN crossover) and ``extra``. Returns the row count."""
    import torch

    from .tracing import write_run_trace

    flat = [r for runs in results.values() for r in runs]
    ids = [r.prompt_id for r in flat] if prompt_ids is None else prompt_ids
    return write_run_trace(path, flat, run_id=new_run_id(run_id_prefix), model=bundle.name, device=str(bundle.device),
                           dtype=str(bundle.dtype).removeprefix("torch."),
                           config=run_config(specs, config, benchmark=benchmark, prompt_ids=ids,
                                             threads=torch.get_num_threads(), linears=bundle.linears, **extra))
