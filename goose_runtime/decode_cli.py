"""``goose decode`` (``goose profile-latency`` and ``goose record-traces``: :mod:`.record_cli`).

torch and transformers are imported inside the handlers only, so ``goose yield`` stays fast. Bad input (unknown
method or prompt set, a topology that does not validate, an empty or over-long prompt, a missing model path,
``--limit < 1``, a DecodeConfig value out of range) ends with one line on stderr and exit code 2.

Example:
    goose decode --method goose --compare ar,pld,tr --bench humaneval --limit 5 --max-new-tokens 128
    goose decode --method goose --prompt "def fib(n):" --json
    goose decode --method auto --bench stdlib --limit 3 --refresh-latency   # re-measure the cached profile
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import sys

from goose_theory.cli_util import (UsageError, check_not_an_input, format_table, load_latency_option, print_json,
                                   split_list)

from .cli_checks import (add_refresh_option, add_sampling_options, add_stop_options, check_model_args, check_refresh,
                         check_run_args, few_tokens_note, make_config, noisy_speedup_note, sampling_settings,
                         setting_line, stop_settings, unreachable_ranks_note)

DEFAULT_COMPARE = "ar"


def register(subparsers) -> None:
    decode = subparsers.add_parser("decode", help="lossless speculative decoding with one or more methods")
    decode.add_argument("--method", default="goose",
                        help="ar, pld, tr, iso:K, mixed-iso:K, goose (default), auto, topology:FILE; NAME@B sets "
                        "its budget; NAME+prior (e.g. goose+prior@8) adds the model's successor prior to its adjacency table; "
                        "goose+store, auto+store (e.g. goose+store@2) draft a retrieval store's guess in unmatched cycles")
    decode.add_argument("--compare", default=DEFAULT_COMPARE, help="comma-separated methods run on the same prompts; "
                        "ar always runs, the speedup's reference (default: ar; e.g. ar,pld,tr,goose@16)")
    source = decode.add_mutually_exclusive_group(required=True)
    source.add_argument("--bench", help="humaneval, mtbench, stdlib, stdlib-wide, humaneval-shuffled, "
                        "mtbench-shuffled or a .jsonl file")
    source.add_argument("--prompt", help="one prompt text")
    decode.add_argument("--limit", type=int, help="first N prompts of --bench (default: the whole set, e.g. 164 "
                        "HumanEval problems: minutes per method on a CPU)")
    decode.add_argument("--budget", type=int, help="tree node budget of the tree methods (default: goose, iso:K, mixed-iso:K "
                        "60 (the paper's), tr 80, auto at most 63, pld the matched chain, up to 20; a topology file its own)")
    decode.add_argument("--topology", help="topology JSON (goose optimize) for --method topology")
    decode.add_argument("--trace-out", help="write the parquet trace of every method of the run here")
    decode.add_argument("--latency", help="goose-latency/1 profile for the auto method (default: this device's, "
                        "measured once and cached)")
    decode.add_argument("--store-corpus", action="append", metavar="PATH",
                        help="file or folder of text for the +store methods' retrieval store (repeatable; default: "
                        "this Python's standard library minus the stdlib prompt set's modules)")
    add_refresh_option(decode)
    _decode_options(decode)
    add_stop_options(decode)
    decode.add_argument("--json", action="store_true", help="print one JSON object")
    decode.set_defaults(handler=decode_handler)


def add_model_options(parser, *, device: str = "auto", threads: int | None = None) -> None:
    """--model, --device, --dtype and --threads; record-traces passes the shipped traces' cpu and 1 thread."""
    parser.add_argument("--model", default="default",
                        help="'default' (embedded SmolLM2-135M, the default), a folder or an HF id")
    parser.add_argument("--device", default=device, choices=("auto", "cpu", "cuda"),
                        help="auto (the default): cuda where a GPU is visible, else cpu" if device == "auto"
                        else f"default {device} (the shipped traces' device)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="weights and activations (default float32: the only lossless-checked dtype)")
    parser.add_argument("--threads", type=int, default=threads,
                        help="torch CPU threads (default: torch's choice); 1 is steadier on a machine shared with "
                        "other jobs" if threads is None else f"torch CPU threads (default {threads}: steady timings "
                        "on a machine shared with other jobs)")


def _decode_options(parser) -> None:
    add_model_options(parser)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="tokens per prompt (default 128)")
    adj = parser.add_mutually_exclusive_group()
    adj.add_argument("--reset-adjacency", dest="reset_adjacency", action="store_true", default=True,
                     help="clear the adjacency table before each prompt (default)")
    adj.add_argument("--keep-adjacency", dest="reset_adjacency", action="store_false",
                     help="carry the adjacency table across prompts (as Token Recycling does)")
    parser.add_argument("--keep-history", action="store_true",
                        help="the context matcher also indexes the earlier prompts and outputs of the run (the "
                        "newest 32k tokens), so phrases the model wrote before are drafted as spines (default: "
                        "each prompt alone, as in the paper)")
    parser.add_argument("--min-score", type=float, default=0.0,
                        help="goose: do not draft transition candidates whose harvested probability (an upper "
                        "bound: softmax over the top-k's blocks) is below this (the paper lists 0.01; default 0: "
                        "off, see README)")
    parser.add_argument("--branch-power", type=float, default=1.0,
                        help="goose: split a branch budget over sibling candidates as 1/rank**P (default 1, "
                        "harmonic; 2 is Token Recycling's shape, see README)")
    add_sampling_options(parser)


def load_quietly(args):
    """Load ``--model`` without transformers' weight-loading bar (stderr stays one line on errors)."""
    from transformers.utils import logging as hf_logging

    from . import model as model_mod

    hf_logging.disable_progress_bar()
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    if args.model == model_mod.DEFAULT_NAME and not model_mod.default_model_cached():
        say("converting the default model's GGUF file to a cached checkpoint (once, about 20 s)")
    # --refresh-latency re-measures the device: the kernel plan the profile is measured under too
    return model_mod.load_model(args.model, device=args.device, dtype=args.dtype,
                                refresh_plan=getattr(args, "refresh_latency", False))


def _method_list(args) -> list[str]:
    names = [args.method] + (split_list(args.compare, "--compare") if args.compare is not None else [])
    if "ar" not in names:
        names.append("ar")  # the speedup is always against ar measured in the same run
    return list(dict.fromkeys(names))


def _check_decode_flags(args, specs) -> None:
    from .methods import label_kind, topology_file

    files = [topology_file(m) for m in _method_list(args)]  # topology:FILE[+prior][+store][@B]
    check_not_an_input(args.trace_out, "--trace-out", {"--latency": args.latency, "--topology": [args.topology, *files],
                                                       "--bench": args.bench, "--store-corpus": args.store_corpus})
    if args.budget is not None and all(s.kind == "ar" for s in specs):  # ar@5 is refused; --budget 5 was ignored
        raise UsageError("--budget applies to the drafting methods, and this run has only ar (which drafts nothing)")
    for flag, off in (("min_score", 0.0), ("branch_power", 1.0)):
        if getattr(args, flag) != off and not any(s.kind == "goose" for s in specs):
            raise UsageError(f"--{flag.replace('_', '-')} applies to goose only, and no goose method is in this run")
    bare = (label_kind(m) == ("topology", None) for m in _method_list(args))  # any case, spaces, suffixes, @B
    if args.topology is not None and not any(bare):
        raise UsageError("--topology is the file of --method topology (or of 'topology' in --compare), and no "
                         "bare 'topology' method is in this run (topology:FILE names its own file)")
    if args.refresh_latency and not any(s.kind == "auto" for s in specs):
        raise UsageError("--refresh-latency applies to the auto method only (the one that reads the latency "
                         "profile), and no auto method is in this run")
    check_refresh(args)
    if args.store_corpus:
        if not any(s.store for s in specs):
            raise UsageError("--store-corpus applies to +store methods only, and none is in this run")
        from .store_corpus import check_corpus, corpus_files
        check_corpus(corpus_files(args.store_corpus))  # a missing, huge or binary corpus is named now, not after the model load
    if args.latency is not None:
        if not any(s.kind == "auto" for s in specs):
            raise UsageError("--latency applies to the auto method only (the one that reads a latency profile), and "
                             "no auto method is in this run")
        if load_latency_option(args.latency).sizes[0] != 1:  # auto weighs every tree against one plain decode step
            raise UsageError(f"--latency {args.latency}: the profile must measure n = 1 (a plain decode step) too")


def decode_handler(args: argparse.Namespace) -> int:
    check_run_args(args)  # also: --latency '', --topology '', --model '' are refused, not taken as not given
    check_model_args(args)  # a bad --model, --device, --dtype: one line before the prompts and the model load
    if args.prompt is not None and args.limit is not None:
        raise UsageError("--limit applies to --bench only")
    config = make_config(max_new_tokens=args.max_new_tokens, reset_adjacency=args.reset_adjacency, record=True,
                         keep_history=args.keep_history, min_score=args.min_score, branch_power=args.branch_power,
                         store_corpus=tuple(args.store_corpus or ()), **sampling_settings(args), **stop_settings(args))
    from .runner import distinct_methods, parse_labeled, run_methods, summarize

    specs = [parse_labeled(m, budget=args.budget, topology_path=args.topology) for m in _method_list(args)]
    distinct_methods(specs)  # before the model loads: two topology files of one name are refused
    _check_decode_flags(args, specs)
    if note := unreachable_ranks_note(specs, config.top_k):
        say(f"note: {note}")
    prompts = _decode_prompts(args, specs, config)
    bundle = load_quietly(args)
    config = _shared_parts(args, bundle, specs, config)
    with progress_bar(len(prompts) * len(specs)) as bar:
        results = run_methods(bundle, specs, prompts, config=config, on_result=lambda r: bar.update(1))
    summaries = summarize(results)
    trace_rows = _maybe_trace(args, bundle, specs, results, config) if args.trace_out is not None else None
    primary = next(iter(results))
    if args.json:
        print_json(_json_report(args, bundle, results, summaries, primary, trace_rows))
    else:
        _print_summary(args, results, summaries, primary, trace_rows)
    return 0


def _decode_prompts(args: argparse.Namespace, specs, config) -> list:
    """The prompts of --prompt or --bench, checked before the model loads."""
    from .prompts import Prompt, check_text, load_prompts

    if args.prompt is None:
        prompts = load_prompts(args.bench, limit=args.limit)
        if any(s.store for s in specs):
            from .store import check_store_bench
            check_store_bench(prompts[0].benchmark, config.store_corpus)
        return prompts
    if not args.prompt.strip():
        raise UsageError("--prompt is empty")
    check_text(args.prompt, "--prompt")
    # the id names the exact text, so the fit's bootstrap (one unit per (benchmark, prompt_id))
    # keeps traces of different --prompt texts apart and pools repeats of one text
    return [Prompt(id="prompt-" + hashlib.sha1(args.prompt.encode()).hexdigest()[:10], text=args.prompt,
                   benchmark="prompt")]


def _shared_parts(args: argparse.Namespace, bundle, specs, config):
    """The parts the methods share, built once before decoding, each announced first (they take
    seconds to minutes): the latency profile (auto), the successor prior, the retrieval store.
    Returns the config with the profile in it."""
    if any(s.kind == "auto" for s in specs):
        from .profile import device_profile
        latency, _ = device_profile(bundle, dtype=args.dtype, path=args.latency, refresh=args.refresh_latency,
                                    log=say)
        config = dataclasses.replace(config, latency=latency)
        capped = [s for s in specs if s.kind == "auto" and s.budget > max(latency.sizes) - 1]
        if capped:  # auto prices no tree the profile does not measure (no extrapolation)
            say(f"note: auto's trees stop at {max(latency.sizes) - 1} nodes (budget {capped[0].budget} asked): the "
                f"latency profile measures trees of at most {max(latency.sizes)} tokens")
    if any(s.prior for s in specs):  # built once per model (a minute or two on a CPU)
        from .prior import shared_prior
        shared_prior(bundle, top_k=config.top_k, log=say)
    if any(s.store for s in specs):  # about 10 s the first time
        from .store import shared_store
        shared_store(bundle, config.store_corpus, log=say)
    return config


def say(message: str) -> None:
    """One progress line on stderr, as every runtime command writes them."""
    print(f"[goose] {message}", file=sys.stderr, flush=True)


def _print_summary(args: argparse.Namespace, results, summaries, primary: str, trace_rows) -> None:
    print(*filter(None, [setting_line(args), format_table(_table(summaries))]), sep="\n")  # sampled or penalised: say so
    for note in (few_tokens_note(sum(len(r.token_ids) for r in results["ar"])),
                 noisy_speedup_note([(s.method, s.tau, s.speedup_vs_ar) for s in summaries.values()])):
        if note:
            print(f"note: {note}")
    if args.prompt is not None:
        print(f"\n[{primary}] {results[primary][0].text}")
    if trace_rows is not None:
        print(f"trace: {args.trace_out} ({trace_rows} rows)")


@contextlib.contextmanager
def progress_bar(total: int | None):
    from tqdm import tqdm

    # disable=None: a bar on an interactive stderr only, so pipes and tests stay clean (total None: a count)
    with tqdm(total=total, unit="decode", file=sys.stderr, disable=None, leave=False) as bar:
        yield bar


def _table(summaries) -> list[dict]:
    return [{"method": s.method, "prompts": s.prompts, "tokens": s.new_tokens, "tau": s.tau,
             "tokens/s": s.tokens_per_s, "speedup": f"{s.speedup_vs_ar:.2f}x", "nodes": s.mean_nodes,
             "draft ms": s.draft_ms, "verify ms": s.verify_ms, "= ar": "yes" if s.matches_ar else "NO"}
            for s in summaries.values()]


def _json_report(args, bundle, results, summaries, primary, trace_rows) -> dict:
    head = {"model": bundle.name, "device": str(bundle.device), "dtype": args.dtype, "method": primary,
            "linears": bundle.linears, "max_new_tokens": args.max_new_tokens, "reset_adjacency": args.reset_adjacency,
            "keep_history": args.keep_history, "min_score": args.min_score, "branch_power": args.branch_power,
            **sampling_settings(args), **stop_settings(args)}
    if args.prompt is not None:
        methods = {}
        for label, (res,) in results.items():
            s = summaries[label]
            # the summary's fields (the table's nodes, draft and verify ms), then this prompt's text and ids
            methods[label] = {**s.to_dict(), "text": res.text, "token_ids": res.token_ids, "tau": res.mean_tau,
                              "tokens_per_s": res.tokens_per_s, "cycles": len(res.cycles)}
        top = methods[primary]
        report = {"prompt": args.prompt, **head, "text": top["text"], "token_ids": top["token_ids"],
                  "tau": top["tau"], "tokens_per_s": top["tokens_per_s"], "speedup_vs_ar": top["speedup_vs_ar"],
                  "all_match_ar": all(x.matches_ar for x in summaries.values()), "methods": methods}
    else:
        from .prompts import set_name
        s = summaries[primary]  # a JSONL set by its label, as the trace rows' benchmark column has it
        report = {"benchmark": set_name(args.bench), "prompts": s.prompts, **head, "tau": s.tau,
                  "tokens_per_s": s.tokens_per_s, "speedup_vs_ar": s.speedup_vs_ar,
                  "all_match_ar": all(x.matches_ar for x in summaries.values()),
                  "methods": {k: v.to_dict() for k, v in summaries.items()}}
    if trace_rows is not None:
        report.update(trace=args.trace_out, trace_rows=trace_rows)
    return report


def _maybe_trace(args, bundle, specs, results, config) -> int:
    from .prompts import set_name
    from .runner import write_results_trace

    # the set's label, as the rows' benchmark column and `goose validate`'s config record it (a
    # JSONL set's file stem, not the path it was given by)
    return write_results_trace(args.trace_out, bundle, specs, results, config, run_id_prefix="decode",
                               benchmark=set_name(args.bench) if args.bench is not None else "prompt")

