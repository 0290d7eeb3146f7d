"""Side by side: what a q-token verification forward of the real model costs on this CPU, per candidate.

Candidates (interleaved round by round, so background load hits them alike; medians reported):
- ``mkl`` (stock ``F.linear`` -> MKL sgemm), ``onednn`` (:func:`goose_runtime.cpu_speed.tune_for_cpu`
  at every row count) and ``plan(k=...)`` (what ``load_model`` runs: MKL up to the host's measured
  crossover k, oneDNN above, :mod:`goose_runtime.linear_plan`), each at 1 and 2 torch threads;
  ``tview`` (weights stored transposed, so MKL gets an NN gemm);
  ``to_mkldnn`` (``torch.utils.mkldnn.to_mkldnn`` on a second copy of the model);
- the lm_head (49152 x 576, tied) alone, same candidates;
- MKL environment knobs (``--env``): the stock path in a subprocess per setting;
- ``torch.compile`` (``--compile``): inductor in a subprocess with a time cap.
Also the accuracy: max |logits - stock| per q, and MKL's own spread (a row alone vs in a batch).

Usage:
    .venv/bin/python bench/bench_cpu_speed.py --sizes 1,2,4,8,16,32,64 --rounds 3 --env --compile \
        --out /tmp/cpu_speed.json
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.utils.mkldnn

from goose_runtime.cpu_speed import set_stock_rows, tune_for_cpu, untune
from goose_runtime.model import load_model
from goose_runtime.profile import verify_latency

ENV_KNOBS = [{}, {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, {"MKL_ENABLE_INSTRUCTIONS": "AVX512"},
             {"MKL_DEBUG_CPU_TYPE": "5"}, {"MKL_CBWR": "AVX2"}, {"MKL_CBWR": "COMPATIBLE"}]


def _tview(model) -> None:
    """Store each Linear weight transposed in memory (same values): F.linear then hands MKL an NN gemm."""
    for m in model.modules():
        if type(m) is torch.nn.Linear and m.weight.is_contiguous():
            m.weight.data = m.weight.data.t().contiguous().t()


def _lm_head_ms(head, hidden: int, q: int, reps: int) -> float:
    h = torch.randn(1, q, hidden)
    with torch.inference_mode():
        head(h)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            head(h)
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def load_stock():
    """The default model with plain ``nn.Linear`` (MKL): load_model tunes it (oneDNN, with the
    host's linear plan), and every candidate here starts from the stock path; ``tune_for_cpu`` on
    the untuned model then gives oneDNN at every row count."""
    bundle = load_model()
    untune(bundle.model)
    return bundle


def timing(sizes, rounds: int, repeats: int, threads_list=(1, 2)) -> dict:
    """Median ms per candidate/threads/q for the full verification forward and the lm_head alone."""
    bundle, second, third = load_stock(), load_stock(), load_stock()
    second.model = torch.utils.mkldnn.to_mkldnn(second.model)
    _tview(third.model)
    plan = (bundle.linears or {}).get("stock_rows", 0)  # the crossover load_model measured (or cached)
    setups = {"mkl": (bundle, None), "onednn": (bundle, 0), f"plan(k={plan})": (bundle, plan),
              "tview": (third, None), "to_mkldnn": (second, None)}
    fwd: dict = {}
    head: dict = {}
    for _ in range(rounds):
        for threads in threads_list:
            torch.set_num_threads(threads)
            for name, (b, stock_rows) in setups.items():
                tuned = stock_rows is not None
                if tuned:  # oneDNN above stock_rows rows, MKL up to it (0: oneDNN everywhere)
                    tune_for_cpu(b.model)
                    set_stock_rows(b.model, stock_rows)
                key = f"{name}/t{threads}"
                secs = verify_latency(b, sizes=sizes, repeats=repeats)
                fwd.setdefault(key, []).append([1e3 * s for s in secs])
                hidden = b.model.config.hidden_size
                head.setdefault(key, []).append([_lm_head_ms(b.model.lm_head, hidden, q, 5) for q in sizes])
                print(key, [round(x, 1) for x in fwd[key][-1]], f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)
                if tuned:
                    untune(b.model)
    med = lambda runs: [round(statistics.median(col), 2) for col in zip(*runs)]  # noqa: E731
    return {"forward_ms": {k: med(v) for k, v in fwd.items()}, "lm_head_ms": {k: med(v) for k, v in head.items()}}


@torch.inference_mode()
def accuracy(sizes) -> dict:
    """max |logits| differences: onednn vs mkl on the same q-token forward, and mkl's own batch spread."""
    from goose_runtime.profile import _prefix_ids

    bundle = load_stock()
    model = bundle.model
    gen = torch.Generator().manual_seed(0)
    prefix = torch.tensor([_prefix_ids(bundle, 64)])
    out = {"onednn_vs_mkl": [], "mkl_row_alone_vs_batch": [], "onednn_row_alone_vs_batch": [], "argmax_agree": []}
    for q in sizes:
        ids = torch.cat([prefix, torch.randint(0, model.config.vocab_size, (1, q), generator=gen)], dim=1)
        ref = model(input_ids=ids).logits[0, -q:]
        ref_last = model(input_ids=ids[:, :-q + 1] if q > 1 else ids).logits[0, -1]
        tune_for_cpu(model)
        new = model(input_ids=ids).logits[0, -q:]
        new_last = model(input_ids=ids[:, :-q + 1] if q > 1 else ids).logits[0, -1]
        untune(model)
        out["onednn_vs_mkl"].append(float((new - ref).abs().max()))
        out["mkl_row_alone_vs_batch"].append(float((ref[0] - ref_last).abs().max()))
        out["onednn_row_alone_vs_batch"].append(float((new[0] - new_last).abs().max()))
        out["argmax_agree"].append(float((new.argmax(-1) == ref.argmax(-1)).float().mean()))
    return out


def env_knobs(sizes, repeats: int) -> list[dict]:
    """The stock MKL path under each environment setting (MKL reads them at load: one process each)."""
    code = ("import json,sys,torch;from goose_runtime.model import load_model;"
            "from goose_runtime.profile import verify_latency;from goose_runtime.cpu_speed import untune;"
            "torch.set_num_threads(1);b=load_model();untune(b.model);"
            f"s=verify_latency(b,sizes={tuple(sizes)},repeats={repeats});"
            "print(json.dumps([round(1e3*x,2) for x in s]))")
    rows = []
    for knob in ENV_KNOBS:
        env = {**os.environ, **knob}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        line = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr.strip()[-200:]
        rows.append({"env": knob, "forward_ms_t1": json.loads(line) if proc.returncode == 0 else line})
    return rows


def compile_child() -> None:
    """torch.compile (inductor, default dynamic handling) of the stock model: prints, per call, the
    wall seconds of the first forward at that q (compile included) and the median of the next ones."""
    torch.set_num_threads(1)
    bundle = load_stock()
    bundle.model.forward = torch.compile(bundle.model.forward)
    start = time.perf_counter()
    verify_latency(bundle, sizes=(8,), repeats=1)
    print(f"first call (prefill 256 + q=8, compiling): {time.perf_counter() - start:.1f} s", flush=True)
    for q in (8, 16, 32, 12, 8):
        start = time.perf_counter()
        (sec,) = verify_latency(bundle, sizes=(q,), repeats=3)
        print(f"q={q}: call {time.perf_counter() - start:.1f} s, forward median {1e3 * sec:.1f} ms", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1,2,4,8,16,32,64")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", default="1,2", help="torch thread counts to time (comma list)")
    p.add_argument("--env", action="store_true", help="also time the MKL environment knobs")
    p.add_argument("--compile", action="store_true", help="also try torch.compile (inductor) in a subprocess")
    p.add_argument("--compile-cap", type=int, default=420, help="seconds before the compile try is abandoned")
    p.add_argument("--compile-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    if args.compile_child:
        compile_child()
        return 0
    report = {"sizes": sizes, "load_before": os.getloadavg(), "torch": torch.__version__}
    report.update(timing(sizes, args.rounds, args.repeats, tuple(int(t) for t in args.threads.split(","))))
    report["accuracy"] = accuracy(sizes)
    if args.env:
        report["env_knobs"] = env_knobs(sizes, args.repeats)
    if args.compile:
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--compile-child"],
                                  capture_output=True, text=True, timeout=args.compile_cap)
            report["compile"] = proc.stdout.strip().splitlines()[-12:] + proc.stderr.strip().splitlines()[-3:]
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout or ""
            partial = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
            report["compile"] = [f"gave up after {args.compile_cap} s", *partial.strip().splitlines()[-12:]]
    report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
