"""Build time of each explorer chart (``app/charts.py``) as the page builds it: the altair chart and
its ``to_dict(validate=False)``, on the frames of one what-if (p_s 0.52, p_t 0.05, B = 60).

Prints the median ms of ``--repeats`` builds per chart; ``--out FILE`` also writes every chart's
spec as JSON, so two versions of the builders can be compared spec for spec (run each, then diff).

    .venv/bin/python bench/bench_app_charts.py [--repeats 5] [--out specs.json]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the app package

from app import charts, compute, views  # noqa: E402

from _timing import write_specs  # noqa: E402  (bench/, the script's folder)

SHAPE = dict(budget=60, max_depth=6, max_spine=20, top_k=10)  # the page's default sliders


def builders() -> dict:
    """Chart name -> a function that builds it from fixed frames."""
    r = compute.whatif(0.52, 0.05, "exclusive", "optimal", seed=0, topology_json=None, **SHAPE)
    nodes, edges = compute.tree_layout(r["topology"], r["reach"])
    pmf, _ = views.drawn_pmf(r["pmf"])
    curves = compute.spine_curves(0.52, 0.05, "exclusive", **SHAPE)
    widths = compute.width_profiles(0.52, 0.05, "exclusive", **SHAPE)
    grid = pd.DataFrame({"p_s": [0.2, 0.2, 0.6, 0.6], "p_t": [0.01, 0.05, 0.01, 0.05], "gain": [0.1, 0.2, 0.15, 0.3]})
    speedup = pd.DataFrame({"budget": [1, 2, 4] * 2, "rule": ["optimal"] * 3 + ["paper"] * 3,
                            "speedup_vs_ar": [1, 1.2, 1.3, 1, 1.1, 1.2]})
    return {"tree": lambda: charts.tree_chart(nodes, edges), "pmf": lambda: charts.pmf_chart(pmf),
            "spine curve": lambda: charts.spine_curve_chart(curves), "widths": lambda: charts.widths_chart(widths),
            "heatmap": lambda: charts.gain_heatmap_chart(grid), "speedup": lambda: charts.speedup_chart(speedup)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", help="write every chart's spec here (JSON)")
    args = ap.parse_args(argv)
    specs = {}
    for name, build in builders().items():
        build().to_dict(validate=False)  # warm: imports and altair's first-use caches
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            specs[name] = build().to_dict(validate=False)
            times.append(1e3 * (time.perf_counter() - start))
        print(f"{name:12s} {statistics.median(times):7.1f} ms")
    write_specs(args.out, specs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
