"""How far below the exhaustive optimum does the regime single-tree search land?

``goose_theory.regimesingle.best_single`` picks one tree for matched and unmatched cycles alike from
the optima of blended acceptances. This draws realistic pairs of regimes (a spine accepted at
0.6-0.95, decreasing transition rates, the unmatched regime without spine; chain rates equal in
both regimes, or drawn apart), scores every valid tree of up to ``--budget`` nodes under the
two-regime harmonic mix (tests/test_optimize_exact.py's enumeration; ``regime_tau``'s pieces are
checked against brute force in tests/test_regime.py), and counts the cases where the search, and
the weight grid alone (the search before 7 Dec: the mixed chain, no search between weights), fall
below the best tree. Limits: max depth 3, max spine 3, top-K 2.

    .venv/bin/python bench/bench_regime_single.py [--cases 300] [--budget 5] [--seed 2]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/: the exhaustive enumeration

from goose_theory.acceptance import Acceptance  # noqa: E402
from goose_theory.regime import harmonic_tau  # noqa: E402
from goose_theory.regimesingle import WEIGHTS, _search, best_single  # noqa: E402
from goose_theory.topology import SOURCE_NAMES, Topology  # noqa: E402
from goose_theory.yields import yield_with_fallback  # noqa: E402
from tests.test_optimize_exact import candidate_nodes, subtrees  # noqa: E402

LIMITS = dict(max_depth=3, max_spine=3, top_k=2)


def every_tree(budget: int) -> list[Topology]:
    nodes = candidate_nodes(LIMITS["max_depth"], LIMITS["max_spine"], LIMITS["top_k"], budget)
    out = []
    for members in subtrees(nodes, budget):
        index = {v: i for i, v in enumerate(members)}
        out.append(Topology.from_nodes([(-1, "root", 0)] + [(index[nodes[v][0]], SOURCE_NAMES[nodes[v][1]], nodes[v][2])
                                                             for v in members[1:]],
                                       max_depth=LIMITS["max_depth"], max_spine=LIMITS["max_spine"]))
    return out


def draw(rng: np.random.Generator, same_chain: bool) -> tuple[Acceptance, Acceptance, float]:
    """A matched and an unmatched regime and the matched share of tokens psi."""
    def chain() -> list[float]:
        return [0.4 * (0.5 + rng.random()), 0.1 * (0.5 + rng.random())]
    p_s, matched_chain = float(0.6 + 0.35 * rng.random()), chain()
    miss = 1.0 - p_s
    matched = Acceptance.parse([p_s] * 3, [miss * 0.3 * (0.5 + rng.random()), miss * 0.1],
                               p_t_spine=[miss * 0.5 * (0.5 + rng.random()), miss * 0.1], p_t_chain=matched_chain)
    unmatched = Acceptance.parse(0.0, [0.2 + 0.3 * rng.random(), 0.05 + 0.1 * rng.random()], p_t_spine=[0.1],
                                 p_t_chain=matched_chain if same_chain else chain())
    return matched, unmatched, float(0.1 + 0.7 * rng.random())


def run(cases: int, budget: int, seed: int, same_chain: bool) -> dict[str, list[float]]:
    trees = every_tree(budget)
    size = np.array([t.budget for t in trees])
    rng = np.random.default_rng(seed)
    gaps: dict[str, list[float]] = {"search": [], "grid alone": []}
    for _ in range(cases):
        m, u, psi = draw(rng, same_chain)
        tm = np.array([yield_with_fallback(t, m)[0].expected_tau for t in trees])
        tu = np.array([yield_with_fallback(t, u)[0].expected_tau for t in trees])
        mix = 1.0 / (psi / tm + (1.0 - psi) / tu)
        for b in range(1, budget + 1):
            best = mix[size <= b].max()
            found = best_single(m, u, psi, budget=b, **LIMITS).prediction.tau
            grid = max(harmonic_tau(yield_with_fallback(t, m)[0].expected_tau, yield_with_fallback(t, u)[0].expected_tau, psi)
                       for _, t in _search(m, u, "mix", b, sorted(WEIGHTS), 0, LIMITS))
            gaps["search"].append((best - found) / best)
            gaps["grid alone"].append((best - grid) / best)
    return gaps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=300, help="regime pairs per chain setting (each at budgets 1..B)")
    ap.add_argument("--budget", type=int, default=5, help="largest budget (trees of up to B non-root nodes)")
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    print(f"{args.cases} regime pairs x budgets 1-{args.budget} per row; limits {LIMITS}")
    print(f"{'chains':10} {'method':11} {'cases':>6} {'below':>6} {'max gap':>8}")
    for same in (True, False):
        for method, gap in run(args.cases, args.budget, args.seed, same).items():
            below = sum(g > 1e-9 for g in gap)
            print(f"{'equal' if same else 'differing':10} {method:11} {len(gap):6d} {below:6d} {100 * max(gap):7.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
