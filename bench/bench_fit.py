"""Benchmark fit-acceptance at scale: time and peak memory to fit N million trace rows.

1. Draw synthetic traces (goose_theory.synthetic, vectorised) in the real v1 schema: ``--files``
   parquet files, ``--rows`` node rows in all, trees of budget up to 60 from several rules
   (so the shape cache sees realistic variety), 3 methods, per-prompt random effects.
2. In a *fresh* child process (so the generator's memory does not count) run the
   ``fit-acceptance`` CLI on them (streaming counts, cluster bootstrap, model checks, bound check,
   recommendation, report with charts) and report wall time and peak RSS (``ru_maxrss``).

Usage:
    .venv/bin/python bench/bench_fit.py                      # 10 million rows, 10 files
    .venv/bin/python bench/bench_fit.py --rows 1000000 --files 2
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from goose_theory.acceptance import Acceptance
from goose_theory.optimize import build_topology
from goose_theory.synthetic import SyntheticSpec, write_synthetic

CHILD = r"""
import json, resource, sys, time, io, contextlib
t0 = time.perf_counter()
from goose_runtime.fit_cli import main
t1 = time.perf_counter()
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = main(sys.argv[1:])
t2 = time.perf_counter()
out = json.loads(buf.getvalue()) if "--json" in sys.argv else {}
print(json.dumps({"rc": rc, "import_s": t1 - t0, "fit_s": t2 - t1,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "cycles": out.get("cycles"), "p_s": out.get("p_s", {}).get("estimate"),
                  "p_t": out.get("p_t", {}).get("estimate")}))
"""


def trees() -> list:
    """A mix of budget-60 trees from several rules and acceptance levels (shape variety)."""
    out = []
    for p_s in (0.2, 0.4, 0.6):
        for rule in ("paper", "optimal", "harmonic"):
            for budget in (20, 40, 60):
                out.append(build_topology(rule, Acceptance.parse(p_s, 0.04), budget=budget).topology)
    return out


def generate(directory: str, rows: int, files: int, seed: int) -> tuple[list[str], float]:
    topologies = trees()
    mean_nodes = float(np.mean([t.n_nodes for t in topologies]))
    cycles_per_file = int(np.ceil(rows / files / mean_nodes * 1.01))  # at least ``rows`` in all
    prompts = 100
    t0 = time.perf_counter()
    paths = []
    for f in range(files):
        specs = [SyntheticSpec([0.4, 0.5, 0.6, 0.65], [0.06, 0.03, 0.02, 0.01], tuple(topologies), prompts=prompts,
                               cycles=max(1, -(-cycles_per_file // (3 * prompts))), prompt_sd=0.5,
                               method=m, run_id=f"run-{f}-{m}") for m in ("goose", "paper", "optimal")]
        path = os.path.join(directory, f"bench-{f:03d}.parquet")
        write_synthetic(path, specs, seed=seed + f)
        paths.append(path)
    return paths, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=None, help="keep the generated traces here (default: a temp dir)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or tmp
        os.makedirs(directory, exist_ok=True)
        paths, gen_s = generate(directory, args.rows, args.files, args.seed)
        import pyarrow.parquet as pq
        n_rows = sum(pq.ParquetFile(p).metadata.num_rows for p in paths)
        size = sum(os.path.getsize(p) for p in paths)
        cmd = [sys.executable, "-c", CHILD, *paths, "--group-by", "method", "--json",
               "--bootstrap", str(args.bootstrap), "--out", os.path.join(directory, "fit-out")]
        child = subprocess.run(cmd, capture_output=True, text=True, check=True)
        result = json.loads(child.stdout.strip().splitlines()[-1])
    result.update({"rows": n_rows, "files": len(paths), "parquet_mib": size / 2**20, "generate_s": gen_s,
                   "rows_per_s": n_rows / result["fit_s"], "bootstrap": args.bootstrap,
                   "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
                              f"python {platform.python_version()}"})
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
