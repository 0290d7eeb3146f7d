"""Is the cost-aware budget the fastest? The main job's export at several budgets, side by side.

``goose loop`` fits the shipped traces, picks a budget per prompt set from this device's latency
profile (the cost-aware choice: the budget whose regime file predicts the most tau per predicted
cycle time, ``goose_theory.regimebudget``; the single-regime fit's choice, the rule before 1 Dec
noon, is exported and measured beside it),
exports the optimised topologies at that budget and validates them on held-out prompts. This
benchmark exports the same optimised topologies (``goose_theory.regimeexport.regime_topologies``, the
loop's own export) at every budget in ``--budgets`` *and* at the cost-aware one, and decodes them
all in one run on the same held-out prompts (``goose_runtime.validate.validate_benchmark``: prompts
outer, methods inner, with ``ar`` and the paper's ``goose`` at each budget), so their tokens/s are
comparable (``--prior``: goose and the exports draft with the successor prior, fitted on
``traces/prior/``, as ``make run`` does; the paper's goose@60 runs without it too). Printed per
set: budget, measured tau, tokens/s and speedup of each export; which
budget the cost-aware rule chose, and its speed against the fastest measured.

Usage:
    .venv/bin/python bench/bench_budget_choice.py --budgets 4,8,16,32 --limit 5 --threads 2
    (add ``--refresh-latency`` to re-measure the cached device profile first, as ``goose loop`` does;
    ``--prior`` for the main job's configuration, ``make run``)
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

from goose_theory.cli_util import UsageError, to_jsonable
from goose_theory.fit import fit_traces
from goose_theory.fitanalysis import analyze
from goose_theory.regimeexport import regime_topologies
from goose_theory.regimefile import save_regime_topologies
from goose_theory.regimebudget import choose_regime_budget
from goose_theory.topology import load_topology, write_json_atomic
from goose_runtime.cli_checks import check_run_args, make_config
from goose_runtime.fit_files import write_report
from goose_runtime.model import load_model
from goose_runtime.profile import device_profile
from goose_runtime.prompts import BENCHMARKS
from goose_runtime.validate import validate_benchmark
from goose_runtime.validate_inputs import holdout_prompts, provenance_traces
from goose_runtime.fit_inputs import trace_files


def export_at(files: list[str], bench: str, budget: int, provenance: dict, out_dir: str) -> str:
    """The loop's optimised topology file for ``bench`` at ``budget`` (the file with its regimes)."""
    single, pair, _, _ = regime_topologies(files, benchmark=bench, budget=budget, provenance=provenance)
    return save_regime_topologies(single, pair, os.path.join(out_dir, f"topology-{bench}-b{budget}.json"))


def _check(args) -> tuple:
    """(DecodeConfig, trace files, budgets) of the command line; a UsageError names a bad flag."""
    check_run_args(args)  # --limit, --max-new-tokens, --threads
    try:
        budgets = {int(b) for b in args.budgets.split(",")}
    except ValueError:
        raise UsageError(f"--budgets must be comma-separated integers, got {args.budgets!r}") from None
    if min(budgets) < 1:
        raise UsageError(f"--budgets must be at least 1, got {min(budgets)}")
    for name in args.sets.split(","):  # an unknown set would leave an empty report over the last one
        if name not in BENCHMARKS:
            raise UsageError(f"--sets: unknown prompt set {name!r} (use {', '.join(BENCHMARKS)})")
    traces = args.traces or ("traces/prior" if args.prior else "traces")  # a fit of the kind that is validated
    return make_config(max_new_tokens=args.max_new_tokens, record=True), trace_files(traces), budgets


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", help="fit traces (default: traces/, or traces/prior/ with --prior)")
    ap.add_argument("--sets", default="humaneval,mtbench,stdlib")
    ap.add_argument("--budgets", default="4,8,16,32")
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/results/bench_budget_choice.json")
    ap.add_argument("--prior", action="store_true", help="as `make run`: goose and the exports draft with the "
                    "successor prior (fit traces recorded with it: --traces traces/prior)")
    ap.add_argument("--refresh-latency", action="store_true",
                    help="re-measure this device's cached latency profile (speeds drift) and overwrite it")
    args = ap.parse_args(argv)
    try:  # bad input: one line, exit 2, before the model loads
        config, files, extra = _check(args)
    except UsageError as err:  # the project's one line (argparse's own error adds a usage line)
        print(f"error: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    bundle = load_model(device="cpu")
    profile, profile_path = device_profile(bundle, dtype="float32", refresh=args.refresh_latency,
                                           log=lambda m: print(f"[bench] {m}", file=sys.stderr))
    fit = fit_traces(files, group_by=("benchmark",), n_boot=100, seed=0)
    out_dir = tempfile.mkdtemp(prefix="goose-budgets-")
    analysis = analyze(fit, latency=profile)
    written = write_report(analysis, out_dir)  # the single-regime cost-aware budget per set
    tables = {g.label: g.recommendation.cost_table for g in analysis.groups if g.recommendation}
    report, t0 = {"latency": profile_path, "threads": args.threads, "prior": args.prior, "traces": files,
                  "sets": {}}, time.time()
    for bench, path in sorted(written.topologies.items()):  # one group per set: its label is the set's name
        if bench not in args.sets.split(","):
            continue
        fitted = load_topology(path)
        single_choice, provenance = fitted.budget, fitted.meta.get("provenance") or {}
        # the loop's rule: the regime file's own predicted tau per cycle second (goose_theory.regimebudget)
        (chosen_tree, *_), choice_table = choose_regime_budget(files, benchmark=bench, cost_table=tables[bench],
                                                               chosen=single_choice)
        chosen = chosen_tree.budget
        budgets = sorted(extra | {chosen, single_choice})
        paths = [export_at(files, bench, b, provenance, out_dir) for b in budgets]
        prompts = holdout_prompts(bench, provenance_traces(fitted), limit=args.limit)  # every export cites these traces
        rows, _ = validate_benchmark(bundle, bench, paths, prompts, config=config, prior=args.prior)
        report["sets"][bench] = {"chosen": chosen, "single_regime_choice": single_choice,
                                 "choice_table": choice_table, "rows": [r.to_dict() for r in rows]}
        print_set(bench, chosen, rows, single_choice)
    report["wall_s"] = round(time.time() - t0)
    save_report(args.out, report)
    return 0


def save_report(path: str, report: dict) -> None:
    """Write ``report`` as strict JSON (NaN/inf -> null: a run with no finite interval, say, has
    NaN bounds), atomically (temp file, then rename; directories made): a benchmark cut short or
    killed never leaves a half file over the last good one."""
    write_json_atomic(path, to_jsonable(report))


def print_set(bench: str, chosen: int, rows, single_choice: int) -> None:
    print(f"\n{bench}: cost-aware budget {chosen} (the single-regime fit's rule: {single_choice})")
    print(f"{'method':>28s} {'budget':>6s} {'tau':>6s} {'tok/s':>7s} {'speedup':>7s}")
    for r in sorted(rows, key=lambda r: (not r.method.startswith("topology"), r.budget, r.method)):
        print(f"{r.method[-28:]:>28s} {r.budget:6d} {r.measured_tau:6.3f} {r.tokens_per_s:7.2f} {r.speedup_vs_ar:7.3f}")
    exports = [r for r in rows if r.method.startswith("topology")]
    best = max(exports, key=lambda r: r.tokens_per_s)
    mine = next(r for r in exports if r.budget == chosen)
    single = next(r for r in exports if r.budget == single_choice)
    print(f"cost-aware export: {mine.tokens_per_s:.2f} tok/s; fastest export: budget {best.budget}, "
          f"{best.tokens_per_s:.2f} tok/s (cost-aware at {mine.tokens_per_s / best.tokens_per_s:.3f}x the fastest; "
          f"the single-regime rule's budget at {single.tokens_per_s / best.tokens_per_s:.3f}x)")


if __name__ == "__main__":
    raise SystemExit(main())
