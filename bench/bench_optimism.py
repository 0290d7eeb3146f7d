"""Is an exported regime file's prediction optimistic because the file was chosen on the same fit?

The loop fits the two-regime model on the traces' prompts, picks the regime file that model
prices highest, and predicts its tau with that same model: the choice favours trees whose rates
the fit happened to over-estimate (selection, "the optimiser's curse"), so the prediction of the
chosen file runs high on new prompts by some amount. This script measures that amount from the
shipped traces alone. Split a set's prompts at random into halves A and B; fit each (as
``regime_topologies`` does: the trace methods nearest the budget, plain and split fits), export
each half's regime file at ``--budget``, and price both files under both fits (``regime_tau``, as
``best_pair`` prices its choice; the full fit's reprice equals its export's ``predicted_tau``).
A's file is fitted to A's noise, B's is not, so

    optimism(A) = P_A(file_A) / P_A(file_B) - 1

is the in-sample advantage the selection buys; by the symmetry of the split, its mean over splits
is E[P_A(file_A)] / E[P_B(file_A)] - 1 to first order: how far a half's prediction of its own file
runs above an independent fit's. Paired under one fit, it is free of the halves' own difference
(their pooled tau differ by 15-25% on these sets). The halves hold 8 prompts: the loop fits 16,
whose estimates are less noisy and whose optimism is smaller.

    .venv/bin/python bench/bench_optimism.py [--sets humaneval=6,mtbench=5,stdlib=15] [--splits 30]
        [--traces traces/prior] [--out FILE.json]

``--loops FILE...`` (the JSON that ``goose loop --out`` / the runtime's ``validation.json`` holds)
instead splits each validated file's closed-form error in two: the prediction against the trace
replay (the same drafting re-run on the fitted prompts' texts: what the model leaves out, and any
optimism) and the replay against the measured tau (how the held-out prompts differ from the fitted
ones), beside the same split for goose+prior at the file's budget.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from goose_theory.regime import regime_tau
from goose_theory.regimeexport import export_topologies
from goose_theory.regimefile import confident_topology, matched_by_length, matched_topology, unmatched_topology
from goose_theory.regimefill import nearest_methods
from goose_theory.regimefit import fit_regimes
from goose_theory.regimeinput import read_frames
from goose_theory.topology import Topology, write_json_atomic


def halves(frames, ids):
    """The frames' rows of the prompts ``ids`` (frames left empty are dropped)."""
    out = []
    for frame, meta in frames:
        part = frame[frame["prompt_id"].isin(ids)]
        if len(part):
            out.append((part.reset_index(drop=True), meta))
    return out


def export(frames, budget: int):
    """(regime file, split fit) as ``goose_theory.regimeexport.regime_topologies`` makes them."""
    methods = tuple(nearest_methods(frames, budget))
    fit = fit_regimes(frames, methods=methods)
    split = fit_regimes(frames, methods=methods, split=True)
    return export_topologies(fit, budget, provenance={}, split=split)[1], split


def price(pair: Topology, split, budget: int) -> float:
    """The regime file's tau under ``split`` (a split fit), priced as ``best_pair`` prices its choice."""
    confident = confident_topology(pair)
    return regime_tau(matched_topology(pair) or pair, split.matched, split.unmatched, split.psi,
                      unmatched_topology(pair), confident=split.confident, psi_confident=split.psi_confident,
                      confident_topology=confident[0] if confident else None, fill=split.fill, budget=budget,
                      spines=split.spines, by_length=matched_by_length(pair) or ()).tau


def one_set(path: str, bench: str, budget: int, splits: int, seed: int) -> dict:
    frames = read_frames([path], benchmark=bench)
    ids = sorted(set().union(*(set(frame["prompt_id"]) for frame, _ in frames)))
    pair, split = export(frames, budget)
    full = (float(pair.meta["predicted_tau"]), price(pair, split, budget))
    rng = np.random.default_rng(seed)
    optimism, gap = [], []
    for _ in range(splits):
        order = rng.permutation(ids)
        a, b = (export(halves(frames, list(h)), budget) for h in (order[: len(ids) // 2], order[len(ids) // 2:]))
        (file_a, fit_a), (file_b, fit_b) = a, b
        optimism += [price(file_a, fit_a, budget) / price(file_b, fit_a, budget) - 1.0,
                     price(file_b, fit_b, budget) / price(file_a, fit_b, budget) - 1.0]
        gap.append(abs(price(pair, fit_a, budget) / price(pair, fit_b, budget) - 1.0))
    x = 100.0 * np.asarray(optimism)
    per_split = x.reshape(splits, 2).mean(axis=1)  # a split's two halves are not independent: se over splits
    return {"set": bench, "budget": budget, "prompts": len(ids), "half": len(ids) // 2, "splits": splits,
            "full_predicted": full[0], "full_repriced": full[1], "optimism_pct": x.tolist(),
            "mean_pct": float(x.mean()), "se_pct": float(per_split.std(ddof=1) / math.sqrt(splits)),
            "median_pct": float(np.median(x)), "p90_pct": float(np.quantile(x, 0.9)),
            "halves_gap_median_pct": float(100.0 * np.median(gap))}


def decompose(path: str) -> list[str]:
    """Lines: per set, goose+prior@B and the regime file's prediction / replay / measured tau."""
    with open(path, encoding="utf-8") as fh:
        rows = json.load(fh)["rows"]
    lines = []
    for r in rows:
        label = r["method"]
        kept = (label.startswith("goose+prior@") and r["budget"] != 60) or label.endswith("-regimes+prior")
        if kept and r.get("replayed_tau") and r.get("predicted_tau"):
            p, rep, m = r["predicted_tau"], r["replayed_tau"], r["measured_tau"]
            lines.append(f"  {r['benchmark']:9s} {label:42s} B={r['budget']:<3d} predicted {p:.3f} replayed {rep:.3f} "
                         f"measured {m:.3f}: predicted/replayed {100 * (p / rep - 1):+.1f}%, "
                         f"replayed/measured {100 * (rep / m - 1):+.1f}%")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="humaneval=6,mtbench=5,stdlib=15", help="SET=BUDGET,... (default: the "
                    "budgets make run chose on the AVX2-only EPYC at 21:48 UTC, 3 Dec)")
    ap.add_argument("--traces", default="traces/prior", help="folder of <set>-b8.parquet (default traces/prior)")
    ap.add_argument("--splits", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write every split's optimism here (JSON)")
    ap.add_argument("--loops", nargs="+", help="instead: split the closed-form errors of these loop JSON files")
    args = ap.parse_args(argv)
    if args.loops:
        for path in args.loops:
            print(path, *decompose(path), sep="\n")
        return 0
    rows = []
    for item in args.sets.split(","):
        bench, budget = item.split("=")
        r = one_set(f"{args.traces}/{bench}-b8.parquet", bench, int(budget), args.splits, args.seed)
        rows.append(r)
        print(f"{bench} at budget {budget}: full fit predicts {r['full_predicted']:.4f} (repriced "
              f"{r['full_repriced']:.4f}); {r['half']}-prompt halves, {2 * args.splits} fits: optimism mean "
              f"{r['mean_pct']:+.2f}% (se {r['se_pct']:.2f}), median {r['median_pct']:+.2f}%, 90th percentile "
              f"{r['p90_pct']:+.2f}%; the full file's price under the two halves differs by "
              f"{r['halves_gap_median_pct']:.1f}% (median)", flush=True)
    if args.out:
        write_json_atomic(args.out, {"command": " ".join(sys.argv), "sets": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
