"""``keep_history`` side by side: each method with and without the matcher's history, in one run.

``DecodeConfig.keep_history`` lets the context matcher index the earlier prompts and outputs of the
run as well as the current one. Whether that pays is a speed question on a noisy host, so both
variants of every method run in one process, prompt by prompt interleaved (prompts outer, decoders
inner, ``ar`` among them), under one latency profile (``auto`` decides from it; a fixed file keeps
its choices, and so every tau, the same from run to run). Each round starts fresh decoders (empty
tables, empty history); the table is kept across prompts within a round with ``--keep-adjacency``.

Reported per round: tau, mean drafted nodes, mean verify ms and speedup against ``ar`` of that round,
for each method alone and with history; then per method the median over rounds of the speedup
ratio (history / alone), the comparison that the host's drift between rounds does not move, and the
speedup the latency profile predicts for the trees drafted (``modeled``: emitted tokens times a
one-token forward over the profile's cost of every verified tree, draft time left out), which is
deterministic, so it shows the gain that the measured ratio should find under the noise.

    .venv/bin/python bench/bench_history.py --bench humaneval --limit 5 --rounds 3 --keep-adjacency \\
        --methods auto+store,goose+store@2,auto,goose@2,pld --latency bench/results/latency_cpu2t_xeon207_2026-12-01.json
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch

from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.model import load_model
from goose_runtime.profile import device_profile
from goose_runtime.prompts import load_prompts
from goose_runtime.runner import decode_all, encode_all, parse_labeled, summarize
from goose_theory.topology import write_json_atomic

from bench_runtime import machine  # run as a script from the repo root: bench/ is on sys.path


def one_round(bundle, labels: list[str], prompts, ids, config) -> dict:
    """Decode every prompt with ``ar`` and each method alone / with history; summaries by label."""
    history = dataclasses.replace(config, keep_history=True)
    decoders = {"ar": Decoder(bundle, parse_labeled("ar"), config)}
    for label in labels:
        decoders[label] = Decoder(bundle, parse_labeled(label), config)
        decoders[f"{label} +history"] = Decoder(bundle, parse_labeled(label), history)
    results = decode_all(decoders, prompts, ids)  # the runtime bench's loop: prompts outer, methods inner
    out = {label: dataclasses.asdict(s) for label, s in summarize(results).items()}
    for label, runs in results.items():
        out[label]["modeled_speedup"] = modeled_speedup(config.latency, [c for r in runs for c in r.cycles])
    return out


def modeled_speedup(latency, cycles) -> float:
    """Tokens per second the profile predicts for these cycles over those of plain decoding."""
    cost = sum(latency.verify_seconds(len(c.parent)) for c in cycles)  # the root is fed too
    return sum(c.tau for c in cycles) * latency.verify_seconds(1) / cost


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="humaneval")
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", default="auto+store,goose+store@2,auto,goose@2,pld")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep-adjacency", action="store_true")
    ap.add_argument("--latency", help="goose-latency/1 file for auto (default: this device's cached profile)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="JSON of every round")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle = load_model()
    latency, latency_file = device_profile(bundle, dtype="float32", path=args.latency)
    config = DecodeConfig(max_new_tokens=args.max_new_tokens, latency=latency, reset_adjacency=not args.keep_adjacency)
    prompts = load_prompts(args.bench, limit=args.limit)
    ids = encode_all(bundle, prompts, max_new_tokens=args.max_new_tokens, margin=config.max_spine + 2)
    labels = args.methods.split(",")
    host, rounds = machine(), []  # the host as the run starts (date, load before it)
    for r in range(args.rounds):
        t0 = time.perf_counter()
        rounds.append(one_round(bundle, labels, prompts, ids, config))
        print(f"round {r + 1}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        for label, s in rounds[-1].items():
            print(f"  {label:28} tau {s['tau']:.3f}  nodes {s['mean_nodes']:5.2f}  verify {s['verify_ms']:5.1f} ms  "
                  f"{s['speedup_vs_ar']:.2f}x  (modeled {s['modeled_speedup']:.3f}x)  = ar: {'yes' if s['matches_ar'] else 'NO'}")
    print(f"\n{args.bench}, first {args.limit}, {args.max_new_tokens} tokens, table "
          f"{'kept' if args.keep_adjacency else 'reset'}; latency profile {latency_file}; {host['cpu']}, {host['date']}")
    print("| method | tau alone | tau with history | modeled speedup alone -> with history | speedup alone (rounds) "
          "| with history | median ratio |")
    print("|---|---|---|---|---|---|---|")
    for label in labels:
        alone = [rd[label]["speedup_vs_ar"] for rd in rounds]
        hist = [rd[f"{label} +history"]["speedup_vs_ar"] for rd in rounds]
        ratio = statistics.median(h / a for h, a in zip(hist, alone))
        first, first_h = rounds[0][label], rounds[0][f"{label} +history"]
        print(f"| {label} | {first['tau']:.3f} | {first_h['tau']:.3f} | "
              f"{first['modeled_speedup']:.3f}x -> {first_h['modeled_speedup']:.3f}x | "
              f"{' / '.join(f'{x:.2f}x' for x in alone)} | {' / '.join(f'{x:.2f}x' for x in hist)} | {ratio:.3f} |")
    if args.out:
        write_json_atomic(args.out, {"command": " ".join(sys.argv), "machine": host, "latency": latency_file,
                                     "rounds": rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
