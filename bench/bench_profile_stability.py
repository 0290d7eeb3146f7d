"""Does the loop's cost-aware budget choice survive re-measuring the latency profile?

``goose loop`` measures this device's latency profile once (``goose_runtime.profile``, 5 repeats per
size, round-robin) and picks each prompt set's budget from it with the single-regime fit of the
traces (``fitanalysis.analyze``). This re-measures the profile several times with a given number
of repeats and prints the budgets each profile would choose, so one sees whether the choice follows
the device or the measurement noise. Prints the first six sizes' medians in ms beside them.

Usage:
    .venv/bin/python bench/bench_profile_stability.py --repeats 5,5,5,15,15,15 --traces traces/prior \
        --out bench/results/profile_stability.json
"""
from __future__ import annotations

import argparse
import time

import torch

from goose_theory.fit import fit_traces
from goose_theory.fitanalysis import analyze
from goose_theory.topology import write_json_atomic
from goose_runtime.model import load_model
from goose_runtime.profile import DEVICE_PROFILE_SIZES, profile_latency
from goose_runtime.fit_inputs import trace_files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", default="5,5,5,15,15,15", help="one profile per entry, with that many repeats")
    ap.add_argument("--traces", default="traces/prior")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/results/profile_stability.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    files = trace_files(args.traces)  # goose loop's own reading of --traces (a folder, a glob or files)
    fit = fit_traces(files, group_by=("benchmark",), n_boot=50, seed=0)
    bundle = load_model(device="cpu")
    runs = []
    for repeats in (int(r) for r in args.repeats.split(",")):
        start = time.perf_counter()
        profile = profile_latency(bundle, sizes=DEVICE_PROFILE_SIZES, repeats=repeats)
        wall = time.perf_counter() - start
        budgets = {g.fit.key.get("benchmark"): g.recommendation.best.topology.budget
                   for g in analyze(fit, latency=profile).groups}
        print(repeats, f"{wall:.1f} s", budgets, [round(s * 1e3, 1) for s in profile.seconds[:6]], flush=True)
        runs.append({"repeats": repeats, "sizes": list(profile.sizes), "seconds": list(profile.seconds),
                     "budgets": budgets, "wall_s": wall})
    write_json_atomic(args.out, {"traces": files, "threads": args.threads, "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
