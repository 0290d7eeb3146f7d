"""Side by side: reading the top-k out of a tree's logits with ``torch.topk`` against the blocked
top-k (``goose_runtime.verify._blocked``) at several block sizes, and against the decoder's fp32
CPU path (``goose_runtime.readout.topk_rows``: torch's block maxima, then one numba kernel).

The decoder needs, for every tree node, the target's argmax (the walk) and its top-K successors
(harvesting the adjacency table): a top-k over q rows of the 49152-column vocabulary every cycle.
The logits are the real model's, from one tree forward of ``q`` nodes after a real prefix. Each
variant runs round-robin with the others; before every call a 64 MB buffer is written so that the
logits come from memory as they do in the decoder, right after the lm_head wrote them
(``--hot`` skips that). Results are checked equal to ``torch.topk``.

Usage:
    .venv/bin/python bench/bench_readout.py --sizes 1,9,17,61,81 --rounds 30 --threads 2
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from goose_runtime import readout
from goose_runtime.kvcache import cache_for
from goose_runtime.model import load_model
from goose_runtime.profile import _prefix_ids, depths, ternary_parents
from goose_runtime.verify import MaskBuilder, _blocked, forward

BLOCKS = (1024, 256, 64)


def tree_logits(bundle, size: int, prefix_len: int = 256) -> torch.Tensor:
    """Logits (size, vocab) of a real tree forward (complete ternary tree) after a real prefix."""
    masks, cache = MaskBuilder(torch.float32, bundle.device), cache_for(bundle.model)
    prefix = torch.tensor(_prefix_ids(bundle, prefix_len))
    forward(bundle.model, prefix[:-size], torch.arange(prefix_len - size), masks.causal_mask(prefix_len - size), cache)
    parent = ternary_parents(size)
    pos = torch.tensor(depths(parent)) + prefix_len - size
    return forward(bundle.model, prefix[-size:], pos, masks.tree_mask(parent, prefix_len - size), cache).contiguous()


def variants(k: int) -> dict:
    out = {"torch.topk": lambda x: torch.topk(x, k, dim=-1)}
    for b in BLOCKS:
        out[f"blocked/{b}"] = lambda x, b=b: _blocked(x, k, b)[:2]
    out["numba/64"] = lambda x: readout.topk_rows(x, k)[:2] if readout.fits(x, k) else _blocked(x, k, 64)[:2]
    return out


def time_size(logits: torch.Tensor, k: int, rounds: int, hot: bool) -> dict[str, float]:
    """Median ms per variant (round-robin), after checking each equals torch.topk."""
    fns, scratch = variants(k), torch.empty(16 << 20)
    want = torch.topk(logits, k, dim=-1)
    for name, fn in fns.items():
        vals, idx = (torch.as_tensor(a) for a in fn(logits))
        if not (torch.equal(vals, want.values) and torch.equal(idx, want.indices)):
            raise SystemExit(f"{name} differs from torch.topk")
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if not hot:
                scratch.fill_(1.0)  # evict the logits from the caches
            t0 = time.perf_counter()
            fn(logits)
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,9,17,61,81")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hot", action="store_true", help="do not evict the logits from the caches")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle = load_model(device="cpu")
    print(f"top-{args.k} of real logits, ms (median of {args.rounds}, {'hot' if args.hot else 'cold'} caches, "
          f"{args.threads} threads)")
    names = list(variants(args.k))
    print("q     " + "  ".join(f"{n:>12s}" for n in names))
    with torch.inference_mode():
        for size in (int(s) for s in args.sizes.split(",")):
            ms = time_size(tree_logits(bundle, size), args.k, args.rounds, args.hot)
            print(f"{size:<5d} " + "  ".join(f"{ms[n]:12.3f}" for n in names), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
