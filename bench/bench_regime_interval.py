"""Does the regime file's predicted-tau interval cover what it claims? (goose_theory/regimeinterval.py)

The interval is the sampling error of a prediction fitted on a few prompts. Here a large trace file
stands in for the population: each replicate draws ``--fit`` prompts (16, as traces/prior holds per
set), fits and exports the single tree and the regime file from them at ``--budget`` as goose loop
does, and computes their intervals (``--draws`` bootstrap refits). The target is what the *same*
trees are priced at under the fit of every prompt in the file. A 95% interval should hold it in
about 95% of replicates (a little less: the target carries the large fit's own sampling error, and
percentile intervals run narrow on few prompts).

    python bench/bench_regime_interval.py traces/large/stdlib-wide-b8.parquet --replicates 20 \\
        --out bench/results/regime_interval_stdlib-wide.json

Prints one line per replicate and the coverage; ``--out`` writes them as JSON.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from goose_theory.fileio import write_text_atomic
from goose_theory.regimeexport import export_topologies
from goose_theory.regimefill import nearest_methods
from goose_theory.regimefit import fit_regimes_both
from goose_theory.regimeinput import read_frames
from goose_theory.regime import file_prediction
from goose_theory.regimeinterval import prompt_keys, regime_intervals


def replicate(frames, keys, truth_fits, *, n_fit: int, budget: int, draws: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    chosen = {tuple(keys[i]) for i in rng.choice(len(keys), size=n_fit, replace=False)}
    sub = [(f[[(b, p) in chosen for b, p in zip(f["benchmark"], f["prompt_id"])]].reset_index(drop=True), m)
           for f, m in frames]
    sub = [(f, m) for f, m in sub if len(f)]
    methods = tuple(nearest_methods(sub, budget))
    fit, split = fit_regimes_both(sub, methods=methods)
    single, pair = export_topologies(fit, budget, provenance={}, split=split)
    start = time.perf_counter()
    cis = regime_intervals(sub, methods, [single, pair], draws=draws, seed=seed)
    seconds = time.perf_counter() - start
    truth = [file_prediction(single, truth_fits[0]).tau, file_prediction(pair, truth_fits[1]).tau]
    out = {"seed": seed, "seconds": round(seconds, 1)}
    for name, tree, ci, target in zip(("single", "regime_file"), (single, pair), cis, truth):
        out[name] = {"predicted": tree.meta["predicted_tau"], "ci95": list(ci), "target": target,
                     "covered": bool(ci[0] <= target <= ci[1])}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--fit", type=int, default=16, help="prompts per fitted sample (default 16)")
    p.add_argument("--budget", type=int, default=8)
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--replicates", type=int, default=20)
    p.add_argument("--out")
    args = p.parse_args()
    frames = read_frames([args.trace])
    keys = prompt_keys(frames)
    methods = tuple(nearest_methods(frames, args.budget))
    truth_fits = fit_regimes_both(frames, methods=methods)  # (plain, split): split prices regime files
    rows = []
    for r in range(args.replicates):
        rows.append(replicate(frames, keys, truth_fits, n_fit=args.fit, budget=args.budget, draws=args.draws, seed=r))
        s, q = rows[-1]["single"], rows[-1]["regime_file"]
        print(f"seed {r}: regime file {q['predicted']:.3f} [{q['ci95'][0]:.3f}, {q['ci95'][1]:.3f}] target "
              f"{q['target']:.3f} {'in' if q['covered'] else 'OUT'}; single {s['predicted']:.3f} "
              f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] target {s['target']:.3f} {'in' if s['covered'] else 'OUT'}"
              f" ({rows[-1]['seconds']} s)", flush=True)
    cover = {k: sum(r[k]["covered"] for r in rows) for k in ("single", "regime_file")}
    print(f"covered: regime file {cover['regime_file']}/{len(rows)}, single {cover['single']}/{len(rows)} "
          f"({len(keys)} prompts in {args.trace}, {args.fit} fitted per replicate, {args.draws} draws)")
    if args.out:
        write_text_atomic(args.out, text=json.dumps({"trace": args.trace, "prompts": len(keys), "fit": args.fit,
                                              "budget": args.budget, "draws": args.draws, "coverage": cover,
                                              "replicates": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
