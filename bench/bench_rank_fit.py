"""Each rule's predicted tau on random acceptances, written to JSON, to compare two checkouts.

Made for the exclusive model's first-fit ranks (3 Dec): where p_s + p_t over the ranks exceeds
1, ``optimal`` and ``transition-only`` now keep every rank that still fits in rank order, where
they kept the prefix before; used again for the best of all maximal child sets (4 Dec), with the
time each case's ``optimal`` build takes (after one warm-up build). Run it once per checkout (``--root`` puts an older one first on the
path) and once more with ``--compare OLD.json NEW.json``: per rule, how many cases got better,
worse or stayed, and the median and largest gain.

    .venv/bin/python bench/bench_rank_fit.py [--root DIR] [--cases 1500] --out FILE.json
    .venv/bin/python bench/bench_rank_fit.py --compare OLD.json NEW.json
    .venv/bin/python bench/bench_rank_fit.py [--root DIR] --named   # four acceptances, budgets 60-1024

``--named`` times ``optimal`` (median of 3 builds) where many child sets compete: one p_s per
spine depth and ten distinct p_t (the worst case for the number of sets), the review's case, a
flat p_t, and a chain-heavy p_t.
"""
from __future__ import annotations

import argparse
import json
import random
import sys

RULES = ("optimal", "transition-only", "linear", "harmonic", "paper")


def cases(n: int, seed: int):
    """(p_s list, falling p_t list, model, budget) drawn at random: a third independent."""
    rng = random.Random(seed)
    for _ in range(n):
        p_s = [round(rng.uniform(0.05, 0.98), 3) for _ in range(rng.randint(1, 4))]
        p_t = sorted((round(rng.uniform(0.0, 0.6), 3) for _ in range(rng.randint(1, 6))), reverse=True)
        yield p_s, p_t, rng.choice(["exclusive", "exclusive", "independent"]), rng.randint(1, 60)


def predicted(n: int, seed: int) -> list[dict]:
    import time

    from goose_theory.acceptance import Acceptance
    from goose_theory.optimize import build_topology

    build_topology("optimal", Acceptance.parse(0.7, [0.36, 0.09]), budget=8)  # compile the kernels
    rows = []
    for p_s, p_t, model, budget in cases(n, seed):
        acc = Acceptance.parse(p_s, p_t, model)
        start = time.perf_counter()
        row = {"optimal": build_topology("optimal", acc, budget=budget).predicted_tau,
               "optimal_ms": 1e3 * (time.perf_counter() - start)}
        rows.append(row | {rule: build_topology(rule, acc, budget=budget).predicted_tau for rule in RULES[1:]})
    return rows


NAMED = {  # name: (p_s, p_t, p_t_chain)
    "distinct": ([round(0.9 - 0.4 * i / 19, 4) for i in range(20)], [0.3, 0.25, 0.2, 0.15, 0.12, 0.1, 0.08, 0.06, 0.05, 0.04], None),
    "review": (0.7, [0.36, 0.09, 0.05, 0.04], None),
    "flat": (0.5, 0.2, None),
    "chain": (0.8, [0.3, 0.2, 0.1], [0.5, 0.3, 0.2, 0.1]),
}


def time_named() -> None:
    import statistics
    import time

    from goose_theory.acceptance import Acceptance
    from goose_theory.optimize import build_topology

    build_topology("optimal", Acceptance.parse(0.7, [0.36, 0.09]), budget=8)  # compile the kernels
    for name, (p_s, p_t, chain) in NAMED.items():
        acc = Acceptance.parse(p_s, p_t, p_t_chain=chain)
        for budget in (60, 256, 1024):
            times, res = [], None
            for _ in range(3):
                start = time.perf_counter()
                res = build_topology("optimal", acc, budget=budget)
                times.append(1e3 * (time.perf_counter() - start))
            print(f"{name:9s} B={budget:5d} {statistics.median(times):8.1f} ms  E[tau] {res.predicted_tau:.4f}")


def compare(old: list[dict], new: list[dict]) -> None:
    for rule in RULES:
        gains = [b[rule] / a[rule] - 1.0 for a, b in zip(old, new)]
        better = sorted(g for g in gains if g > 1e-12)
        worse = sum(g < -1e-12 for g in gains)
        tail = (f", median gain {100 * better[len(better) // 2]:.1f}%, largest {100 * better[-1]:.1f}%"
                if better else "")
        print(f"{rule}: better {len(better)}, worse {worse}, same {len(gains) - len(better) - worse}{tail}")
    if all("optimal_ms" in row for row in old + new):
        times = [sorted(row["optimal_ms"] for row in rows) for rows in (old, new)]
        print("optimal build, ms (median / 99th percentile / largest): " + " -> ".join(
            f"{t[len(t) // 2]:.2f} / {t[int(0.99 * (len(t) - 1))]:.2f} / {t[-1]:.2f}" for t in times))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="a checkout to import goose_theory from (default: this one)")
    ap.add_argument("--cases", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", help="write the predicted taus here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--named", action="store_true", help="time optimal on four named acceptances")
    args = ap.parse_args(argv)
    if args.compare:
        old, new = (json.load(open(path, encoding="utf-8")) for path in args.compare)
        compare(old, new)
        return 0
    if args.root:
        sys.path.insert(0, args.root)
    if args.named:
        time_named()
        return 0
    rows = predicted(args.cases, args.seed)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
