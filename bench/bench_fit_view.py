"""What the explorer's Traces tab and gain heatmap cost to build, piece by piece (median of
``--repeats``, warm): the gain grid per acceptance model, the shipped traces' fit (``fit_shipped``),
each fit chart of ``goose_runtime/charts.py`` on the frames of that fit grouped by benchmark, and
the exact evaluation of every recorded tree of the shipped traces under the scalar fit: one tree at
a time (``yield_with_fallback``, the reference) against packing the shapes once
(``recorded_shapes``) and one batched pass (``RecordedShapes.evaluate``, which also gives the
bound). ``--out FILE`` writes the fit charts' specs (JSON) to compare two versions.

    .venv/bin/python bench/bench_fit_view.py [--repeats 5] [--out specs.json]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the app package

from app import compute, compute_io  # noqa: E402
from app.sections.traces import shipped_traces  # noqa: E402
from goose_runtime import charts as fit_charts  # noqa: E402
from goose_theory.fitpredict import recorded_shapes  # noqa: E402
from goose_theory.yields import yield_with_fallback  # noqa: E402

from _timing import median_ms, write_specs  # noqa: E402  (bench/, the script's folder)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", help="write the fit charts' specs here (JSON)")
    args = ap.parse_args(argv)
    for model in ("exclusive", "independent"):
        print(f"gain grid ({model}, B = 60): {median_ms(lambda: compute.gain_grid(model, budget=60), args.repeats):.1f} ms")
    paths = tuple(str(p) for p in shipped_traces())
    print(f"fit of the {len(paths)} shipped trace files: "
          f"{median_ms(lambda: compute_io.fit_shipped(paths, (), ()), args.repeats):.1f} ms")
    fit = compute_io.fit_shipped(paths, (), ("benchmark",))
    charts = {"p_s by depth": lambda: fit_charts.p_s_by_depth_chart(fit["spine_curve"]),
              "p_t by rank": lambda: fit_charts.p_t_by_rank_chart(fit["rank_curve"]),
              "calibration": lambda: fit_charts.predicted_vs_observed_chart(fit["calibration"]),
              "bound": lambda: fit_charts.bound_check_chart(fit["bound"])}
    specs = {}
    for name, build in charts.items():
        print(f"chart {name}: {median_ms(lambda: build().to_dict(validate=False), args.repeats):.1f} ms")
        specs[name] = build().to_dict(validate=False)
    from goose_theory.fit import fit_traces
    from goose_theory.fitcheck import check_group

    traced = fit_traces(list(paths), n_boot=10, seed=0)
    shapes = recorded_shapes(traced.counts)
    trees = [t for t in map(shapes.topology, range(len(shapes))) if t is not None]
    scalar = check_group(traced.overall, traced.counts).scalar
    print(f"one exact-yield pass over {len(trees)} recorded trees, tree by tree: "
          f"{median_ms(lambda: [yield_with_fallback(t, scalar) for t in trees], args.repeats):.1f} ms")
    print(f"packing the {len(shapes)} recorded shapes: "
          f"{median_ms(lambda: recorded_shapes(traced.counts), args.repeats):.1f} ms")
    print(f"one batched pass over them (E, Var and bound): "
          f"{median_ms(lambda: shapes._memo.clear() or shapes.evaluate(scalar), args.repeats):.1f} ms")
    write_specs(args.out, specs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
