"""The explorer's What-if work piece by piece, and a long run of slider moves with the garbage
collector watched: what a move costs and where its slowest moments come from.

* the gain grid of each acceptance model (``compute.gain_grid``, B = 60; the tree memo, where the
  checkout has one, cleared before each call);
* one p_s move's views (``views.whatif_view`` + ``views.curves_view``, a new p_s each time);
* the tree and pmf chart specs of one What-if tree;
* 120 slider moves in ``AppTest`` (p_s and p_t in turn, every value new): median, 95th percentile
  and maximum, and the full garbage collections that ran during them (count and milliseconds).

Medians of warm repeats. ``--root DIR`` measures another checkout (a worktree of an older commit)
with this script, to compare two versions side by side.

    .venv/bin/python bench/bench_app_moves.py [--root DIR]
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

from _timing import median_ms  # bench/ is the script's folder, first on sys.path


def pieces(shape: dict) -> None:
    from app import charts, compute, views

    def grid(model: str) -> None:
        if hasattr(compute, "_build") and hasattr(compute._build, "cache_clear"):
            compute._build.cache_clear()
        compute.gain_grid(model, budget=60)

    for model in ("exclusive", "independent"):
        print(f"gain grid ({model}): {median_ms(lambda m=model: grid(m), 5):.1f} ms")
    values = iter(round(0.3 + 0.001 * i, 3) for i in range(100))

    def move() -> None:
        p_s = next(values)
        views.whatif_view(p_s, 0.05, "exclusive", "optimal", seed=0, topology_json=None, **shape)
        views.curves_view(p_s, 0.05, "exclusive", **shape)

    print(f"one p_s move's views (whatif + curves): {median_ms(move, 15):.1f} ms")
    r = compute.whatif(0.6, 0.05, "exclusive", "optimal", seed=0, topology_json=None, **shape)
    nodes, edges = compute.tree_layout(r["topology"], r["reach"])
    pmf, _ = views.drawn_pmf(r["pmf"])
    print(f"tree chart spec: {median_ms(lambda: charts.tree_chart(nodes, edges).to_dict(validate=False), 15):.1f} ms, "
          f"pmf chart spec: {median_ms(lambda: charts.pmf_chart(pmf).to_dict(validate=False), 15):.1f} ms")


def moves(root: str, count: int = 120) -> None:
    from streamlit.testing.v1 import AppTest

    full, started = [], [0.0]

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        elif info["generation"] == 2:
            full.append(1e3 * (time.perf_counter() - started[0]))

    at = AppTest.from_file(os.path.join(root, "app", "explorer.py"), default_timeout=120)
    at.run()
    gc.callbacks.append(watch)
    times = []
    for i in range(count):
        start = time.perf_counter()
        if i % 2 == 0:
            at.slider(key="p_s").set_value(round(0.2 + 0.005 * i, 3)).run()
        else:
            at.slider(key="p_t").set_value(round(0.02 + 0.0005 * i, 4)).run()
        assert not at.exception, at.exception
        times.append(1e3 * (time.perf_counter() - start))
    gc.callbacks.remove(watch)
    print(f"{count} slider moves: median {statistics.median(times):.1f} ms, 95th percentile "
          f"{sorted(times)[int(0.95 * count)]:.1f} ms, max {max(times):.1f} ms; full collections during "
          f"them: {len(full)} {[round(ms) for ms in full]} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the checkout to measure (default: this one)")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    sys.path.insert(0, root)
    print(f"checkout: {root}; load average {os.getloadavg()[0]:.2f}")
    pieces(dict(budget=60, max_depth=6, max_spine=20, top_k=10))
    moves(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
