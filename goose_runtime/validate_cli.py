"""``goose validate`` and ``goose loop`` (the README's main job).

``goose loop`` closes the loop on the embedded default model: fit the shipped traces per prompt
set -> profile verification latency on this device (cached; ``--refresh-latency`` re-measures
it) -> export the cost-aware optimal topology per set -> validate each on held-out prompts
against the paper's ``goose`` and ``ar`` -> print the table and write it (markdown + JSON)
beside the fit report.
"""
from __future__ import annotations

import argparse
import os
import time

from goose_theory.cli_util import UsageError, format_table, print_json, split_list, to_jsonable
from goose_theory.topology import write_json_atomic

from .cli_checks import check_model_args, check_refresh, check_run_args, make_config
from .decode_cli import add_model_options, add_refresh_option, load_quietly
from .decode_cli import say as _progress
from .prompts import load_prompts, set_name
from .validate_inputs import check_loop_outputs, check_validate_outputs, held_out, validation_trace


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
    return {"set": set_name(row.benchmark), "method": row.method, "B": str(row.budget),  # a JSONL set: its label
            "predicted": _num(row.predicted_tau, ".3f"), "realised": _num(row.realised_tau, ".3f"),
            "measured [95% CI]": measured, "error": _pct(row.error_pct), "replayed": _num(row.replayed_tau, ".3f"),
            "replay error": _pct(row.replayed_error_pct), "noise": _pct(row.noise_pct, signed=False),
            f"vs {versus} [95% CI]": vs, "psi": _num(row.psi, ".2f"),
            "tok/s": f"{row.tokens_per_s:.1f}", "speedup": f"{row.speedup_vs_ar:.2f}x",
            "= ar": "yes" if row.lossless else "NO"}


def register(sub) -> None:
    p = sub.add_parser("validate", help="run exported topologies in the runtime: predicted vs measured tau")
    p.add_argument("--topology", nargs="+", required=True, help="goose-topology/1 files (e.g. from fit-acceptance --out)")
    p.add_argument("--bench", default="stdlib", help="comma-separated prompt sets (humaneval, mtbench, stdlib, "
                   "stdlib-wide, humaneval-shuffled, mtbench-shuffled, FILE.jsonl)")
    p.add_argument("--limit", type=int, default=3, help="held-out prompts per set (default 3)")
    p.add_argument("--holdout", action="store_true", default=True,
                   help="skip the prompts of the traces the topology was fitted on (default)")
    p.add_argument("--no-holdout", dest="holdout", action="store_false")
    p.add_argument("--max-new-tokens", type=int, default=128,
                   help="tokens per prompt (default 128, as the shipped traces; use the fit traces' own)")
    p.add_argument("--out", help="write the table as JSON here")
    p.add_argument("--trace-dir", help="record the validation run's traces here, validation-<set>.parquet per set")
    p.add_argument("--json", action="store_true")
    _prior_option(p)
    add_model_options(p)
    p.set_defaults(handler=validate_handler)

    p = sub.add_parser("loop", help="main job: fit traces -> optimise (cost-aware) -> validate on held-out prompts")
    p.add_argument("--traces", default="traces", help="a trace file, a folder (its own *.parquet) or a glob ('**' recurses), read as "
                   "fit-acceptance reads its PATHs (default: traces/)")
    p.add_argument("--bench", default="humaneval,mtbench,stdlib",
                   help="built-in sets or JSONL paths; a JSONL set is matched to its traces by its file stem")
    # 5: two held-out prompts missed the prediction by 10-42% from prompt variation alone; five took
    # 3 min on the quiet 2-core CPU and landed within 3% on every set (README, "The main job")
    p.add_argument("--limit", type=int, default=5, help="held-out prompts per set (default 5)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="default 128, as the shipped traces (the adjacency "
                   "table fills as a prompt goes on, so shorter runs see lower transition acceptance)")
    p.add_argument("--latency", help="goose-latency/1 profile; default: measure once on this device and cache it")
    add_refresh_option(p)
    p.add_argument("--out-dir", default="runs/loop", help="report, topologies, validation.json and traces (default runs/loop)")
    p.add_argument("--json", action="store_true")
    _prior_option(p)
    add_model_options(p)
    p.set_defaults(handler=loop_handler)


def _prior_option(p) -> None:
    p.add_argument("--prior", action="store_true",
                   help="goose and the topologies draft with the model's successor prior (goose+prior, "
                        "topology:FILE+prior), and the paper's goose@60 runs without it too; fit such files "
                        "from traces recorded with +prior (traces/prior/)")


def _check(args):
    """(prompt sets, DecodeConfig) of the command line; bad input is a UsageError naming the flag."""
    check_run_args(args)  # --limit, --max-new-tokens, --threads: at least 1
    config = make_config(max_new_tokens=args.max_new_tokens, record=True)  # the rest of DecodeConfig's ranges
    benches = split_list(args.bench, "--bench")  # validate's --out against its inputs: check_validate_outputs
    check_refresh(args)
    labels: dict[str, str] = {}
    for bench in benches:  # each set loads (a missing file is one line now), and two never share a label
        load_prompts(bench, limit=1)
        if set_name(bench) in labels:
            raise UsageError(f"--bench: {labels[set_name(bench)]!r} and {bench!r} are both the set {set_name(bench)!r}")
        labels[set_name(bench)] = bench
    if getattr(args, "latency", None) is not None:  # a bad profile file is one line before the model loads
        from goose_theory.latency import load_latency
        load_latency(args.latency)
    check_model_args(args)  # before the loop's fit
    return benches, config


def _run_validation(args, bundle, plan: list[tuple[str, list[str]]], config, prompts: dict[str, list]) -> list:
    from .validate import validate_benchmark

    rows = []
    if args.prior:  # shipped for the default model; any other builds it once (minutes on a CPU): say so first
        from .prior import shared_prior
        shared_prior(bundle, top_k=config.top_k, log=_progress)
    for bench, files in plan:
        start = time.perf_counter()
        _progress(f"validating on held-out {bench} prompts ({args.limit} prompts, {args.max_new_tokens} new tokens)")
        trace_dir = getattr(args, "trace_dir", None)
        trace = validation_trace(trace_dir, bench) if trace_dir is not None else None
        bench_rows, _ = validate_benchmark(bundle, bench, files, prompts[bench], config=config,
                                           holdout=getattr(args, "holdout", True), trace_out=trace, prior=args.prior)
        rows += bench_rows
        _progress(f"{bench} done in {time.perf_counter() - start:.0f} s")
    return rows


def _encode(bundle, prompts: dict[str, list], config, specs: list = ()) -> None:
    """Each set's held-out prompts encoded and checked against the model's context before the first
    set runs or a file is written, so a bad later set cannot stop the command after earlier outputs
    were replaced. The room left for drafted trees is at least what the run will ask
    (:func:`runner.tree_margin` of ``specs``; 32 where the trees are not known yet: the loop's)."""
    from .runner import encode_all, tree_margin

    for held in prompts.values():
        encode_all(bundle, held, max_new_tokens=config.max_new_tokens, margin=tree_margin(config, list(specs), floor=32))


def _emit(args, rows, extra: dict) -> None:
    report = {"rows": [r.to_dict() for r in rows], **extra}
    if getattr(args, "out", None) is not None:
        write_json_atomic(args.out, to_jsonable(report))
    if args.json:
        print_json(report)
    else:
        versus = "goose+prior@B" if args.prior else "goose@B"  # both parsers define --prior
        print(format_table([display_row(r, versus) for r in rows]))


def validate_handler(args: argparse.Namespace) -> int:
    benches, config = _check(args)
    from .runner import distinct_methods, parse_labeled
    # every file validates, and no two share a label, before the model loads
    specs = [parse_labeled(f"topology:{path}") for path in args.topology]
    distinct_methods(specs)
    # --trace-dir is not made here: the atomic trace writer makes it with the first file, so a run
    # that fails first (the model load, a prompt too long) leaves no empty folder behind
    from goose_theory.topology import load_topology

    from .fit_inputs import check_provenance, fit_metadata, note_model_mismatch, note_token_cap
    from .validate import provenance_traces
    fitted: dict[str, list[str]] = {}
    for path in args.topology:
        traces = provenance_traces(load_topology(path))
        check_provenance(path, traces)
        fitted.setdefault(path, []).extend(traces)
    check_validate_outputs(args, benches, fitted)
    metas = fit_metadata([t for traces in fitted.values() for t in traces])
    note_token_cap(metas, args.max_new_tokens)
    prompts = held_out(benches, fitted, args)  # a set left with none is refused here, before the load
    bundle = load_quietly(args)
    note_model_mismatch(metas, model=bundle.name, dtype=args.dtype)
    _encode(bundle, prompts, config, specs)
    plan = [(b, list(args.topology)) for b in benches]
    rows = _run_validation(args, bundle, plan, config, prompts)
    _emit(args, rows, {"topologies": list(args.topology), "max_new_tokens": args.max_new_tokens})
    return 0


def _regime_topologies(exported: tuple, bench: str, paths: list[str], budget: int, *, bundle=None, config=None,
                       prompt_set: str | None = None, prior: bool = False) -> list[str]:
    """Report the two-regime export written at ``paths`` (its single tree, then its regime file:
    matched/unmatched trees, plus a tree for confident matches where the traces label them) at the
    (cost-aware) ``budget`` (``exported``: :func:`goose_runtime.fit_cli.regime_exports`' tuple);
    with ``bundle``, also write the regime file whose matched tree the trace replay picks
    (``*-regimes-replay.json``), where that is not the regime file's own (``prompt_set``: the set as
    given, a JSONL path, where ``bench`` is its label). Returns the paths the set runs."""
    from goose_theory.regimefill import budget_gap_note, prior_mismatch_note

    single, pair, fit, methods = exported
    _progress(f"{bench}: two-regime fit from {', '.join(methods)}: psi {fit.psi:.2f}, predicted tau "
              f"{single.meta['predicted_tau']:.2f} (one tree), {pair.meta['predicted_tau']:.2f} ({pair.meta['rule']}), "
              f"budget {budget}")
    for note in (budget_gap_note(pair.meta["provenance"].get("regime_budgets") or [], budget),
                 prior_mismatch_note(methods, prior)):
        if note:
            _progress(f"{bench}: note: {note}")
    picked = _replay_pick(bundle, paths[1], prompt_set or bench, config) if bundle is not None else None
    return paths + ([picked] if picked else [])


def _replay_pick(bundle, pair_path: str, bench: str, config) -> str | None:
    """The replay's choice among the regime file's matched-tree variants, written beside it when it
    is not the file itself (:func:`goose_runtime.replay.pick_by_replay`)."""
    from goose_theory.topology import load_topology, save_topology

    from .replayfit import pick_by_replay

    start = time.perf_counter()
    if (out := pick_by_replay(bundle, load_topology(pair_path), bench, config=config, name="replay-pick")) is None:
        return None
    best, rows = out
    _progress(f"{bench}: replay of {len(rows)} matched trees in {time.perf_counter() - start:.0f} s: "
              + ", ".join(f"{'by length ' if r['matched'] == 'by-length' else ''}scale {r['spine_scale']:.1f} "
                          f"{r['replayed_tau']:.3f}" for r in rows))
    if best.meta["replay_choice"] == 0:
        return None
    path = pair_path[: -len(".json")] + "-replay.json"
    save_topology(best, path)
    return path


def loop_handler(args: argparse.Namespace) -> int:
    benches, config = _check(args)
    check_loop_outputs(args, benches)  # the loop's own files now; the report's names depend on the fit (below)
    files, prompts = _loop_inputs(args, benches)
    from goose_theory.fit import fit_traces
    from goose_theory.fitanalysis import analyze
    from .fit_cli import group_regime_exports
    from .fit_inputs import fit_metadata, note_model_mismatch, note_token_cap
    from .fit_report import check_outputs, write_report

    _progress(f"fitting {len(files)} trace files per prompt set")
    metas = fit_metadata(files)
    note_token_cap(metas, args.max_new_tokens)
    fit = fit_traces(files, group_by=("benchmark",), n_boot=300, seed=0)
    _progress("loading the model")
    bundle = load_quietly(args)
    note_model_mismatch(metas, model=bundle.name, dtype=args.dtype)
    from .profile import device_profile
    profile, profile_path = device_profile(bundle, dtype=args.dtype, path=args.latency,
                                           refresh=args.refresh_latency, log=_progress)
    _encode(bundle, prompts, config)
    analysis = analyze(fit, latency=profile)
    by_label = {set_name(b): b for b in benches}
    # every set's regime fit before any file is written: a set it cannot fit leaves no half report
    fits = group_regime_exports(analysis, files, context="two-regime fit ({})", labels=set(by_label), log=_progress)
    check_outputs(analysis, args.out_dir, siblings=("-regimes", "-regimes-replay"))  # validation files: up front
    os.makedirs(args.out_dir, exist_ok=True)
    written = write_report(analysis, args.out_dir, regimes=fits)
    plan = _loop_plan(args, written, fits, by_label, bundle=bundle, config=config)
    args.trace_dir = args.out_dir  # validation-<set>.parquet beside the report
    rows = _run_validation(args, bundle, plan, config, prompts)
    args.out = os.path.join(args.out_dir, "validation.json")
    _emit(args, rows, {"traces": files, "latency": profile_path, "topologies": dict(plan),
                       "max_new_tokens": args.max_new_tokens, "holdout_limit": args.limit})
    if not args.json:
        print(f"\nfit report, topologies, validation.json and validation-<set>.parquet in {args.out_dir}/")
    return 0


def _loop_inputs(args: argparse.Namespace, benches: list[str]) -> tuple[list[str], dict[str, list]]:
    """The trace files and the held-out prompts of each set, checked before the fit, the model
    load and any file written: a set the traces do not hold, or one with no prompt left over."""
    from .fit_inputs import trace_files, trace_sets  # here: pyarrow is not for every command's start-up

    files = trace_files(args.traces)
    held = trace_sets(files)
    missing = [b for b in benches if set_name(b) not in held]  # a JSONL set is labelled by its stem
    if missing:
        raise UsageError(f"the traces hold no prompt set {', '.join(map(repr, missing))} "
                         f"(they hold {', '.join(held)})")
    # held out: prompts the fit traces (which the exports will cite) do not hold
    return files, held_out(benches, {f"--traces {args.traces}": [os.path.abspath(f) for f in files]}, args)


def _loop_plan(args: argparse.Namespace, written, fits: dict, by_label: dict, *, bundle, config) -> list:
    """(prompt set, topology files) to validate per exported group: the single tree, the regime
    file and the replay's pick; notes the out folder's files this run did not write."""
    from .fit_report import stale_note, stale_outputs

    plan = []
    for e in written.exports:
        label, exported = e["group"], fits[e["group"]]
        paths = _regime_topologies(exported, label, [e["single"]["file"], e["regime_file"]["file"]],
                                   exported[0].budget, bundle=bundle, config=config, prompt_set=by_label[label],
                                   prior=args.prior)
        plan.append((by_label[label], paths))
    replays = {os.path.basename(p) for _, paths in plan for p in paths}  # the replay's picks are this run's too
    if stale := [n for n in stale_outputs(args.out_dir, written) if n not in replays]:
        _progress(stale_note(args.out_dir, stale))
    if not plan:  # every set passed the check above, so this is a fault, not bad input
        raise RuntimeError(f"no topology was exported for the prompt sets {', '.join(by_label.values())}")
    return plan
