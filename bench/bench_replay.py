"""The trace replay's prediction for exported topology files, against a validation run's measurement
(docs/two-regime.md section 11).

For each file: its trace replay (goose_runtime/replay.py) on the texts of ``--traces`` (default:
the file's provenance), the emitted and accepted tokens per cycle, the spread over seeds, the
cycles per regime, the file's closed-form prediction, and with ``--validation`` (a ``goose
validate --out`` / ``goose loop`` JSON) the measured tau of the file's row (a file copied with a
``_YYYY-MM-DD`` suffix is matched to the row of its name without it) and both errors.
``--prompts-of TRACE`` replays only the prompts that trace holds (a validation run on fitted
prompts). ``--texts TRACE`` is a diagnostic, not a prediction: it also replays on the texts of
another trace (e.g. the held-out validation trace) with the fit's rates and text cue, which
separates the replay model's own error from the difference between the fitted and held-out
texts. ``--cue`` prints the text cue's raw rates (rank-0 transitions by slot kind, at a seen
bigram or not) from ``--traces``. Loads the model bundle only for its tokenizer (no forward pass).

    .venv/bin/python bench/bench_replay.py bench/results/topology-stdlib-wide-regimes_2026-11-30.json \\
        bench/results/topology-stdlib-wide_2026-11-30.json --bench stdlib-wide \\
        --traces traces/large/stdlib-wide-b8.parquet --validation bench/results/loop_stdlib_wide_2026-11-30.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from goose_runtime.config import DecodeConfig
from goose_runtime.methods import parse_method
from goose_runtime.model import load_model
from goose_runtime.replay import SEEDS, replay
from goose_runtime.runner import method_label
from goose_runtime.replayfit import cue_outcomes, fit_traces_of, replay_inputs, replay_items, replay_prediction
from goose_theory.replayinput import conditional_rates
from goose_theory.traceio import open_trace


def measured(path: str | None, label: str) -> float:
    if not path:
        return float("nan")
    rows = [r for r in json.load(open(path))["rows"] if r["method"] == label]
    return float(rows[0]["measured_tau"]) if rows else float("nan")


def prompt_ids(path: str | None) -> set[str] | None:
    if not path:
        return None
    pf = open_trace(path)
    try:
        return set(pf.read(columns=["prompt_id"]).column("prompt_id").to_pylist())
    finally:
        pf.close()


def on_texts(bundle, spec, bench: str, config, fit_files: list[str], texts_trace: str) -> float:
    """The replay's emitted tau on another trace's texts, with the rates and text cue of the fit."""
    _, multipliers = replay_inputs(bundle, fit_files, bench)
    items = replay_items(bundle, [texts_trace], bench)
    rates = conditional_rates(spec.topology.meta["regime_fit"])
    return replay(spec, items, rates, max_new_tokens=config.max_new_tokens, multipliers=multipliers).emitted_tau


def print_cue(bundle, files: list[str], bench: str) -> None:
    """Rank-0 transitions' matching rate by slot kind, at a seen bigram or not (the text cue)."""
    out = cue_outcomes(files, replay_items(bundle, files, bench))
    table = out[out["rank"] == 0].groupby(["kind", "cue"])["hit"].agg(["mean", "count"])
    print("rank-0 transitions that matched, by slot kind and cue (seen bigram):")
    print(table.to_string(float_format=lambda x: f"{x:.3f}"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("topology", nargs="+")
    p.add_argument("--bench", required=True)
    p.add_argument("--traces", nargs="*", help="fit traces (default: each file's provenance)")
    p.add_argument("--validation", help="a validation JSON with the files' measured rows")
    p.add_argument("--prompts-of", help="replay only the prompts of this trace")
    p.add_argument("--texts", help="diagnostic: also replay on this trace's texts (the fit's rates and cue)")
    p.add_argument("--cue", action="store_true", help="print the text cue's matching rates from --traces")
    p.add_argument("--goose", type=int, action="append", default=[], metavar="B",
                   help="also replay goose@B with the first file's fit (repeatable)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--seeds", type=int, default=SEEDS)
    args = p.parse_args(argv)
    bundle = load_model("default")
    config = DecodeConfig(max_new_tokens=args.max_new_tokens)
    only = prompt_ids(args.prompts_of)
    if args.cue:
        print_cue(bundle, args.traces, args.bench)
    for path in args.topology:
        spec = parse_method(f"topology:{path}")
        t0 = time.perf_counter()
        r = replay_prediction(bundle, spec, args.bench, config=config, traces=args.traces, prompt_ids=only,
                              seeds=args.seeds)
        if r is None:
            print(f"{path}: no regime fit or no fit traces to replay", file=sys.stderr)
            return 2
        label = "topology:" + os.path.splitext(os.path.basename(path))[0]
        tau = measured(args.validation, re.sub(r"_\d{4}-\d{2}-\d{2}$", "", label))  # a dated copy: the run's name
        closed = float(spec.topology.meta.get("predicted_tau", float("nan")))
        print(f"{label}: {r.prompts} prompts x {r.seeds} seeds in {time.perf_counter() - t0:.1f} s")
        print(f"  replayed emitted {r.emitted_tau:.3f} (seeds {', '.join(f'{x:.3f}' for x in r.emitted_by_seed)}), "
              f"accepted {r.accepted_tau:.3f}; closed form {closed:.3f}")
        print("  regimes: " + ", ".join(f"{k} {v['cycle_share']:.1%} of cycles at {v['tau']:.3f}" for k, v in r.regimes.items()))
        if tau == tau:
            print(f"  measured {tau:.3f}: replay error {100 * (r.emitted_tau / tau - 1):+.1f}%, "
                  f"closed-form error {100 * (closed / tau - 1):+.1f}%")
        if args.texts:
            given = on_texts(bundle, spec, args.bench, config, args.traces or fit_traces_of(spec.topology), args.texts)
            print(f"  on the texts of {args.texts}: {given:.3f}" + (f" ({100 * (given / tau - 1):+.1f}% of measured)"
                                                                   if tau == tau else ""))
    for b in args.goose:
        replay_goose(bundle, parse_method(f"topology:{args.topology[0]}"), b, args, config, only)
    return 0


def replay_goose(bundle, fitted, budget: int, args, config, only) -> None:
    """goose@budget replayed with ``fitted``'s regime fit and text cue, against its measured row."""
    t0 = time.perf_counter()
    r = replay_prediction(bundle, parse_method("goose", budget=budget), args.bench, config=config,
                          traces=args.traces, prompt_ids=only, seeds=args.seeds, fitted=fitted.topology)
    label = method_label(parse_method("goose", budget=budget))  # validation rows call goose@60 "goose"
    tau = measured(args.validation, label)
    print(f"{label}: {r.prompts} prompts x {r.seeds} seeds in {time.perf_counter() - t0:.1f} s")
    print(f"  replayed emitted {r.emitted_tau:.3f}, accepted {r.accepted_tau:.3f}; regimes: "
          + ", ".join(f"{k} {v['cycle_share']:.1%} at {v['tau']:.3f}" for k, v in r.regimes.items()))
    if tau == tau:
        print(f"  measured {tau:.3f}: replay error {100 * (r.emitted_tau / tau - 1):+.1f}%")


if __name__ == "__main__":
    raise SystemExit(main())
