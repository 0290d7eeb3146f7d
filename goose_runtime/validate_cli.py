"""``goose validate``: exported topologies back into the runtime on held-out prompts, predicted
against measured tau, beside the paper's ``goose`` and ``ar``.

The checks, the validation run and the printed table are shared with ``goose loop``
(:mod:`goose_runtime.loop_cli`, the README's main job), which validates the files it exports.
"""
from __future__ import annotations

import argparse
import time

from goose_theory.cli_util import UsageError, format_table, load_latency_option, print_json, split_list, to_jsonable
from goose_theory.topology import load_topology, write_json_atomic

from .cli_checks import (add_sampling_options, check_model_args, check_refresh, check_run_args, few_tokens_note,
                         make_config, noisy_speedup_note, sampling_settings)
from .decode_cli import add_model_options, load_quietly, progress_bar
from .decode_cli import say as _progress
from .prompts import BENCHMARKS, load_prompts, set_name
from .validate_inputs import (check_validate_outputs, fitted_set, held_out, provenance_traces, topology_notes,
                              validation_trace)


def _num(value: float, spec: str) -> str:
    """``value`` formatted by ``spec`` for the table; blank for NaN (a column that does not apply)."""
    return "" if value != value else format(value, spec)


def _pct(value: float, signed: bool = True) -> str:
    """A percentage for the table: signed ("+1.3%"), or a band ("+-64%"); blank for NaN."""
    return "" if value != value else (f"{value:+.1f}%" if signed else f"+-{value:.0f}%")


def display_row(row, versus: str = "goose@B") -> dict[str, str]:
    """One printed line of the validation table: the numbers a reader compares, intervals inline
    (every field, unrounded, is in the JSON report); ``versus`` names what topologies are compared
    with (goose+prior@B under ``--prior``)."""
    vs = _pct(row.vs_goose_pct) + ("" if row.vs_goose_low != row.vs_goose_low else  # one prompt: no interval
                                   f" [{_pct(row.vs_goose_low)}, {_pct(row.vs_goose_high)}]")
    measured = f"{row.measured_tau:.3f}" + ("" if row.ci_low != row.ci_low else f" [{row.ci_low:.2f}, {row.ci_high:.2f}]")
    ranged = row.predicted_low == row.predicted_low and row.predicted_tau == row.predicted_tau  # NaN: none
    predicted = _num(row.predicted_tau, ".3f") + (f" [{row.predicted_low:.2f}, {row.predicted_high:.2f}]" if ranged else "")
    return {"set": set_name(row.benchmark), "method": row.method, "B": str(row.budget),  # a JSONL set: its label
            "predicted [95% CI]": predicted, "realised": _num(row.realised_tau, ".3f"),
            "measured [95% CI]": measured, "error": _pct(row.error_pct), "replayed": _num(row.replayed_tau, ".3f"),
            "replay error": _pct(row.replayed_error_pct), "noise": _pct(row.noise_pct, signed=False),
            f"vs {versus} [95% CI]": vs, "psi": _num(row.psi, ".2f"),
            "tok/s": f"{row.tokens_per_s:.1f}", "speedup": f"{row.speedup_vs_ar:.2f}x",
            "= ar": "yes" if row.lossless else "NO"}


def register(sub) -> None:
    p = sub.add_parser("validate", help="run exported topologies in the runtime: predicted vs measured tau")
    p.add_argument("--topology", nargs="+", required=True, help="goose-topology/1 files (e.g. from fit-acceptance --out)")
    p.add_argument("--bench", default=None, help="comma-separated prompt sets (humaneval, mtbench, stdlib, "
                   "stdlib-wide, humaneval-shuffled, mtbench-shuffled, FILE.jsonl); default: the sets the "
                   "topologies were fitted on (fit-acceptance --group-by benchmark, goose loop), else stdlib; a JSONL "
                   "set must be named")
    p.add_argument("--limit", type=int, default=3, help="held-out prompts per set (default 3)")
    holdout = p.add_mutually_exclusive_group()
    holdout.add_argument("--holdout", action="store_true", default=True,
                         help="skip the prompts of the traces the topology was fitted on (default)")
    holdout.add_argument("--no-holdout", dest="holdout", action="store_false",
                         help="run the first --limit prompts of each set even if the fit traces hold them (not held out)")
    p.add_argument("--max-new-tokens", type=int, default=128,
                   help="tokens per prompt (default 128, as the shipped traces; use the fit traces' own)")
    p.add_argument("--out", help="write the table as JSON here")
    p.add_argument("--trace-dir", help="record the validation run's traces here, validation-<set>.parquet per set")
    p.add_argument("--json", action="store_true", help="print the table as one JSON object")
    add_prior_option(p)
    add_sampling_options(p)  # with the fit traces sampled at the same temperature (goose decode --trace-out)
    add_model_options(p)
    p.set_defaults(handler=validate_handler)


def add_prior_option(p) -> None:
    p.add_argument("--prior", action="store_true",
                   help="goose and the topologies draft with the model's successor prior (goose+prior, "
                        "topology:FILE+prior), and the paper's goose@60 runs without it too; fit such files "
                        "from traces recorded with +prior (traces/prior/)")


def check_args(args):
    """(prompt sets, DecodeConfig) of the command line; bad input is a UsageError naming the flag."""
    check_run_args(args)  # --limit, --max-new-tokens, --threads: at least 1
    config = make_config(max_new_tokens=args.max_new_tokens, record=True,  # the rest of DecodeConfig's ranges
                         **sampling_settings(args))  # greedy unless --temperature (validate, loop)
    check_model_args(args)  # before the loop's fit, and before validate reads its files for the default --bench
    if args.bench is None:  # validate's default; a file fitted on HumanEval was scored on stdlib, unremarked
        args.bench = _fitted_sets(args.topology)
    benches = split_list(args.bench, "--bench")  # validate's --out against its inputs: check_validate_outputs
    check_refresh(args)
    labels: dict[str, str] = {}
    for bench in benches:  # each set loads (a missing file is one line now), and two never share a label
        load_prompts(bench, limit=1)
        if set_name(bench) in labels:
            raise UsageError(f"--bench: {labels[set_name(bench)]!r} and {bench!r} are both the set {set_name(bench)!r}")
        labels[set_name(bench)] = bench
    if getattr(args, "latency", None) is not None:  # a bad profile file is one line before the model loads
        load_latency_option(args.latency)
    return benches, config


def _fitted_sets(topologies: list[str]) -> str:
    """The default ``--bench``: the built-in sets the topologies were fitted on, stdlib where none
    names one; a JSONL set (named by its label only) is refused, as it ran on stdlib unasked."""
    fitted = {path: fitted_set(load_topology(path)) for path in topologies}
    for path, name in fitted.items():
        if name is not None and name not in BENCHMARKS:
            raise UsageError(f"--topology {path} was fitted on the prompt set {name!r}, which is not built in: "
                             f"name its JSONL file with --bench (e.g. --bench {name}.jsonl)")
    return ",".join(dict.fromkeys(s for s in fitted.values() if s is not None)) or "stdlib"


def run_validation(args, bundle, plan: list[tuple[str, list[str]]], config, prompts: dict[str, list]) -> list:
    from .validate import validate_benchmark

    rows = []
    if args.prior:  # shipped for the default model; any other builds it once (minutes on a CPU): say so first
        from .prior import shared_prior
        shared_prior(bundle, top_k=config.top_k, log=_progress)
    for bench, files in plan:
        start = time.perf_counter()
        n = len(prompts[bench])  # fewer than --limit where the set holds fewer held-out prompts
        kind = "held-out" if getattr(args, "holdout", True) else "the first (not held out: --no-holdout)"
        _progress(f"validating on {kind} {bench} prompts ({n} prompt{'s' if n != 1 else ''}"
                  + (f", all the set holds out of --limit {args.limit}" if n < args.limit else "")
                  + f", {args.max_new_tokens} new tokens)")
        trace_dir = getattr(args, "trace_dir", None)
        trace = validation_trace(trace_dir, bench) if trace_dir is not None else None
        with progress_bar(None) as bar:  # a terminal sees each decode go by (one method on one prompt)
            bench_rows, _ = validate_benchmark(bundle, bench, files, prompts[bench], config=config,
                                               holdout=getattr(args, "holdout", True), trace_out=trace,
                                               prior=args.prior, on_result=lambda r: bar.update(1))
        rows += bench_rows
        _progress(f"{bench} done in {time.perf_counter() - start:.0f} s")
    return rows


def encode_held_out(bundle, prompts: dict[str, list], config, specs: list = ()) -> None:
    """Each set's held-out prompts encoded and checked against the model's context before the first
    set runs or a file is written, so a bad later set cannot stop the command after earlier outputs
    were replaced. The room left for drafted trees is at least what the run will ask
    (:func:`runner.tree_margin` of ``specs``; 32 where the trees are not known yet: the loop's)."""
    from .runner import encode_all, tree_margin

    for held in prompts.values():
        encode_all(bundle, held, max_new_tokens=config.max_new_tokens, margin=tree_margin(config, list(specs), floor=32))


def emit_report(args, rows, extra: dict) -> None:
    report = {"rows": [r.to_dict() for r in rows], **extra}
    if getattr(args, "out", None) is not None:
        write_json_atomic(args.out, to_jsonable(report))
    if args.json:
        print_json(report)
    else:
        versus = "goose+prior@B" if args.prior else "goose@B"  # both parsers define --prior
        print(format_table([display_row(r, versus) for r in rows]))
        for note in speed_notes(rows):
            print(f"note: {note}")


def speed_notes(rows) -> list[str]:
    """Where a set's figures cannot be read: one prompt (no spread, so the interval columns are
    blank), too few tokens (``ar``'s row counts them: one a cycle), or a speedup above the row's
    tau, which only a change of load during the run produces (every verification forward costs at
    least a decode step)."""
    notes = []
    for bench in dict.fromkeys(r.benchmark for r in rows):
        ar = next((r for r in rows if r.benchmark == bench and r.method == "ar"), None)
        if ar is not None and ar.prompts < 2:
            notes.append(f"{bench}: 1 prompt: the intervals, the noise band and the comparison's interval need the "
                         "spread over two or more prompts, so they are blank")
        if ar is not None and (note := few_tokens_note(ar.cycles)):
            notes.append(f"{bench}: {note}")
        if note := noisy_speedup_note([(r.method, r.measured_tau, r.speedup_vs_ar) for r in rows if r.benchmark == bench]):
            notes.append(f"{bench}: {note}")
    return notes


def validate_handler(args: argparse.Namespace) -> int:
    default_bench = args.bench is None  # check_args fills it in; said once every check has passed (one line on errors)
    benches, config = check_args(args)
    from .runner import distinct_methods, parse_labeled
    # every file validates, and no two share a label, before the model loads
    specs = [parse_labeled(f"topology:{path}") for path in args.topology]
    distinct_methods(specs)
    # --trace-dir is not made here: the atomic trace writer makes it with the first file, so a run
    # that fails first (the model load, a prompt too long) leaves no empty folder behind
    from .fit_inputs import check_provenance, fit_metadata, note_model_mismatch, note_sampling, note_token_cap
    fitted: dict[str, list[str]] = {}
    topologies = {path: load_topology(path) for path in args.topology}
    for path, topology in topologies.items():
        traces = provenance_traces(topology)
        check_provenance(path, traces)
        fitted.setdefault(path, []).extend(traces)
    check_validate_outputs(args, benches, fitted)
    metas = fit_metadata([t for traces in fitted.values() for t in traces])
    note_token_cap(metas, args.max_new_tokens)
    note_sampling(metas, this_run=sampling_settings(args))
    prompts = held_out(benches, fitted, args)  # a set left with none is refused here, before the load
    if default_bench:
        _progress(f"--bench {args.bench} (the sets the topologies were fitted on; stdlib where none names one)")
    for note in topology_notes(topologies, benches, prior=args.prior):
        _progress(f"note: {note}")
    bundle = load_quietly(args)
    note_model_mismatch(metas, model=bundle.name, dtype=args.dtype)
    encode_held_out(bundle, prompts, config, specs)
    plan = [(b, list(args.topology)) for b in benches]
    rows = run_validation(args, bundle, plan, config, prompts)
    emit_report(args, rows, {"topologies": list(args.topology), "max_new_tokens": args.max_new_tokens,
                             "held_out": args.holdout, **sampling_settings(args)})
    if not args.holdout:  # after the table too: the rows look like a held-out check otherwise
        _progress("note: --no-holdout: the prompts may be ones the fit used, so predicted against measured tau "
                  "is no held-out check")
    return 0
