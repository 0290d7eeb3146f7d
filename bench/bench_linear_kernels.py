"""Other ways to run the body's linears at 4-16 rows: do any beat the prepacked oneDNN path?

On the Intel Xeon host MKL's sgemm has a fast path for 1-3 rows (about the cost of reading the
weights once) and is much slower from 4 rows, where ``goose_runtime.linear_plan`` switches to
oneDNN (``docs/bench-cpu-speed.md``). A tree of 4-16 rows costs 1.3-1.7 decode steps there, and
that cost decides which budgets pay. This times, on the default model's own 211 linear weights
(every layer, in forward order, one random input per row count; the sum over all of them, ms):

- ``stock``: ``F.linear`` (MKL);  ``onednn``: the runtime's prepacked ``_linear_pointwise``;
- ``split3``: the rows in chunks of at most 3 through MKL's fast path, written into one output
  (would win if the second chunk found the weights still in cache);
- ``wx``: ``mm(W, x^T)``, the transposed problem (another MKL kernel choice);
- ``xwt``: ``mm(x, W^T)`` with ``W^T`` stored contiguous (``[in, out]``): MKL's kernel for an
  untransposed weight, which streams it output-contiguous; one more copy of every weight;
- ``mklpack:B``: MKL's packed gemm (``_mkl_reorder_linear_weight(w, B)``), one more copy of every
  weight per pack size B; its kernel is fast only when called with exactly B rows, so fewer rows are
  zero-padded to B (as a runtime would have to) and more than B are not timed ("-").

Candidates run interleaved round by round (background load hits them alike); round 0 is a warm-up.

Usage:
    .venv/bin/python bench/bench_linear_kernels.py --rows 1,2,3,4,6,8,9,12,16 --packs 4,8 \
        --out bench/results/linear_kernels_xeon_2026-12-01.json
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from goose_runtime.linear_plan import cpu_fields, cpu_name
from goose_runtime.model import load_model
from goose_theory.topology import write_json_atomic


def cpu_model() -> str:
    """"family/model/stepping" from /proc/cpuinfo: VM hosts share a bare model name."""
    fields = cpu_fields("cpu family", "model", "stepping")
    return "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping"))


def padded_mkl_linear(x: torch.Tensor, packed: torch.Tensor, w: torch.Tensor, pack: int) -> torch.Tensor:
    if x.shape[0] < pack:
        padded = x.new_zeros(pack, x.shape[1])
        padded[:x.shape[0]] = x
        return torch.ops.mkl._mkl_linear(padded, packed, w, None, pack)[:x.shape[0]]
    return torch.ops.mkl._mkl_linear(x, packed, w, None, pack)


def split_linear(x: torch.Tensor, w: torch.Tensor, chunk: int = 3) -> torch.Tensor:
    out = torch.empty(x.shape[0], w.shape[0])
    for r in range(0, x.shape[0], chunk):
        torch.mm(x[r:r + chunk], w.t(), out=out[r:r + chunk])
    return out


def candidates(weights: list[torch.Tensor], packs: list[int]) -> dict:
    """name -> function(inputs) running every linear once."""
    onednn = [torch.ops.mkldnn._reorder_linear_weight(w, 4) for w in weights]
    transposed = [w.t().contiguous() for w in weights]
    cands = {
        "stock": lambda xs: [F.linear(x, w) for w, x in zip(weights, xs)],
        "onednn": lambda xs: [torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")
                              for p, x in zip(onednn, xs)],
        "split3": lambda xs: [split_linear(x, w) for w, x in zip(weights, xs)],
        "wx": lambda xs: [torch.mm(w, x.t()) for w, x in zip(weights, xs)],
        "xwt": lambda xs: [torch.mm(x, wt) for wt, x in zip(transposed, xs)],
    }
    for b in packs:
        packed = [torch.ops.mkl._mkl_reorder_linear_weight(w, b) for w in weights]
        cands[f"mklpack:{b}"] = (lambda pk, bs: lambda xs: None if xs[0].shape[0] > bs else
                                 [padded_mkl_linear(x, p, w, bs) for w, p, x in zip(weights, pk, xs)])(packed, b)
    return cands


def max_diff(cands: dict, weights: list[torch.Tensor], rows: list[int]) -> dict:
    """Largest |output - stock| over every linear, per candidate (at the first two row counts)."""
    gen = torch.Generator().manual_seed(1)
    diff = {}
    for n in rows[:2]:
        xs = [torch.randn(n, w.shape[1], generator=gen) for w in weights]
        ref = cands["stock"](xs)
        for name, run in cands.items():
            got = run(xs)
            if got is None:
                continue
            got = [g.t() for g in got] if name == "wx" else got
            d = max(float((a - b).abs().max()) for a, b in zip(got, ref))
            diff[name] = max(diff.get(name, 0.0), d)
    return diff


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1,2,3,4,6,8,9,12,16")
    p.add_argument("--packs", default="4,8", help="MKL pack sizes to try (comma list; empty: none)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    rows = [int(r) for r in args.rows.split(",")]
    packs = [int(b) for b in args.packs.split(",") if b]
    torch.set_num_threads(args.threads)
    model = load_model(device="cpu").model
    weights = [m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear)]
    gen = torch.Generator().manual_seed(0)
    inputs = {n: [torch.randn(n, w.shape[1], generator=gen) for w in weights] for n in rows}
    cands = candidates(weights, packs)
    times = {(c, n): [] for c in cands for n in rows}
    with torch.inference_mode():
        diff = max_diff(cands, weights, rows)
        for rnd in range(args.rounds + 1):
            for n in rows:
                for name, run in cands.items():
                    start = time.perf_counter()
                    if run(inputs[n]) is not None and rnd:
                        times[name, n].append(time.perf_counter() - start)
    ms = {c: [round(1e3 * statistics.median(times[c, n]), 2) if times[c, n] else None for n in rows] for c in cands}
    print(f"{len(weights)} linears, {args.threads} threads, medians of {args.rounds}; ms per pass")
    print("rows".ljust(12) + "".join(f"{n:>8}" for n in rows) + "   max|diff|")
    for c in cands:
        print(c.ljust(12) + "".join("       -" if t is None else f"{t:>8.1f}" for t in ms[c]) + f"   {diff[c]:.1e}")
    result = {"command": " ".join(["python", "bench/bench_linear_kernels.py", *(argv or sys.argv[1:])]),
              "cpu": cpu_name(), "cpu_model": cpu_model(), "threads": args.threads, "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows, "ms": ms,
              "max_abs_diff_vs_stock": diff, "linears": len(weights)}
    if args.out:
        write_json_atomic(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
