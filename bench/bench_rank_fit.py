"""Each rule's predicted tau on random acceptances, written to JSON, to compare two checkouts.

Made for the exclusive model's first-fit ranks (3 Dec): where p_s + p_t over the ranks exceeds
1, ``optimal`` and ``transition-only`` now keep every rank that still fits in rank order, where
they kept the prefix before. Run it once per checkout (``--root`` puts an older one first on the
path) and once more with ``--compare OLD.json NEW.json``: per rule, how many cases got better,
worse or stayed, and the median and largest gain.

    .venv/bin/python bench/bench_rank_fit.py [--root DIR] [--cases 1500] --out FILE.json
    .venv/bin/python bench/bench_rank_fit.py --compare OLD.json NEW.json
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
    from goose_theory.acceptance import Acceptance
    from goose_theory.optimize import build_topology

    return [{rule: build_topology(rule, Acceptance.parse(p_s, p_t, model), budget=budget).predicted_tau for rule in RULES}
            for p_s, p_t, model, budget in cases(n, seed)]


def compare(old: list[dict], new: list[dict]) -> None:
    for rule in RULES:
        gains = [b[rule] / a[rule] - 1.0 for a, b in zip(old, new)]
        better = sorted(g for g in gains if g > 1e-12)
        worse = sum(g < -1e-12 for g in gains)
        tail = (f", median gain {100 * better[len(better) // 2]:.1f}%, largest {100 * better[-1]:.1f}%"
                if better else "")
        print(f"{rule}: better {len(better)}, worse {worse}, same {len(gains) - len(better) - worse}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="a checkout to import goose_theory from (default: this one)")
    ap.add_argument("--cases", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", help="write the predicted taus here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    args = ap.parse_args(argv)
    if args.compare:
        old, new = (json.load(open(path, encoding="utf-8")) for path in args.compare)
        compare(old, new)
        return 0
    if args.root:
        sys.path.insert(0, args.root)
    rows = predicted(args.cases, args.seed)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
