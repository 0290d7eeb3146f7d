"""``fit-acceptance PATH...``: fit p_s and p_t from goose traces, check the model and the
paper's bound, and recommend (and with ``--out``, export) an optimised topology.

PATHs may be files, directories (the ``*.parquet`` files directly in them, as ``goose loop
--traces DIR`` reads them: ``traces/`` keeps the +prior and large-set traces in subfolders, which a
plain fit must not mix in) or globs (expanded here: the shell may not; ``**`` recurses). Every file is validated first; a bad one is one line naming the file and the problem,
exit code 2, nothing written -- or, with ``--skip-bad``, a "skipped" line and the rest goes on.
Each file's footer is read once, by that check; the counting pass streams the data with it
(``--regimes`` reads the counted files once more, into memory, for the regime fit, and again per
set for the exports' bootstrap intervals).

Example:
    fit-acceptance traces/ --group-by method --out fit-out --json
"""
from __future__ import annotations

import os
import sys
import time

from goose_theory.cli_util import (EXIT_BAD_INPUT, UsageError, check_output_dir, load_latency_option, make_parser,
                                   print_json, run_command, split_list)
from goose_theory.cli import MAX_BUDGET
from goose_theory.fit import ROOTS_ONLY, fit_counts
from goose_theory.fitanalysis import analyze
from goose_theory.fitcounts import GROUP_COLUMNS, check_group_by, count_files
from goose_theory.traceio import TraceFileError, TraceInfo, check_trace

from .cli_checks import REGIME_DRAWS, add_regime_draws_option, check_regime_draws
from .fit_inputs import copy_problem, expand_paths, note_latency_mismatch, note_sampling, trace_copies
from .fit_files import ReportFiles, check_outputs, export_line, stale_note, stale_outputs, write_report
from .fit_report import summary_text


MAX_BOOTSTRAP = 100_000  # 1000 draws are plenty; 100000 took 2.7 s and 0.34 GB on the shipped HumanEval trace


def build_parser():
    p = make_parser("fit-acceptance", "Fit p_s and p_t from goose traces; check the model and the paper's bound; "
                                      "recommend an optimised topology.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="trace files, directories (their own *.parquet, not subfolders') or globs ('**' recurses)")
    p.add_argument("--group-by", help=f"comma-separated subset of {','.join(GROUP_COLUMNS)} (default: one group "
                   "of all the traces)")
    p.add_argument("--budget", type=int, default=None,
                   help="budget of the recommended tree (default: the largest budget in the traces); with --latency "
                        "the most it may choose")
    p.add_argument("--latency", default=None, help="latency profile JSON: choose the budget cost-aware (at most --budget)")
    p.add_argument("--out", default=None, help="write topology-<group>.json, report.md and charts (*.html) here")
    p.add_argument("--regimes", action="store_true",
                   help="with --out: export the two-regime topologies instead (matched / unmatched cycles, "
                        "docs/two-regime.md): topology-<group>.json the best single tree for the runtime as it "
                        "is, topology-<group>-regimes.json the regime file (one tree per kind of cycle: no match, "
                        "a confident match, a match of each length) that topology:FILE switches between; needs "
                        "--group-by benchmark or none, and reads the rows into memory")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip unusable files, and globs or folders with none (with a note), instead of stopping")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--bootstrap", type=int, default=1000,
                   help=f"cluster-bootstrap draws (default 1000, at most {MAX_BOOTSTRAP})")
    add_regime_draws_option(p, what="with --regimes: ")
    return p


def _check_options(args) -> tuple[str, ...]:
    # '' is refused as '--compare ""' is (it fitted one pooled group); leave the flag out for that
    group_by = check_group_by(split_list(args.group_by, "--group-by") if args.group_by is not None else [])
    check_output_dir(args.out, "--out")
    if args.budget is not None and args.budget < 0:  # worded as goose optimize / compare word it
        raise UsageError(f"--budget must be >= 0, got {args.budget}")
    if args.budget is not None and args.budget > MAX_BUDGET:
        raise UsageError(f"--budget must be at most {MAX_BUDGET}, got {args.budget}")
    if not 1 <= args.bootstrap <= MAX_BOOTSTRAP:  # memory grows with the draws: 1e6 took 0.7 GB on 5 prompts
        raise UsageError(f"--bootstrap: {args.bootstrap} is not in 1..{MAX_BOOTSTRAP}")
    check_regime_draws(args.regime_draws)
    if args.seed < 0:
        raise UsageError(f"--seed: {args.seed} must be a non-negative integer")
    if args.regimes and (not args.out or group_by not in ((), ("benchmark",))):
        raise UsageError("--regimes needs --out and --group-by benchmark (or no --group-by)")
    return group_by


def _usable_files(files: list[str], skip_bad: bool) -> list[TraceInfo] | None:
    """Check every file; print one line per bad one. None means: stop with exit code 2."""
    good, bad = [], []
    for f in files:
        try:
            good.append(check_trace(f))
        except TraceFileError as exc:
            bad.append(str(exc))
    for copy, original in trace_copies(good):
        good.remove(copy)
        bad.append(copy_problem(copy, original))
    hint = f"; pass --skip-bad to fit the other {len(good)}" if len(bad) == 1 and good and not skip_bad else ""
    for line in bad:  # one bad file: one line, the hint on it; several: a line each, then the count
        print(f"{'skipped' if skip_bad else 'error'}: {line}{hint}", file=sys.stderr)
    if bad and not skip_bad:
        if len(bad) > 1:
            print(f"error: {len(bad)} of {len(files)} file(s) unusable; pass --skip-bad to fit the rest", file=sys.stderr)
        return None
    if not good:
        print("error: no usable trace files", file=sys.stderr)
        return None
    return good


def _handler(args) -> int:
    group_by = _check_options(args)
    latency = None if args.latency is None else load_latency_option(args.latency)
    if latency is not None and args.budget is not None and args.budget < latency.sizes[0] - 1:
        raise UsageError(f"--budget {args.budget} is below every tree --latency {args.latency} measures "
                         f"({latency.sizes[0]}..{latency.sizes[-1]} tokens); with --latency, --budget is the most it may choose")
    unmatched: list[str] | None = [] if args.skip_bad else None  # globs and folders with no trace in them
    expanded = expand_paths(args.paths, skipped=unmatched)
    for line in unmatched or ():
        print(f"skipped: {line}", file=sys.stderr)
    files = _usable_files(expanded, args.skip_bad)
    if files is None:
        return EXIT_BAD_INPUT
    def skipped(err: TraceFileError) -> None:
        print(f"skipped: {err}", file=sys.stderr)
    counts = count_files(files, group_by=group_by, on_bad=skipped if args.skip_bad else None)
    if not counts.files:
        print("error: no usable trace files", file=sys.stderr)
        return EXIT_BAD_INPUT
    counted = [i.metadata() for i in files if i.path in counts.files]  # footers check_trace read (--skip-bad may drop some)
    note_sampling(counted)
    if latency is not None:
        note_latency_mismatch(counted, latency, args.latency)
    fit = fit_counts(counts, n_boot=args.bootstrap, seed=args.seed)
    if fit.overall.roots_only:  # else NaN tables and no tree to recommend
        print(f"error: {ROOTS_ONLY}", file=sys.stderr)
        return EXIT_BAD_INPUT
    analysis = analyze(fit, budget=args.budget, latency=latency)
    if args.out:  # a blocked output file is refused now, not after the regime fit
        check_outputs(analysis, args.out, siblings=("-regimes",) if args.regimes else ())
    # the files that were counted (--skip-bad may have dropped some mid-stream); may fail: before anything is written
    pairs = group_regime_exports(analysis, list(counts.files), context="--regimes: {}", draws=args.regime_draws,
                                 seed=args.seed, log=lambda line: print(line, file=sys.stderr, flush=True)) \
        if args.regimes else {}
    written = write_report(analysis, args.out, regimes=pairs) if args.out else ReportFiles({}, [])
    if args.out and (stale := stale_outputs(args.out, written)):
        print(stale_note(args.out, stale), file=sys.stderr)
    # a group whose file holds its regime export, not the recommended tree, is named only there
    files, exports = written.recommended, written.exports
    if args.json:
        print_json({**analysis.to_json(files), **({"regime_exports": exports} if args.regimes else {})})
    else:
        print(summary_text(analysis, files))
        if exports:  # two predictions for one group: say which one a measurement should be held against
            print("--regimes: the exports below fit the cycles with and without a context match apart, so their "
                  "predicted tau, not the recommendation's (one regime, a(d) folded into p_s), is the one to hold "
                  "against measured tau")
        for e in exports:
            print(f"exported (--regimes) for {export_line(e)}")
        if args.out:
            print(f"\nreport: {os.path.join(args.out, 'report.md')}")
    return 0


def regime_exports(files: list[str], *, bench: str | None, budget: int, context: str,
                   provenance: dict | None = None) -> tuple:
    """``goose_theory.regimeexport.regime_topologies`` for the CLIs: (single, pair, fit, methods) of
    ``bench``'s rows (None: all) at ``budget``. A trace set it cannot fit (no usable rows or
    methods, traces without spine_avail or recorded with --min-score) is a one-line UsageError,
    ``context`` (naming the set) first.

    Example: ``regime_exports(["traces/stdlib.parquet"], bench="stdlib", budget=16, context="--regimes: stdlib")``.
    """
    from goose_theory.regimeexport import regime_topologies

    try:
        return regime_topologies(files, benchmark=bench, budget=budget, provenance=provenance or {})
    except ValueError as exc:
        raise UsageError(f"{context}: {str(exc).splitlines()[0]}") from None


def group_regime_exports(analysis, files: list[str], *, context: str, labels: set[str] | None = None,
                         log=None, draws: int = 0, seed: int = 0) -> dict[str, tuple]:
    """:func:`regime_exports` of each group that has a recommendation (of ``labels`` only, if given):
    group label -> (single, pair, fit, methods). Without a latency profile at the recommended
    budget; with one (a cost table) at the budget where the regime file's own predicted tau per
    cycle second peaks (:mod:`goose_theory.regimebudget`; ``log`` gets one line per group).
    ``context`` names the group in an error (``{}`` is its label). ``draws`` > 0: each export's
    single tree and regime file get a ``predicted_ci95`` from that many bootstrap draws of the
    prompts (:mod:`goose_theory.regimeinterval`, ``seed``). ``fit-acceptance --regimes`` and
    ``goose loop`` both export through it."""
    out = {}
    for g in analysis.groups:
        if g.recommendation is None or (labels is not None and g.label not in labels):
            continue
        budget, bench = g.recommendation.best.topology.budget, g.fit.key.get("benchmark")
        table = g.recommendation.cost_table
        if not table or max(r["budget"] for r in table) < 1:  # nothing to choose (--budget 0 --latency)
            exported = regime_exports(files, bench=bench, budget=budget, context=context.format(g.label))
        else:
            exported = _cost_aware_regime_export(files, bench, table, budget,
                                                 context=context.format(g.label), log=log, label=g.label)
        try:  # a draw the fit refuses (fit_regimes' ValueError) is named as the export's own errors are
            out[g.label] = _with_intervals(exported, files, bench, draws=draws, seed=seed, log=log, label=g.label)
        except ValueError as exc:
            raise UsageError(f"{context.format(g.label)}: bootstrap interval: {str(exc).splitlines()[0]}") from None
    return out


def _with_intervals(exported: tuple, files: list[str], bench: str | None, *, draws: int, seed: int, log,
                    label: str) -> tuple:
    """``exported`` (single, pair, fit, methods) with the two files' bootstrap intervals."""
    if draws < 1:
        return exported
    single, pair, fit, methods = exported
    start = time.perf_counter()
    single, pair = interval_exports([single, pair], files, bench, methods, draws=draws, seed=seed)
    if log and "predicted_ci95" in pair.meta:
        few = f"; few for a 95% interval, its ends rest on a draw or two: use {REGIME_DRAWS}" * (draws < REGIME_DRAWS)
        log(f"{label}: predicted-tau intervals from {draws} bootstrap draws of the fitted prompts, each a whole "
            f"two-regime refit ({time.perf_counter() - start:.0f} s{few})")
    return single, pair, fit, methods


def interval_exports(topologies: list, files: list[str], bench: str | None, methods: tuple[str, ...], *, draws: int,
                     seed: int) -> list:
    """``topologies`` (one set's regime exports) with their ``predicted_ci95`` from ``draws`` bootstrap
    draws of the fit ``files``' prompts of ``bench`` (:func:`goose_theory.regimeinterval.with_intervals`)."""
    from goose_theory.regimeinput import read_frames
    from goose_theory.regimeinterval import with_intervals

    return with_intervals(topologies, read_frames(files, benchmark=bench), methods, draws=draws, seed=seed)


def _cost_aware_regime_export(files, bench, cost_table, budget: int, *, context: str, log, label: str) -> tuple:
    from goose_theory.regimebudget import choose_regime_budget

    try:
        exported, table = choose_regime_budget(files, benchmark=bench, cost_table=cost_table, chosen=budget)
    except ValueError as exc:
        raise UsageError(f"{context}: {str(exc).splitlines()[0]}") from None
    if log:
        best = max(table, key=lambda r: r["tokens_per_s"])
        log(f"{label}: regime file's predicted tokens/s by budget: "
            + ", ".join(f"{r['budget']}: {r['tokens_per_s']:.1f}" for r in table)
            + f"; exported at {best['budget']} (the single-regime fit chose {budget})")
    return exported


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``fit-acceptance``."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    return run_command(_handler, args)


if __name__ == "__main__":
    sys.exit(main())
