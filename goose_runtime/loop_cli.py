"""``goose loop``: the README's main job on the embedded default model.

Fit the shipped traces per prompt set -> profile verification latency on this device (cached;
``--refresh-latency`` re-measures it) -> fit the two-regime model and export the cost-aware
topologies per set (the single tree, the regime file and, where the trace replay prefers another
matched tree, its pick) -> validate each on held-out prompts against the paper's ``goose`` and
``ar`` (:mod:`goose_runtime.validate_cli`'s run and table) -> print the table and write it (JSON)
beside the fit report.
"""
from __future__ import annotations

import argparse
import os
import time

from goose_theory.cli_util import UsageError

from .cli_checks import (add_refresh_option, add_regime_draws_option, add_sampling_options, check_regime_draws,
                         sampling_settings)
from .decode_cli import add_model_options, load_quietly
from .decode_cli import say as _progress
from .prompts import set_name
from .validate_cli import add_prior_option, check_args, emit_report, encode_held_out, run_validation
from .validate_inputs import check_loop_outputs, held_out



LOOP_SEED = 0  # the exports' bootstrap draws: the replay's pick is drawn as its regime file was


def register(sub) -> None:
    p = sub.add_parser("loop", help="main job: fit traces -> optimise (cost-aware) -> validate on held-out prompts")
    p.add_argument("--traces", default="traces", help="a trace file, a folder (its own *.parquet) or a glob ('**' recurses), read as "
                   "fit-acceptance reads its PATHs (default: traces/)")
    p.add_argument("--bench", default="humaneval,mtbench,stdlib",
                   help="comma-separated built-in sets or JSONL paths (default: humaneval,mtbench,stdlib); a JSONL set "
                        "is matched to its traces by its file stem")
    # 5: two held-out prompts missed the prediction by 10-42% from prompt variation alone; five took
    # 3 min on the quiet 2-core CPU and landed within 3% on every set (README, "The main job")
    p.add_argument("--limit", type=int, default=5, help="held-out prompts per set (default 5)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="default 128, as the shipped traces (the adjacency "
                   "table fills as a prompt goes on, so shorter runs see lower transition acceptance)")
    p.add_argument("--latency", help="goose-latency/1 profile; default: measure once on this device and cache it")
    add_refresh_option(p)
    p.add_argument("--out-dir", default="runs/loop", help="report, topologies, validation.json and traces (default runs/loop)")
    add_regime_draws_option(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_prior_option(p)
    add_model_options(p)
    add_sampling_options(p)  # with --traces recorded at the same setting (goose record-traces --temperature ...)
    p.set_defaults(handler=loop_handler)


def loop_handler(args: argparse.Namespace) -> int:
    from .fit_cli import group_regime_exports

    benches, config = check_args(args)
    check_regime_draws(args.regime_draws)
    check_loop_outputs(args, benches)  # the loop's own files now; the report's names depend on the fit (below)
    files, prompts = _loop_inputs(args, benches)
    from goose_theory.fit import fit_traces
    from goose_theory.fitanalysis import analyze
    from .fit_inputs import fit_metadata, note_model_mismatch, note_sampling, note_token_cap
    from .fit_files import check_outputs, write_report

    _progress(f"fitting {len(files)} trace files per prompt set")
    metas = fit_metadata(files)
    note_token_cap(metas, args.max_new_tokens)
    note_sampling(metas, this_run=sampling_settings(args))
    fit = fit_traces(files, group_by=("benchmark",), n_boot=300, seed=0)
    _progress("loading the model")
    bundle = load_quietly(args)
    note_model_mismatch(metas, model=bundle.name, dtype=args.dtype)
    from .profile import device_profile
    profile, profile_path = device_profile(bundle, dtype=args.dtype, path=args.latency,
                                           refresh=args.refresh_latency, log=_progress)
    encode_held_out(bundle, prompts, config)
    analysis = analyze(fit, latency=profile)
    by_label = {set_name(b): b for b in benches}
    # every set's regime fit before any file is written: a set it cannot fit leaves no half report
    fits = group_regime_exports(analysis, files, context="two-regime fit ({})", labels=set(by_label), log=_progress,
                                draws=args.regime_draws, seed=LOOP_SEED)
    check_outputs(analysis, args.out_dir, siblings=("-regimes", "-regimes-replay"))  # validation files: up front
    os.makedirs(args.out_dir, exist_ok=True)
    written = write_report(analysis, args.out_dir, regimes=fits)
    plan = _loop_plan(args, written, fits, by_label, bundle=bundle, config=config, files=files)
    args.trace_dir = args.out_dir  # validation-<set>.parquet beside the report
    rows = run_validation(args, bundle, plan, config, prompts)
    args.out = os.path.join(args.out_dir, "validation.json")
    emit_report(args, rows, {"traces": files, "latency": profile_path or "measured in this run on a busy host (not cached)", "topologies": dict(plan),
                       "max_new_tokens": args.max_new_tokens, "holdout_limit": args.limit, **sampling_settings(args)})
    if not args.json:
        print(f"\nfit report, topologies, validation.json and validation-<set>.parquet in {args.out_dir}/")
    return 0


def _regime_topologies(exported: tuple, bench: str, paths: list[str], budget: int, *, bundle=None, config=None,
                       prompt_set: str | None = None, prior: bool = False, interval=None) -> list[str]:
    """Report the two-regime export written at ``paths`` (its single tree, then its regime file:
    matched/unmatched trees, plus a tree for confident matches where the traces label them) at the
    (cost-aware) ``budget`` (``exported``: :func:`goose_runtime.fit_cli.regime_exports`' tuple);
    with ``bundle``, also write the regime file whose matched tree the trace replay picks
    (``*-regimes-replay.json``), where that is not the regime file's own (``prompt_set``: the set as
    given, a JSONL path, where ``bench`` is its label; ``interval``: gives the pick its own
    ``predicted_ci95``, a topology -> topology). Returns the paths the set runs."""
    from goose_theory.regimefill import budget_gap_note, prior_mismatch_note

    from .fit_report import tau_text

    single, pair, fit, methods = exported
    _progress(f"{bench}: two-regime fit from {', '.join(methods)}: psi {fit.psi:.2f}, predicted tau "
              f"{tau_text(single.meta['predicted_tau'], single.meta.get('predicted_ci95'))} (one tree), "
              f"{tau_text(pair.meta['predicted_tau'], pair.meta.get('predicted_ci95'))} ({pair.meta['rule']}), budget {budget}")
    for note in (budget_gap_note(pair.meta["provenance"].get("regime_budgets") or [], budget),
                 prior_mismatch_note(methods, prior)):
        if note:
            _progress(f"{bench}: note: {note}")
    picked = _replay_pick(bundle, paths[1], prompt_set or bench, config, interval) if bundle is not None else None
    return paths + ([picked] if picked else [])


def _replay_pick(bundle, pair_path: str, bench: str, config, interval=None) -> str | None:
    """The replay's choice among the regime file's matched-tree variants, written beside it when it
    is not the file itself (:func:`goose_runtime.replay.pick_by_replay`)."""
    from goose_theory.topology import load_topology, save_topology

    from .replayfit import pick_by_replay

    start = time.perf_counter()
    if (out := pick_by_replay(bundle, load_topology(pair_path), bench, config=config, name="replay-pick")) is None:
        return None
    best, rows = out
    path = pair_path[: -len(".json")] + "-replay.json"
    choice = best.meta["replay_choice"]
    _progress(f"{bench}: " + replay_line(rows, choice, os.path.basename(path), time.perf_counter() - start))
    if choice == 0:
        return None
    save_topology(interval(best) if interval else best, path)  # the variant's own interval, not the file's
    return path


def replay_line(rows: list[dict], choice: int, path: str, seconds: float) -> str:
    """What the replay of the matched-tree variants found, on one progress line.

    Example:
        >>> rows = [{"matched": "one", "spine": 5, "transitions": 4, "spine_scale": 1.0, "replayed_tau": 1.921},
        ...         {"matched": "by-length", "spine": 6, "transitions": 3, "spine_scale": 0.8, "replayed_tau": 1.987}]
        >>> replay_line(rows, 1, "t-replay.json", 4.2).split("slots: ")[1]
        'the file 5+4 q1 1.921, by length 6+3 q0.8 1.987; variant 1 -> t-replay.json'
    """
    taus = ", ".join(f"{'the file ' if i == 0 else ''}{'by length ' if r['matched'] == 'by-length' else ''}"
                     f"{r['spine']}+{r['transitions']} q{r['spine_scale']:g} {r['replayed_tau']:.3f}"
                     for i, r in enumerate(rows))
    kept = "the file stays (no variant gains enough)" if choice == 0 else f"variant {choice} -> {path}"
    return (f"replayed tau of the regime file's matched tree and {len(rows) - 1} variant(s) on the fit traces' texts "
            f"({seconds:.0f} s; by length: the longest match's tree; qF: optimised with the spine's q scaled by F), "
            f"as spine+transition slots: {taus}; {kept}")


def _loop_inputs(args: argparse.Namespace, benches: list[str]) -> tuple[list[str], dict[str, list]]:
    """The trace files of the sets asked for and the held-out prompts of each set, checked before
    the fit, the model load and any file written: a set the traces do not hold, or one with no prompt
    left over. A file that holds none of the sets is left out, so ``--bench stdlib`` exports no
    other set's topology into the out folder (a file holding several sets is fitted whole)."""
    from .fit_inputs import trace_files, trace_sets  # here: pyarrow is not for every command's start-up

    sets_of = {f: trace_sets([f]) for f in trace_files(args.traces)}
    held = sorted({s for sets in sets_of.values() for s in sets})
    missing = [b for b in benches if set_name(b) not in held]  # a JSONL set is labelled by its stem
    if missing:
        raise UsageError(f"the traces hold no prompt set {', '.join(map(repr, missing))} "
                         f"(they hold {', '.join(held)})")
    wanted = {set_name(b) for b in benches}
    files = [f for f, sets in sets_of.items() if wanted.intersection(sets)]
    # held out: prompts the fit traces (which the exports will cite) do not hold
    return files, held_out(benches, {f"--traces {args.traces}": [os.path.abspath(f) for f in files]}, args)


def _loop_plan(args: argparse.Namespace, written, fits: dict, by_label: dict, *, bundle, config,
               files: list[str]) -> list:
    """(prompt set, topology files) to validate per exported group: the single tree, the regime
    file and the replay's pick (with its own interval, from the fit ``files``); notes the out
    folder's files this run did not write."""
    from .fit_cli import interval_exports
    from .fit_files import stale_note, stale_outputs

    plan = []
    for e in written.exports:
        label, exported = e["group"], fits[e["group"]]  # a group of --group-by benchmark: its label is the set
        interval = (lambda t, label=label, methods=exported[3]: interval_exports(
            [t], files, label, methods, draws=args.regime_draws, seed=LOOP_SEED)[0]) if args.regime_draws else None
        paths = _regime_topologies(exported, label, [e["single"]["file"], e["regime_file"]["file"]],
                                   exported[0].budget, bundle=bundle, config=config, prompt_set=by_label[label],
                                   prior=args.prior, interval=interval)
        plan.append((by_label[label], paths))
    replays = {os.path.basename(p) for _, paths in plan for p in paths}  # the replay's picks are this run's too
    if stale := [n for n in stale_outputs(args.out_dir, written) if n not in replays]:
        _progress(stale_note(args.out_dir, stale))
    if not plan:  # every set passed the check above, so this is a fault, not bad input
        raise RuntimeError(f"no topology was exported for the prompt sets {', '.join(by_label.values())}")
    return plan
