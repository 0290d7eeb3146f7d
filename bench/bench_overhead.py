"""Where a cycle's time outside the forward pass goes: per-phase milliseconds per cycle.

Issue 3's target is an overhead under 1 ms per cycle (matching, tree building, mask, walk, cache
compaction, harvesting). This decodes real prompts with each method and wraps the decoder's phases
with timers: ``build`` (matching and the tree), ``mask``, ``readout`` (top-k of every node's
logits: the walk's argmax and the harvest's candidates), ``walk``, ``compact`` (KV cache),
``harvest`` (adjacency table update). ``draft_s`` is the decoder's own per-cycle figure (the
cycle's wall time minus the forward), the number the traces and ``bench_runtime.py`` report; the
timers add about a microsecond per wrapped call. One warm-up prompt per method is not counted.
``faults`` is the process's minor page faults per cycle (``getrusage``): whether freed memory that
the allocator hands back to the OS and takes again each cycle is what makes small ops slow after a
forward (glibc's ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` in the environment keep it).
``--parallel-rows N`` sets the number of rows from which the readout kernel runs on numba's thread
pool (``readout.PARALLEL_ROWS``; 1: always, as before 30 Nov 05:30).
``--auto-full-growth`` adds, for each ``auto`` method, a run that grows every tree to the budget
before cutting it (``dyntree.EARLY_STOP = False``, as before 1 Dec): the same trees, the cost of
growing them all.
``--torch-readout`` adds, for each method, a run that reads the top-k with torch ops alone
(``verify.blocked_topk``) instead of the numba kernel (``goose_runtime/readout.py``), the two runs
back to back. ``--dtype bfloat16`` (or ``float16``) loads the model in that dtype (the numba kernel
reads its logits widened to fp32).

Usage:
    .venv/bin/python bench/bench_overhead.py --methods ar,goose@8,goose@16,goose@60,goose@80,tr \
        --bench humaneval --prompts 3 --threads 2
"""
from __future__ import annotations

import argparse
import collections
import resource
import sys
import time

import torch

import goose_runtime.adjacency as adjacency
import goose_runtime.config as config
import goose_runtime.decoder as decoder
import goose_runtime.dyntree as dyntree
import goose_runtime.readout as readout
from goose_runtime.cli_checks import check_run_args
from goose_runtime.runner import parse_labeled
from goose_runtime.model import load_model, resolve_dtype
from goose_runtime.prompts import encode_prompt, load_prompts
from goose_runtime.store import check_store_bench

PHASES = (("build", decoder.Decoder, "_build"), ("mask", decoder.MaskBuilder, "tree_mask"),
          ("readout", decoder, "top_candidates"), ("walk", decoder, "greedy_walk"),
          ("compact", decoder, "compact"), ("harvest", adjacency.AdjacencyTable, "update"))


def install_timers(totals: dict[str, float]) -> None:
    """Wrap each phase's function so that its seconds add up in ``totals``."""
    for label, owner, name in PHASES:
        inner = getattr(owner, name)

        def timed(*args, _inner=inner, _label=label, **kwargs):
            start = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                totals[_label] += time.perf_counter() - start
        setattr(owner, name, timed)


def measure(bundle, method: str, prompts: list[list[int]], totals: dict[str, float], *,
            refresh: bool = False, benchmark: str = "prompt", dtype: str = "float32") -> dict[str, float]:
    """ms per cycle of ``draft_s`` and of each phase, over ``prompts`` (after one warm-up prompt)."""
    spec = parse_labeled(method)
    latency = None
    if spec.kind == "auto":  # auto cuts its trees on this device's latency profile (cached)
        from goose_runtime.profile import device_profile
        latency, _ = device_profile(bundle, dtype=dtype, refresh=refresh)
    dec = decoder.Decoder(bundle, spec, config.DecodeConfig(max_new_tokens=128, latency=latency))
    dec.decode(prompts[0], benchmark=benchmark)  # the set's name: +store refuses stdlib-wide
    totals.clear()
    cycles, draft = 0, 0.0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for ids in prompts:
        result = dec.decode(ids, benchmark=benchmark)
        cycles += len(result.cycles)
        draft += sum(c.draft_s for c in result.cycles)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    row = {"cycles": cycles, "draft_s": 1e3 * draft / cycles, "faults": faults / cycles}
    row.update({label: 1e3 * totals[label] / cycles for label, _, _ in PHASES})
    return row


def parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in (("--methods", "ar,goose@4,goose@8,goose@16,goose@60,goose@80,tr,auto"),
                          ("--bench", "humaneval"), ("--dtype", "float32")):
        ap.add_argument(flag, default=default)
    for flag, default in (("--prompts", 3), ("--threads", 2)):
        ap.add_argument(flag, type=int, default=default)
    ap.add_argument("--torch-readout", action="store_true", help="also time each method with the torch-only readout")
    ap.add_argument("--parallel-rows", type=int, default=readout.PARALLEL_ROWS,
                    help="rows from which the readout kernel uses numba's thread pool (1: always)")
    ap.add_argument("--auto-full-growth", action="store_true",
                    help="also time each auto method growing every tree to the budget (no early stop)")
    ap.add_argument("--refresh-latency", action="store_true", help="re-measure auto's cached latency profile first")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    try:  # bad input: one line, exit 2, before the model loads
        methods = args.methods.split(",")
        specs = [parse_labeled(m) for m in methods]
        kinds = [s.kind for s in specs]
        first = load_prompts(args.bench, limit=1)   # PromptError (a ValueError) names an unknown set
        if any(s.store for s in specs):
            check_store_bench(first[0].benchmark, ())  # a StoreError (a ValueError) on stdlib-wide
        check_run_args(args, extra=("prompts", "parallel_rows"))  # a UsageError, a ValueError too
        resolve_dtype(args.dtype)  # a ModelLoadError (a ValueError) names an unknown dtype
        if args.refresh_latency and "auto" not in kinds:
            raise ValueError("--refresh-latency re-measures auto's profile, and no auto method is in this run")
    except ValueError as err:  # MethodError is one too
        print(f"error: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    readout.PARALLEL_ROWS = args.parallel_rows
    bundle = load_model(device="cpu", dtype=args.dtype)
    loaded = load_prompts(args.bench, limit=args.prompts)
    prompts = [encode_prompt(bundle, p) for p in loaded]
    totals: dict[str, float] = collections.defaultdict(float)
    install_timers(totals)
    labels = ["draft_s"] + [label for label, _, _ in PHASES] + ["faults"]
    print(f"{args.bench}, {args.prompts} prompts, 128 new tokens, {args.dtype}, {args.threads} threads: ms per cycle")
    print(f"{'method':18s} {'cycles':>6s} " + " ".join(f"{x:>8s}" for x in labels))
    refresh_left = args.refresh_latency  # re-measured once: every auto row is cut on one profile
    with torch.inference_mode():
        for method, kind in zip(methods, kinds):
            variants = [(method, False, True)] + ([(method + " (torch)", True, True)] if args.torch_readout else [])
            if args.auto_full_growth and kind == "auto":
                variants.append((method + " (full)", False, False))
            for name, torch_only, early_stop in variants:
                readout.USE_NUMBA, dyntree.EARLY_STOP = not torch_only, early_stop
                refresh, refresh_left = refresh_left and kind == "auto", refresh_left and kind != "auto"
                row = measure(bundle, method, prompts, totals, refresh=refresh, benchmark=loaded[0].benchmark,
                              dtype=args.dtype)
                cells = [f"{row[x]:8.1f}" if x == "faults" else f"{row[x]:8.3f}" for x in labels]
                print(f"{name:18s} {row['cycles']:6d} " + " ".join(cells), flush=True)
        readout.USE_NUMBA, dyntree.EARLY_STOP = True, True
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
