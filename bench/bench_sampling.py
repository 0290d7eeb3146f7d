"""Speculation under sampling: tau, speedup and per-cycle overhead against the temperature.

With ``--temperature T`` every method emits ``ar``'s sampled tokens (goose_runtime.sampling), and a
draft is accepted only when it *is* the sample, so acceptance falls as T spreads the target's
distribution. This runs each prompt set at each temperature with the same methods (``ar`` the
speedup's reference, measured in the same run) and, with ``--trace-dir``, writes one trace per
(set, temperature) for ``fit-acceptance`` (the fitted p_s and p_t against T). ``--cuts`` adds
top-k / top-p / min-p cuts (``p0.9``, ``k40``, ``k40p0.9``, ``m0.05``; ``none``: no cut) at every
temperature above 0; ``--penalties`` penalties at every setting: ``1`` (none), a plain number (a
repetition penalty), or ``rX``, ``fX``, ``pX``, ``nN`` in that order (repetition, frequency, presence,
no-repeat n-gram size: ``f0.5``, ``r1.2p0.5``, ``n3``). With ``auto`` among ``--methods`` the run profiles the verification latency first.

    .venv/bin/python bench/bench_sampling.py --limit 5 --temperatures 0,0.3,0.7,1 \\
        --out bench/results/sampling_<date>.json --trace-dir /tmp/sampling-traces
    .venv/bin/python bench/bench_sampling.py --limit 5 --temperatures 0.7,1 --cuts none,p0.9,k40 \\
        --out bench/results/sampling_cuts_<date>.json
    .venv/bin/python bench/bench_sampling.py --temperatures 0 --penalties 1,f0.5,p0.5 \\
        --methods ar,pld,goose@16,goose+prior@8,auto --out bench/results/sampling_counts_<date>.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time

import torch

from goose_runtime.config import DecodeConfig
from goose_runtime.model import load_model
from goose_runtime.prior import shared_prior
from goose_runtime.profile import profile_latency
from goose_runtime.prompts import load_prompts
from goose_runtime.runner import parse_labeled, run_methods, summarize, write_results_trace

from bench_runtime import LATENCY_SIZES  # run as a script from the repo root: bench/ is on sys.path

METHODS = "ar,pld,goose@16,goose+prior@8"


def parse_cut(text: str) -> tuple[int, float, float]:
    """(top-k, top-p, min-p): ``none`` -> (0, 1.0, 0.0); ``k40p0.9`` -> (40, 0.9, 0.0); ``m0.05`` -> (0, 1.0, 0.05)."""
    if text == "none":
        return 0, 1.0, 0.0
    if not (m := re.fullmatch(r"(?:k(\d+))?(?:p([0-9.]+))?(?:m([0-9.]+))?", text)) or not text:
        raise SystemExit(f"--cuts: {text!r} is not none or kN, pX, mX in that order (e.g. kNpX)")
    return int(m[1] or 0), float(m[2] or 1.0), float(m[3] or 0.0)


def parse_penalties(text: str) -> tuple[float, float, float, int]:
    """(repetition, frequency, presence, n-gram ban): ``1`` -> (1.0, 0.0, 0.0, 0); ``1.2`` -> (1.2, 0.0,
    0.0, 0); ``r1.2p0.5`` -> (1.2, 0.0, 0.5, 0); ``n3`` -> (1.0, 0.0, 0.0, 3)."""
    if re.fullmatch(r"[0-9.]+", text):
        return float(text), 0.0, 0.0, 0
    if not (m := re.fullmatch(r"(?:r([0-9.]+))?(?:f(-?[0-9.]+))?(?:p(-?[0-9.]+))?(?:n(\d+))?", text)) or not text:
        raise SystemExit(f"--penalties: {text!r} is not a number or rX, fX, pX, nN in that order (e.g. r1.2f0.5)")
    return float(m[1] or 1.0), float(m[2] or 0.0), float(m[3] or 0.0), int(m[4] or 0)


def run_one(bundle, specs, prompts, *, bench: str, temperature: float, cut: tuple[int, float, float],
            penalty: tuple[float, float, float, int], seed: int, max_new_tokens: int, trace_dir: str | None,
            latency=None) -> list[dict]:
    """One (set, temperature, cut, penalties): every method on every prompt; a row per method."""
    config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                          sample_top_k=cut[0], sample_top_p=cut[1], sample_min_p=cut[2], repetition_penalty=penalty[0],
                          frequency_penalty=penalty[1], presence_penalty=penalty[2], no_repeat_ngram_size=penalty[3],
                          latency=latency)
    results = run_methods(bundle, specs, prompts, config=config)
    name = (f"{bench}-T{temperature:g}" + (f"-k{cut[0]}" if cut[0] else "") + (f"-p{cut[1]:g}" if cut[1] < 1 else "")
            + (f"-m{cut[2]:g}" if cut[2] else "") + (f"-r{penalty[0]:g}" if penalty[0] != 1 else "")
            + (f"-f{penalty[1]:g}" if penalty[1] else "") + (f"-pp{penalty[2]:g}" if penalty[2] else "")
            + (f"-n{penalty[3]}" if penalty[3] else ""))
    if trace_dir:
        write_results_trace(os.path.join(trace_dir, f"{name}.parquet"), bundle, specs, results,
                            config, run_id_prefix=f"sampling-{name}", benchmark=bench,
                            prompt_ids=[p.id for p in prompts])
    return [{"set": bench, "temperature": temperature, "top_k": cut[0], "top_p": cut[1], "min_p": cut[2],
             "repetition_penalty": penalty[0], "frequency_penalty": penalty[1], "presence_penalty": penalty[2],
             "no_repeat_ngram_size": penalty[3],
             "method": s.method,
             "tau": round(s.tau, 3),
             "tokens_per_s": round(s.tokens_per_s, 1), "speedup": round(s.speedup_vs_ar, 3),
             "draft_ms": round(s.draft_ms, 3), "verify_ms": round(s.verify_ms, 2), "nodes": round(s.mean_nodes, 1),
             "matches_ar": s.matches_ar} for s in summarize(results).values()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="humaneval,stdlib,mtbench")
    parser.add_argument("--temperatures", default="0,0.3,0.7,1")
    parser.add_argument("--cuts", default="none",
                        help="top-k / top-p / min-p cuts at each T > 0: none, kN, pX, mX, kNpX...")
    parser.add_argument("--penalties", default="1",
                        help="penalties at each setting: 1 (none), a repetition penalty, or rX, fX, pX, nN in that order")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--trace-dir", help="write a trace per (set, temperature) here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle = load_model()
    specs = [parse_labeled(m) for m in args.methods.split(",")]
    cuts = [parse_cut(c) for c in args.cuts.split(",")]
    penalties = [parse_penalties(x) for x in args.penalties.split(",")]
    latency = profile_latency(bundle, sizes=[n for n in LATENCY_SIZES if n <= 64], repeats=9) if any(
        s.kind == "auto" for s in specs) else None  # up to auto's default budget
    if any(s.prior for s in specs):
        shared_prior(bundle, top_k=10)
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    rows, start = [], time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for bench in args.sets.split(","):
        prompts = load_prompts(bench, limit=args.limit)
        settings = [(t, cut, r) for t in (float(x) for x in args.temperatures.split(","))
                    for cut in ([(0, 1.0, 0.0)] if t == 0 else cuts)  # greedy: a cut changes nothing
                    for r in penalties]
        for t, cut, r in settings:
            for row in run_one(bundle, specs, prompts, bench=bench, temperature=t, cut=cut, penalty=r, seed=args.seed,
                               max_new_tokens=args.max_new_tokens, trace_dir=args.trace_dir, latency=latency):
                rows.append(row)
                print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"started": start, "machine": platform.processor() or platform.machine(),
                       "threads": args.threads, "limit": args.limit, "max_new_tokens": args.max_new_tokens,
                       "seed": args.seed, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
