"""goose's branch split, 1/rank (P = 1, the default) against 1/rank^2 (P = 2, Token Recycling's
shape), side by side with ``ar`` in one run: prompts outer, decoders inner, the adjacency table kept
across prompts (the conditions of docs/bench-runtime.md's main table).

Usage:
    .venv/bin/python bench/bench_branch_power.py                      # ~5 min on the 2-core CPU
    .venv/bin/python bench/bench_branch_power.py --sets stdlib --budgets 8 --powers 1,2,3

Prints one line per prompt set: tau and speedup against ``ar`` for every (budget, power).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.methods import parse_method
from goose_runtime.model import load_model
from goose_runtime.prompts import load_prompts
from goose_runtime.runner import encode_all


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="humaneval,mtbench,stdlib")
    p.add_argument("--prompts", type=int, default=5, help="first N prompts of each set")
    p.add_argument("--budgets", default="8,16")
    p.add_argument("--powers", default="1,2")
    p.add_argument("--max-new-tokens", type=int, default=128)
    return p.parse_args(argv)


def run_set(bundle, bench: str, args) -> str:
    base = DecodeConfig(max_new_tokens=args.max_new_tokens, reset_adjacency=False)
    prompts = load_prompts(bench, limit=args.prompts)
    ids = encode_all(bundle, prompts, max_new_tokens=args.max_new_tokens, margin=22)
    decoders = {"ar": Decoder(bundle, parse_method("ar"), base)}
    for budget in (int(b) for b in args.budgets.split(",")):
        for power in (float(x) for x in args.powers.split(",")):
            decoders[f"goose@{budget} P={power:g}"] = Decoder(
                bundle, parse_method("goose", budget=budget), dataclasses.replace(base, branch_power=power))
    Decoder(bundle, parse_method("ar"), dataclasses.replace(base, max_new_tokens=8)).decode(ids[0][-64:])  # warm-up
    totals = {label: [0, 0.0, 0] for label in decoders}
    for prompt_ids in ids:
        for label, decoder in decoders.items():
            result = decoder.decode(prompt_ids)
            totals[label][0] += len(result.token_ids)
            totals[label][1] += result.decode_s
            totals[label][2] += len(result.cycles)
    ar_rate = totals["ar"][0] / totals["ar"][1]
    return f"{bench}: " + "  ".join(f"{label} tau {n / c:.3f} {n / s / ar_rate:.3f}x"
                                    for label, (n, s, c) in totals.items() if label != "ar")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bundle = load_model("default", device="cpu", dtype="float32")
    for bench in args.sets.split(","):
        print(run_set(bundle, bench, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
