"""The budget-choice rule's picks for a saved latency profile, without decoding: the regime rule of
``goose loop`` and the single-regime rule, fitted on ``traces/prior`` as ``bench_budget_choice.py
--prior`` does, with the profile priced by its isotonic fit (``goose_theory.latency``) or, with
``--as-measured``, by the measured seconds as before 3 Dec (to see what a dip in a profile did).

    .venv/bin/python bench/budget_choice_pricing.py bench/results/latency_cpu2t_epyc25_2026-12-03_c.json [--as-measured]
"""
from __future__ import annotations

import argparse
import sys
import tempfile

from goose_runtime.fit_inputs import trace_files
from goose_runtime.fit_files import write_report
from goose_theory.fit import fit_traces
from goose_theory.fitanalysis import analyze
from goose_theory.latency import load_latency
from goose_theory.regimebudget import choose_regime_budget
from goose_theory.topology import load_topology


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--traces", default="traces/prior")
    ap.add_argument("--as-measured", action="store_true", help="price the measured seconds (no isotonic fit)")
    args = ap.parse_args(argv)
    files, profile = trace_files(args.traces), load_latency(args.profile)
    if args.as_measured:
        object.__setattr__(profile, "_priced", profile.seconds)  # the pre-3-Dec pricing, for comparison only
    fit = fit_traces(files, group_by=("benchmark",), n_boot=100, seed=0)
    analysis = analyze(fit, latency=profile)
    written = write_report(analysis, tempfile.mkdtemp(prefix="goose-pricing-"))
    tables = {g.label: g.recommendation.cost_table for g in analysis.groups if g.recommendation}
    for bench, path in sorted(written.topologies.items()):
        if bench in tables:  # one group per set; "all" has no set's regimes
            single = load_topology(path).budget
            (tree, *_), _ = choose_regime_budget(files, benchmark=bench, cost_table=tables[bench], chosen=single)
            print(f"{bench}: rule {tree.budget}, single-regime rule {single}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
