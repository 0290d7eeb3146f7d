"""What a top-k / top-p / min-p cut costs the sampler, on the default model's own logits.

Decodes a few prompts of each set greedily (``ar``, 64 tokens), keeps the logits of every output
position, and times :meth:`PositionNoise.targets` on groups of 1 and 8 rows (a goose cycle reads
1-15) under each cut, beside the uncut sampler and a full-sort cut (the first version: sort each row,
then argmax over the kept tokens). Also prints each cut's nucleus sizes (median, 90th percentile,
largest), which decide how wide the sampler must look.

    .venv/bin/python bench/bench_nucleus.py --threads 1 --out bench/results/nucleus_<date>.json
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time

import torch

from goose_runtime.model import load_model
from goose_runtime.nucleus import truncate
from goose_runtime.prompts import encode_prompt, load_prompts
from goose_runtime.sampling import PositionNoise

CUTS = ((0, 1.0, 0.0), (0, 0.9, 0.0), (0, 0.95, 0.0), (50, 1.0, 0.0), (50, 0.9, 0.0), (0, 1.0, 0.05), (0, 1.0, 0.1),
        (0, 0.95, 0.05))  # (top-k, top-p, min-p)


def real_logits(bundle, sets: list[str], limit: int, new_tokens: int) -> dict[str, torch.Tensor]:
    """Each set's logits at every output position of ``limit`` prompts (rows x vocab, fp32)."""
    out = {}
    for bench in sets:
        rows = []
        for prompt in load_prompts(bench, limit=limit):
            ids = encode_prompt(bundle, prompt)
            with torch.inference_mode():
                full = bundle.model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False)
                rows.append(bundle.model(full).logits[0, len(ids) - 1 : -1].float())
        out[bench] = torch.cat(rows)
    return out


def full_sort_targets(logits: torch.Tensor, noise: torch.Tensor, temperature: float, top_k: int, top_p: float,
                      min_p: float):
    """The first version's cost: sort every row whole, cut it, argmax over logits + T g."""
    ordered = logits.sort(dim=-1, descending=True).values
    if top_k:
        logits = logits.masked_fill(logits < ordered[:, top_k - 1 : top_k], -math.inf)
    if top_p < 1:
        probs = ((ordered.double() - ordered[:, :1].double()) / temperature).softmax(dim=-1)
        kept = ((probs.cumsum(dim=-1) - probs) < top_p).sum(dim=-1, keepdim=True)
        logits = logits.masked_fill(logits < ordered.gather(-1, kept - 1), -math.inf)
    if min_p > 0:
        below = (logits.double() - ordered[:, :1].double()) / temperature < math.log(min_p)
        logits = logits.masked_fill(below, -math.inf)
    return (logits + temperature * noise).argmax(dim=-1)


def time_ms(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return 1e3 * (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="humaneval,mtbench,stdlib")
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--groups", type=int, default=40, help="row groups timed per (set, size, cut)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle = load_model()
    rows = []
    for bench, logits in real_logits(bundle, args.sets.split(","), args.limit, args.new_tokens).items():
        for top_k, top_p, min_p in CUTS:
            sizes = torch.isfinite(truncate(logits, args.temperature, top_k, top_p, min_p)).sum(dim=-1).float()
            for group in (1, 8):
                noise = PositionNoise(logits.shape[-1], args.temperature, 0, top_k=top_k, top_p=top_p, min_p=min_p)
                starts = [(i * 7) % (len(logits) - group) for i in range(args.groups)]
                new = [time_ms(lambda s=s: noise.targets(logits, rows=list(range(s, s + group)),
                                                         positions=list(range(s, s + group))), 5) for s in starts]
                g = torch.stack([noise.noise(p) for p in range(group)])
                cut = (top_k, top_p, min_p)
                old = [time_ms(lambda s=s: full_sort_targets(logits[s : s + group], g, args.temperature, *cut), 5)
                       for s in starts] if (top_k or top_p < 1 or min_p) else None
                row = {"set": bench, "top_k": top_k, "top_p": top_p, "min_p": min_p, "rows": group,
                       "sampler_ms_median": round(statistics.median(new), 3),
                       "full_sort_ms_median": round(statistics.median(old), 3) if old else None,
                       "nucleus_median": sizes.median().item(), "nucleus_p90": round(sizes.quantile(0.9).item(), 1),
                       "nucleus_max": sizes.max().item()}
                rows.append(row)
                print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "machine": platform.processor() or platform.machine(), "threads": args.threads,
                       "temperature": args.temperature, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
