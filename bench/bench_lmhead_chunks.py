"""Would a chunked lm_head, taking each chunk's 64-column block maxima while it is still in cache,
beat one lm_head matmul followed by the readout's cold pass over the fresh logits?

The readout of an 81-node tree reads 16 MB of logits that the lm_head has just written
(`goose_runtime/readout.py`). Computing the logits in vocabulary chunks and reducing each chunk at
once would skip that cold pass, if the chunked matmul cost no more. This times both on a random
49152 x 576 weight (the default model's shape) through the same prepacked oneDNN linear the
runtime uses, flushing the caches before every repeat; medians in ms.

    .venv/bin/python bench/bench_lmhead_chunks.py [--rows 17,81] [--chunks 4,8,16,32] [--repeats 15]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

VOCAB, HIDDEN, BLOCK = 49152, 576, 64


def _linear(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def time_once(x: torch.Tensor, full: torch.Tensor, chunks: dict[int, list[torch.Tensor]],
              flush: torch.Tensor) -> dict[str, float]:
    """One repeat: ms of the full matmul, of its block maxima (cold), and of each chunked variant."""
    q, out = x.shape[0], {}
    flush.mul_(1.0)
    start = time.perf_counter()
    logits = _linear(x, full)
    mid = time.perf_counter()
    logits.view(q, VOCAB // BLOCK, BLOCK).amax(-1)
    out["matmul"], out["cold block max"] = 1e3 * (mid - start), 1e3 * (time.perf_counter() - mid)
    for n, packed in chunks.items():
        flush.mul_(1.0)
        start = time.perf_counter()
        for p in packed:
            _linear(x, p).view(q, -1, BLOCK).amax(-1)
        out[f"{n} chunks, maxima in cache"] = 1e3 * (time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="17,81")
    ap.add_argument("--chunks", default="4,8,16,32")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        rows = [int(r) for r in args.rows.split(",")]
        counts = [int(c) for c in args.chunks.split(",")]
    except ValueError:
        rows = counts = []
    if not rows or not counts or min(rows + counts) < 1 or args.repeats < 1 or args.threads < 1:
        print("bench_lmhead_chunks: --rows, --chunks: comma-separated integers >= 1; --repeats, --threads >= 1",
              file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    weight = torch.randn(VOCAB, HIDDEN) * 0.02
    full = torch.ops.mkldnn._reorder_linear_weight(weight)
    chunks = {n: [torch.ops.mkldnn._reorder_linear_weight(w.contiguous()) for w in weight.chunk(n)] for n in counts}
    flush = torch.randn(20_000_000)  # 80 MB, written before every repeat: the weight and logits leave the cache
    times: dict[tuple[int, str], list[float]] = {}
    with torch.inference_mode():
        for _ in range(args.repeats):
            for q in rows:
                for name, ms in time_once(torch.randn(q, HIDDEN), full, chunks, flush).items():
                    times.setdefault((q, name), []).append(ms)
    for (q, name), ms in times.items():
        print(f"{q:3d} rows  {name:28s} {statistics.median(ms):7.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
