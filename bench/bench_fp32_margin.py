"""How far is fp32 greedy verification from a flipped token? Logit differences against top-2 margins.

A tree forward scores a position with other tokens in the batch and with KV entries that earlier
tree forwards wrote, so its logits differ from ``ar``'s one-token forwards in the last bits. Greedy
speculative decoding reproduces ``ar`` exactly as long as no position's top-2 margin is smaller
than that difference. This decodes real prompts with ``ar`` and with each given method, keeps the
logits row that chose every emitted token (the accepted path's rows, the bonus row included), and
reports per method: the largest |logit difference| from ``ar`` at the same output position, the
smallest top-2 margin of ``ar`` over those positions, and how many positions have a margin below
ten times the largest difference (where a flip would no longer be far-fetched).

    .venv/bin/python bench/bench_fp32_margin.py [--methods goose,goose@8,tr] [--sets humaneval,mtbench,stdlib]
        [--limit 5] [--max-new-tokens 128] [--out FILE.json]
"""
from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

import goose_runtime.decoder as decoder
from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.model import load_model
from goose_runtime.profile import device_profile
from goose_runtime.prompts import encode_prompt, load_prompts
from goose_runtime.runner import parse_labeled
from goose_theory.topology import write_json_atomic


class RowRecorder:
    """Wraps the decoder's readout and walk: keeps the logits rows of every accepted path."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self._logits: torch.Tensor | None = None
        self._top, self._walk = decoder.top_candidates, decoder.greedy_walk

    def __enter__(self) -> "RowRecorder":
        def top(logits, *args, **kwargs):
            self._logits = logits
            return self._top(logits, *args, **kwargs)

        def walk(tree, argmax):
            path = self._walk(tree, argmax)
            self.rows.extend(self._logits[path].float().numpy().copy())
            return path
        decoder.top_candidates, decoder.greedy_walk = top, walk
        return self

    def __exit__(self, *exc) -> None:
        decoder.top_candidates, decoder.greedy_walk = self._top, self._walk


def emitted_rows(bundle, method: str, ids: list[int], max_new_tokens: int, latency=None,
                 benchmark: str = "margin") -> tuple[list[int], np.ndarray]:
    """The tokens one method emits and the logits row that chose each (every token comes from a cycle)."""
    with RowRecorder() as rec:
        result = Decoder(bundle, parse_labeled(method), DecodeConfig(max_new_tokens=max_new_tokens, latency=latency)).decode(
            ids, prompt_id="margin", benchmark=benchmark)  # the set's name: +store refuses stdlib-wide
    tokens = list(result.token_ids)
    return tokens, np.stack(rec.rows[: len(tokens)]) if tokens else np.zeros((0, 1), np.float32)


def compare(ar_rows: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """Per position: the largest |difference| from ar's row (``diffs``) and ar's top-2 margin
    (``margins``), with their extremes."""
    n = min(len(ar_rows), len(rows))
    diff = np.abs(ar_rows[:n] - rows[:n]).max(axis=1)
    top2 = np.sort(ar_rows[:n], axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    return {"positions": int(n), "max_diff": float(diff.max(initial=0.0)), "median_diff": float(np.median(diff)),
            "min_margin": float(margin.min(initial=np.inf)), "diffs": diff, "margins": margin}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="goose,goose@8,tr,auto")
    ap.add_argument("--sets", default="humaneval,mtbench,stdlib")
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle = load_model(device="cpu")
    latency, _ = device_profile(bundle, dtype="float32")  # auto's (cached per thread count)
    per_method: dict[str, list[dict]] = {m: [] for m in args.methods.split(",")}
    for bench in args.sets.split(","):
        for prompt in load_prompts(bench, limit=args.limit):
            ids = encode_prompt(bundle, prompt)
            ar_tokens, ar_rows = emitted_rows(bundle, "ar", ids, args.max_new_tokens)
            for method in per_method:
                tokens, rows = emitted_rows(bundle, method, ids, args.max_new_tokens, latency, prompt.benchmark)
                if tokens != ar_tokens:
                    print(f"{bench} {prompt.id} {method}: tokens differ from ar")
                per_method[method].append({**compare(ar_rows, rows), "differs": tokens != ar_tokens,
                                           "max_abs_logit": float(np.abs(ar_rows).max())})
    summary = {}
    for method, parts in per_method.items():
        diffs = np.concatenate([p["diffs"] for p in parts])
        margins = np.concatenate([p["margins"] for p in parts])
        close = int(np.sum(margins < 10 * diffs.max()))
        summary[method] = {"positions": int(diffs.size), "max_diff": float(diffs.max()),
                           "median_diff": float(np.median(diffs)), "min_margin": float(margins.min()),
                           "margins_below_10x_max_diff": close,
                           "margins_below_1e-3": int(np.sum(margins < 1e-3)),
                           "prompts": len(parts), "prompts_not_equal_to_ar": sum(p["differs"] for p in parts),
                           "max_abs_logit": max(p["max_abs_logit"] for p in parts)}
        s = summary[method]
        print(f"{method:10s} {s['positions']:5d} positions: |logit diff| max {s['max_diff']:.2e} "
              f"(median {s['median_diff']:.2e}); ar's top-2 margin min {s['min_margin']:.2e}, "
              f"{close} below 10x the max diff, {s['margins_below_1e-3']} below 1e-3")
    if args.out:
        write_json_atomic(args.out, {"args": vars(args), "methods": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
