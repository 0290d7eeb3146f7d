"""Benchmark the runtime: every method on the same prompts in one run, per prompt set and dtype.

For each dtype (default fp32 and bf16) and prompt set (HumanEval, MT-Bench, CPython stdlib):
``ar``, ``pld``, ``tr``, ``iso:3``, ``mixed-iso:3`` (budget 60) and ``goose`` at several budgets
run on the same first N prompts (prompts outer, methods inner; goose_runtime.runner). Reported:
tau (tokens per verification call, bonus included, prefill excluded), tokens/s and speedup against
``ar`` of the same run (prefill excluded), whether the output equals ``ar`` token for token (fp32:
must be "yes" everywhere) and the share of ``ar``'s tokens before the first divergence (bf16),
mean nodes per tree, and the per-cycle time outside the forward pass (CycleRecord.draft_s:
matching, tree building, mask, walk, cache compaction, harvesting) beside the forward time.
Also the verification latency of 1..81-token forwards relative to a decode step.

Usage:
    .venv/bin/python bench/bench_runtime.py                       # ~25 min on a 2-core CPU
    .venv/bin/python bench/bench_runtime.py --dtypes float32 --budgets 8,80 --keep-adjacency

The defaults (first 5 prompts per set, 128 new tokens) are the conditions under which the issue
measured the paper's own code on this CPU, so the numbers compare with those.
Writes the tables to stdout (markdown) and the raw numbers to ``--out`` (JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch
from transformers.utils import logging as hf_logging

from goose_runtime.config import DecodeConfig
from goose_runtime.linear_plan import cpu_id, cpu_name
from goose_runtime.methods import parse_method
from goose_runtime.model import load_model
from goose_runtime.profile import profile_latency
from goose_runtime.prompts import load_prompts
from goose_runtime.runner import parse_labeled, run_methods, summarize
from goose_theory.cli_util import format_table, to_jsonable
from goose_theory.topology import write_json_atomic

BASELINES = ("ar", "pld", "tr", "iso:3", "mixed-iso:3")
LATENCY_SIZES = (1, 2, 4, 9, 17, 33, 48, 64, 81)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="humaneval,mtbench,stdlib")
    p.add_argument("--prompts", type=int, default=5, help="first N prompts of each set")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--budgets", default="4,8,16,60", help="goose budgets")
    p.add_argument("--baselines", default=",".join(BASELINES),
                   help="baseline methods (ar must be one; labels such as goose+store@2 name their budget)")
    p.add_argument("--keep-adjacency", action="store_true",
                   help="carry the adjacency table across prompts (as Token Recycling does); default: reset")
    p.add_argument("--keep-history", action="store_true",
                   help="the context matcher also indexes the earlier prompts and outputs (DecodeConfig.keep_history)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--bf16-methods", default="ar,pld,tr,goose@16,goose,auto",
                   help="methods run in bf16 (a subset keeps the run short)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--model", default="default")
    p.add_argument("--out", default="bench/results/bench_runtime.json")
    return p.parse_args(argv)


def machine() -> dict:
    cpu = cpu_name()
    if cpu == "cpu":  # no /proc/cpuinfo model name (not Linux)
        cpu = platform.processor() or "cpu"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "cpu_id": cpu_id(), "gpu": gpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load_avg_1m": os.getloadavg()[0], "python": platform.python_version(), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def specs_for(dtype: str, budgets: list[int], bf16_methods: set[str], baselines: tuple[str, ...] = BASELINES) -> list:
    specs = [parse_labeled(m) for m in baselines] + [parse_method("goose", budget=b) for b in budgets]
    specs.append(parse_method("auto"))  # cost-aware per cycle, from this run's latency profile
    if dtype == "float32":
        return specs
    from goose_runtime.runner import method_label
    return [s for s in specs if method_label(s) in bf16_methods]


def run_set(bundle, bench: str, specs: list, args, latency) -> list[dict]:
    prompts = load_prompts(bench, limit=args.prompts)
    config = DecodeConfig(max_new_tokens=args.max_new_tokens, latency=latency,
                          reset_adjacency=not args.keep_adjacency, keep_history=args.keep_history)
    t0 = time.perf_counter()
    results = run_methods(bundle, specs, prompts, config=config)
    wall = time.perf_counter() - t0
    rows = []
    for s in summarize(results).values():
        rows.append({"set": bench, "method": s.method, "tau": s.tau, "tok/s": s.tokens_per_s,
                     "speedup": s.speedup_vs_ar, "= ar": "yes" if s.matches_ar else "NO",
                     "agree": s.agree_with_ar, "nodes": s.mean_nodes, "draft ms": s.draft_ms,
                     "verify ms": s.verify_ms, "tokens": s.new_tokens})
    print(f"  {bench}: {len(prompts)} prompts x {len(specs)} methods in {wall:.0f} s", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hf_logging.disable_progress_bar()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    budgets = [int(b) for b in args.budgets.split(",")]
    report = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]), "machine": machine(),
              "prompts_per_set": args.prompts, "max_new_tokens": args.max_new_tokens,
              "adjacency": "kept across prompts" if args.keep_adjacency else "reset per prompt",
              "matcher": "earlier prompts and outputs too" if args.keep_history else "each prompt alone", "runs": {},
              "complete": False}  # True once every dtype and set has run
    start = time.perf_counter()
    for dtype in args.dtypes.split(","):
        bundle = load_model(args.model, device="auto", dtype=dtype)
        profile = profile_latency(bundle, sizes=LATENCY_SIZES, repeats=9)
        lat = profile.seconds
        specs = specs_for(dtype, budgets, set(args.bf16_methods.split(",")), tuple(args.baselines.split(",")))
        rows: list[dict] = []
        report["runs"][dtype] = {"device": str(bundle.device), "linears": bundle.linears, "rows": rows,
                                 "latency_ms": {n: 1e3 * t for n, t in zip(profile.sizes, lat)}}
        for bench in args.sets.split(","):
            rows.extend(run_set(bundle, bench, specs, args, profile))
            write_json_atomic(args.out, to_jsonable(report))  # after every set: a run cut short keeps what it measured
        print(f"\n## {bundle.name}, {dtype}, {bundle.device}\n")
        print("forward of n tokens / decode step: " +
              ", ".join(f"n={n}: {t / lat[0]:.2f}x" for n, t in zip(profile.sizes, lat)) +
              f" (decode step {1e3 * lat[0]:.1f} ms)\n")
        print("```\n" + format_table(rows) + "\n```")
    report["wall_s"] = time.perf_counter() - start
    report["complete"] = True
    print(f"\nmachine: {json.dumps(report['machine'])}\nwall: {report['wall_s']:.0f} s")
    write_json_atomic(args.out, to_jsonable(report))
    return 0



if __name__ == "__main__":
    sys.exit(main())
