"""Two methods of one trace file on the same prompts: tau of each, and A/B - 1 with a paired interval.

Prompts differ far more than methods do (`docs/two-regime.md` section 8), so "is A above B?" is
answered on the same prompts, resampling prompts jointly (`goose_theory.validation.paired_ratio_ci`).
Also printed: the same comparison on the first N prompts in the file's order, to set a small
benchmark's verdict beside a larger one's.

    .venv/bin/goose decode --method goose@80 --compare tr --bench humaneval --limit 20 --keep-adjacency \
        --trace-out /tmp/kept.parquet
    .venv/bin/python bench/bench_paired.py /tmp/kept.parquet --a goose@80 --b tr --first 5
"""
from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from goose_theory.traceio import TraceFileError
from goose_theory.validation import paired_ratio_ci, prompt_totals


def compare(sums: pd.DataFrame, a: str, b: str, prompts: list[tuple[str, str]]) -> dict:
    """tau of a and b over ``prompts`` and a / b - 1 in percent with its paired 95% interval."""
    ta, tb = sums.loc[a].loc[prompts], sums.loc[b].loc[prompts]
    diff = paired_ratio_ci(ta["tokens"], ta["cycles"], tb["tokens"], tb["cycles"])
    per_a, per_b = ta["tokens"] / ta["cycles"], tb["tokens"] / tb["cycles"]
    return {"prompts": len(prompts), "tau_a": float(ta["tokens"].sum() / ta["cycles"].sum()),
            "tau_b": float(tb["tokens"].sum() / tb["cycles"].sum()), "diff_pct": [100 * x for x in diff],
            "prompts_a_higher": int((per_a > per_b).sum()), "prompts_b_higher": int((per_a < per_b).sum())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", help="one goose trace file holding both methods")
    p.add_argument("--a", required=True, help="method label, e.g. goose@80")
    p.add_argument("--b", required=True, help="method label, e.g. tr")
    p.add_argument("--first", type=int, default=0, help="also compare on the first N prompts")
    args = p.parse_args(argv)
    try:
        sums = prompt_totals(args.trace)
    except TraceFileError as exc:  # names the file and the problem (no such file, not parquet, schema)
        print(f"bench_paired: {exc}", file=sys.stderr)
        return 2
    methods = set(sums.index.get_level_values(0))
    if args.a not in methods or args.b not in methods or args.first < 0:
        print(f"bench_paired: {args.trace} holds {sorted(methods)}; need --a and --b among them, --first >= 0",
              file=sys.stderr)
        return 2
    theirs = set(sums.loc[args.b].index)
    shared = [q for q in sums.loc[args.a].index if q in theirs]  # (benchmark, prompt_id), in the file's order
    if len(shared) < 2 or args.first > len(shared):
        print(f"bench_paired: {args.a} and {args.b} share {len(shared)} prompts (need 2, and --first at most that)",
              file=sys.stderr)
        return 2
    out = {"trace": args.trace, "a": args.a, "b": args.b, "all": compare(sums, args.a, args.b, shared)}
    if args.first:
        out[f"first_{args.first}"] = compare(sums, args.a, args.b, shared[:args.first])
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
