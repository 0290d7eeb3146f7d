"""How much slower a cycle's small operations run right after a forward pass (CPU).

A forward streams the model's weights (540 MB for the default model, plus oneDNN's packed copies)
through the caches and the TLB, so whatever the decoding cycle touches next starts cold. This
times a few of the cycle's small operations on 4 rows of 49152 logits, first hot (back to back),
then each right after a q = 4 forward of the real model, and ``verify.top_candidates`` with
``"logit"`` and ``"prob"`` scores the same two ways. Medians in ms. ``docs/bench-runtime.md``
(section "Overhead right after a forward") quotes it.

Usage:
    .venv/bin/python bench/bench_cold_ops.py [--repeats 30] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from goose_runtime import readout, verify
from goose_runtime.model import load_model


def operations(x: torch.Tensor) -> dict:
    """name -> zero-argument function, each one small step of a cycle's readout."""
    q = x.shape[0]
    xn, block_max = x.numpy(), x.view(q, -1, readout.BLOCK).amax(-1).numpy()
    out = [np.empty((q, 10), t) for t in (np.float32, np.int64, np.int64)] + [np.zeros(q, np.uint8)]
    no_probs = np.empty((0, 10), np.float32)
    return {
        "block maxima (torch amax)": lambda: x.view(q, -1, readout.BLOCK).amax(-1),
        "numba top-k kernel": lambda: readout._topk_serial(xn, block_max, 10, readout.BLOCK, *out, no_probs),
        "four np.empty((4, 10))": lambda: [np.empty((q, 10), np.float32) for _ in range(4)],
        "readout.topk_rows": lambda: readout.topk_rows(x, 10),
        "torch.exp of 4 x 10": lambda: torch.exp(torch.zeros(q, 10)),
        "float(x.sum())": lambda: float(x.sum()),
        "top_candidates logit": lambda: verify.top_candidates(x, 10, "logit"),
        "top_candidates prob": lambda: verify.top_candidates(x, 10, "prob"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    readout.warm_up()
    model = load_model(device="cpu").model
    ids = torch.arange(100, 104)[None]
    x = torch.randn(4, 49152, generator=torch.Generator().manual_seed(0)) * 3
    ops = operations(x)
    print(f"{'operation':28s} {'hot':>8s} {'after fwd':>10s}   (ms, medians of {args.repeats})")
    with torch.inference_mode():
        for name, run in ops.items():
            hot, cold = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                run()
                hot.append(time.perf_counter() - start)
            for _ in range(args.repeats):
                model(ids)
                start = time.perf_counter()
                run()
                cold.append(time.perf_counter() - start)
            print(f"{name:28s} {1e3 * statistics.median(hot):8.3f} {1e3 * statistics.median(cold):10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
