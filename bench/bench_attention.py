"""Side by side: a tree forward of the real model with transformers' SDPA against packed attention.

transformers' SDPA path copies the whole K/V cache ``num_key_value_groups`` times in every layer
when more than one token is scored under a mask (``repeat_kv``); ``goose_sdpa``
(:mod:`goose_runtime.attention`) packs the query heads into rows instead. For each context length
and tree size the two run interleaved, round by round (background load hits both alike), and the
medians are reported with their ratio; logits are checked equal. A third column runs
``goose_sdpa`` with the mask tiled in every layer (a bare model call, outside
``attention.one_forward``), as before the tile was shared across layers.

Usage:
    .venv/bin/python bench/bench_attention.py --contexts 128,512,1024 --sizes 1,8,16,32 --threads 2
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from goose_runtime.kvcache import cache_for
from goose_runtime.model import load_model
from goose_runtime.profile import depths, ternary_parents
from goose_runtime.verify import MaskBuilder, forward

IMPLS = ("sdpa", "goose_sdpa", "goose_sdpa/tile-per-layer")


def time_forwards(model, context: int, size: int, rounds: int) -> tuple[dict[str, float], float]:
    """Median ms per implementation of one ``size``-node tree forward after ``context`` cached tokens,
    and the max |logit difference| between the implementations."""
    masks = MaskBuilder(torch.float32, torch.device("cpu"))
    parent = ternary_parents(size)
    ids, pos = torch.arange(size) * 7 + 11, torch.tensor(depths(parent)) + context
    cache, seconds, logits = cache_for(model), {impl: [] for impl in IMPLS}, {}
    forward(model, torch.arange(context) % 30000 + 100, torch.arange(context), masks.causal_mask(context), cache)
    for _ in range(rounds):
        for impl in IMPLS:
            model.set_attn_implementation(impl.split("/")[0])
            mask = masks.tree_mask(parent, context)
            t0 = time.perf_counter()
            if impl.endswith("tile-per-layer"):  # the bare call: no shared tile
                logits[impl] = model(input_ids=ids[None], attention_mask=mask, position_ids=pos[None], cache=cache,
                                     use_cache=True).logits[0]
            else:
                logits[impl] = forward(model, ids, pos, mask, cache)
            seconds[impl].append(time.perf_counter() - t0)
            cache.crop(-size)
    diff = (logits["sdpa"] - logits["goose_sdpa"]).abs().max().item()
    if not torch.equal(logits["goose_sdpa"], logits["goose_sdpa/tile-per-layer"]):
        raise SystemExit("the shared tile changed the logits")
    return {impl: 1e3 * statistics.median(s) for impl, s in seconds.items()}, diff


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--contexts", default="128,512,1024")
    p.add_argument("--sizes", default="1,8,16,32")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model().model
    print(f"torch threads: {torch.get_num_threads()}\n")
    print("| context | tree tokens | sdpa ms | goose_sdpa ms | ratio | max logit diff | tile per layer ms |")
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for context in (int(c) for c in args.contexts.split(",")):
            for size in (int(s) for s in args.sizes.split(",")):
                ms, diff = time_forwards(model, context, size, args.rounds)
                print(f"| {context} | {size} | {ms['sdpa']:.1f} | {ms['goose_sdpa']:.1f} | "
                      f"{ms['sdpa'] / ms['goose_sdpa']:.2f}x | {diff:.1e} | {ms['goose_sdpa/tile-per-layer']:.1f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
