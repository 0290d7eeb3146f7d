"""``fit-acceptance`` on the shipped traces, end to end: wall seconds of a fresh process (imports
included), with ``--group-by benchmark --json`` and with ``--out DIR --json``, and the seconds that
importing its heavy libraries alone takes.

``--root DIR`` runs another checkout's ``fit-acceptance`` (a worktree of an older commit) the same
way, to compare two versions side by side; each run's JSON is written to ``--keep DIR`` if given.

    .venv/bin/python bench/bench_fit_cli.py [--root DIR] [--repeats 3] [--keep DIR]
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUN = "import sys; from goose_runtime.fit_cli import main; sys.exit(main(sys.argv[1:]))"
IMPORTS = {"numpy, pandas, scipy.special, scipy.optimize": "import numpy, pandas, scipy.special, scipy.optimize",
           "... and scipy.stats": "import numpy, pandas, scipy.special, scipy.optimize, scipy.stats",
           "... and altair": "import numpy, pandas, scipy.special, scipy.optimize, altair"}


def wall(cmd: list[str], root: str, stdout) -> float:
    env = dict(os.environ, PYTHONPATH=root)  # the checkout's packages before the installed ones
    start = time.perf_counter()
    subprocess.run(cmd, cwd=root, env=env, check=True, stdout=stdout, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", help="write each mode's JSON output here")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    traces = sorted(glob.glob(os.path.join(root, "traces", "*.parquet")))
    print(f"checkout: {root}; {len(traces)} trace files; load average {os.getloadavg()[0]:.2f}")
    for label, code in IMPORTS.items():
        times = [wall([sys.executable, "-c", code], root, subprocess.DEVNULL) for _ in range(args.repeats)]
        print(f"import {label}: median {statistics.median(times):.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        modes = {"--group-by benchmark --json": ["--group-by", "benchmark", "--json"],
                 "--out DIR --json": ["--out", os.path.join(tmp, "out"), "--json"]}
        for label, extra in modes.items():
            times = []
            for _ in range(args.repeats):
                out = os.path.join(args.keep or tmp, f"fit{extra[0].replace('-', '_')}.json")
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "w", encoding="utf-8") as fh:
                    times.append(wall([sys.executable, "-c", RUN, *traces, *extra], root, fh))
            print(f"fit-acceptance {label}: {', '.join(f'{t:.2f}' for t in times)} s "
                  f"(median {statistics.median(times):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
