"""Would a split stratified by MT-Bench category make a 40 / 40 held-out check less noisy?

MT-Bench's 80 questions come in 8 categories of 10. ``goose loop`` holds out a fixed half of a
shuffled order (``mtbench-shuffled``), and in both directions the two halves' tau differed by 8%
for every method (``docs/two-regime.md``, section 15). This takes one method's per-question tau
from traces that cover all 80 questions (the two halves' fit traces), splits the questions 40 / 40
many times (seeded) either at random or 5 / 5 within each category, and reports the spread of
(fitted-half tau / held-out-half tau - 1): the error an exact model would show on that split.

    .venv/bin/python bench/bench_split_strata.py A.parquet B.parquet [--method goose+prior@15] [--draws 4000]
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from goose_runtime.prompts import MTBENCH_FILE
from goose_theory.validation import prompt_totals


def per_question(paths: list[str], method: str, key=lambda q: q["category"]) -> tuple[np.ndarray, np.ndarray, list]:
    """(tokens, cycles, ``key`` of the question's JSON: its category) per question id, over the
    traces (a question once)."""
    rows: dict[str, tuple[float, float]] = {}
    for path in paths:
        part = prompt_totals(path).loc[method]
        for (_, prompt_id), r in part.iterrows():
            rows.setdefault(str(prompt_id), (float(r["tokens"]), float(r["cycles"])))
    with open(MTBENCH_FILE, encoding="utf-8") as fh:
        keys = {str(q["question_id"]): key(q) for q in map(json.loads, fh)}
    ids = sorted(rows)
    tokens, cycles = (np.array([rows[i][j] for i in ids]) for j in (0, 1))
    return tokens, cycles, [keys[i] for i in ids]


def split_args(argv, description: str) -> argparse.Namespace:
    """The command line both split benchmarks take: traces, --method, --draws, --seed."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--method", default="goose+prior@15")
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def spread(tokens, cycles, cats, *, stratified: bool, draws: int, seed: int) -> np.ndarray:
    """(fitted-half pooled tau / held-out-half pooled tau - 1) over ``draws`` seeded 50/50 splits,
    at random or half of each category (``cats``) on each side."""
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(np.array(cats) == c) for c in sorted(set(cats))]
    out = np.empty(draws)
    for d in range(draws):
        if stratified:
            fit = np.concatenate([rng.permutation(g)[: g.size // 2] for g in groups])
        else:
            fit = rng.permutation(tokens.size)[: tokens.size // 2]
        held = np.setdiff1d(np.arange(tokens.size), fit)
        out[d] = (tokens[fit].sum() / cycles[fit].sum()) / (tokens[held].sum() / cycles[held].sum()) - 1
    return out


def main(argv=None) -> int:
    args = split_args(argv, __doc__.splitlines()[0])
    tokens, cycles, cats = per_question(args.traces, args.method)
    print(f"{tokens.size} questions, {args.method}, pooled tau {tokens.sum() / cycles.sum():.3f}")
    for cat in sorted(set(cats)):
        sel = np.array(cats) == cat
        print(f"  {cat:<11} tau {tokens[sel].sum() / cycles[sel].sum():.2f}")
    for stratified in (False, True):
        err = spread(tokens, cycles, cats, stratified=stratified, draws=args.draws, seed=args.seed)
        print(f"{'stratified' if stratified else 'at random':<11} sd {err.std():.3f}, "
              f"within 5% in {np.mean(np.abs(err) <= 0.05):.0%} of {args.draws} splits")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
