"""Does the latency profile price the decode loop's trees right? Verify time by tree size, in the
loop and in ``verify_latency``'s back-to-back forwards, side by side.

``auto`` and the loop's budget rule price a tree of n rows at the profile's cost of n rows over its
cost of one. Inside the decode loop a forward follows the readout, the tree building and the cache
compaction, over a KV cache that grows with the output; the profile times forwards back to back over
a fixed 256-token prefix. This measures a profile, decodes the prompts with ``ar`` and goose at a
few budgets (the cycles' ``verify_s`` grouped by the tree's rows, root included), then measures a
second profile, and prints, per row count seen at least five times, the loop's median over its
median one-row step next to both profiles' ratios. When the loop's ratios sit between or near the
two profiles', the profile prices the loop right and a gap between modeled and measured speedups is
the host drifting between the profile and the run.

    .venv/bin/python bench/bench_loop_latency.py --bench humaneval --limit 5 --methods ar,goose@4,goose@8,goose@16
"""
from __future__ import annotations

import argparse
import collections
import statistics

import torch

from goose_runtime.config import DecodeConfig
from goose_runtime.model import load_model
from goose_runtime.profile import verify_latency
from goose_runtime.prompts import load_prompts
from goose_runtime.runner import parse_labeled, run_methods
from goose_theory.topology import write_json_atomic

from bench_runtime import machine  # run as a script from the repo root: bench/ is on sys.path


def loop_verify_seconds(bundle, *, bench: str, limit: int, methods: list[str], max_new_tokens: int) -> dict:
    """Every cycle's forward seconds, by the tree's rows (root included); the runtime bench's loop
    (``runner.run_methods``: prompts outer, methods inner, the table kept across prompts)."""
    config = DecodeConfig(max_new_tokens=max_new_tokens, reset_adjacency=False)
    results = run_methods(bundle, [parse_labeled(m) for m in methods], load_prompts(bench, limit=limit),
                          config=config, warmup=False)
    by_rows = collections.defaultdict(list)
    for runs in results.values():
        for cycle in (c for run in runs for c in run.cycles):
            by_rows[len(cycle.parent)].append(cycle.verify_s)
    return by_rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="humaneval")
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", default="ar,goose@4,goose@8,goose@16")
    ap.add_argument("--sizes", default="1,2,3,4,5,6,7,8,9,10,12,14,17", help="profile sizes (rows)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="JSON of the medians")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle, sizes, host = load_model(), tuple(int(s) for s in args.sizes.split(",")), machine()
    before = dict(zip(sizes, verify_latency(bundle, sizes=sizes, repeats=args.repeats)))
    by_rows = loop_verify_seconds(bundle, bench=args.bench, limit=args.limit, methods=args.methods.split(","),
                                  max_new_tokens=args.max_new_tokens)
    after = dict(zip(sizes, verify_latency(bundle, sizes=sizes, repeats=args.repeats)))
    step = statistics.median(by_rows[1])
    rows = [{"rows": n, "cycles": len(by_rows[n]), "loop_ms": 1e3 * statistics.median(by_rows[n]),
             "loop_ratio": statistics.median(by_rows[n]) / step, "before_ratio": before[n] / before[1],
             "after_ratio": after[n] / after[1]} for n in sizes if len(by_rows[n]) >= 5]
    print(f"{host['cpu']}, {host['date']}; one-row step: loop {1e3 * step:.1f} ms, profiles "
          f"{1e3 * before[1]:.1f} / {1e3 * after[1]:.1f} ms (before / after)")
    print("| rows | cycles | loop ms | loop / step | profile before | profile after |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rows']} | {r['cycles']} | {r['loop_ms']:.1f} | {r['loop_ratio']:.3f} | "
              f"{r['before_ratio']:.3f} | {r['after_ratio']:.3f} |")
    if args.out:
        write_json_atomic(args.out, {"machine": host, "methods": args.methods, "bench": args.bench,
                                     "limit": args.limit, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
