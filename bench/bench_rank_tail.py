"""The rank tail of a regime fit against held-out runs (docs/two-regime.md section 14).

For a fit trace and a held-out validation trace of the same set it prints: the power-law exponent
fitted to the fit trace's unmatched root transitions (``goose_theory.rankcurve.tail_exponent``); the
held-out acceptance by rank under the root and under transitions (reached nodes, unmatched cycles);
the binomial log-likelihood of the held-out ranks 4-9, relative to rank 3, under the power law and
under the old flat tail; and, per tree method of each trace, how often an unmatched cycle placed a
root rank-0 candidate and how often it was accepted (the slot fill and rate that depend on the tree
size). With ``--export B`` also the fitted root p_t (fill included) and the first 15 unmatched slots
of the regime file the loop would export at budget B.

    .venv/bin/python bench/bench_rank_tail.py traces/large/humaneval-b8.parquet \\
        traces/large/validation-humaneval-holdout82.parquet --export 15
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from goose_theory.rankcurve import rates_by, tail_exponent
from goose_theory.regimefit import _annotate, _slot_rows
from goose_theory.regimeinput import read_frames
from goose_theory.regimespare import MAX_RANK


def slot_rows(path: str) -> dict[str, pd.DataFrame]:
    """The fit's reached transition rows by slot kind, over every method of ``path``."""
    return _slot_rows(pd.concat([_annotate(f) for f, _ in read_frames([path])], ignore_index=True))


def root_rank0(path: str) -> pd.DataFrame:
    """Per tree method: unmatched cycles, and the share that placed / accepted a root rank-0 transition."""
    frame = pd.concat([f for f, _ in read_frames([path])], ignore_index=True)
    unmatched = frame.groupby(["method", "prompt_id", "cycle"])["spine_avail"].transform("first") == 0
    u = frame[unmatched]
    first = u[(u["depth"] == 1) & (u["source"] == "transition") & (u["rank"] == 0)]
    cycles = u[u["node"] == 0].groupby("method").size()
    out = pd.DataFrame({"cycles": cycles, "placed": first.groupby("method").size() / cycles,
                        "accepted": first.groupby("method")["match"].sum() / cycles})
    return out.dropna().round(4)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fit_trace")
    p.add_argument("held_out_trace")
    p.add_argument("--export", type=int, help="also show the regime file's unmatched tree at this budget")
    args = p.parse_args(argv)
    a = tail_exponent(*rates_by(slot_rows(args.fit_trace)["root_u"], by="rank", size=MAX_RANK))
    held = slot_rows(args.held_out_trace)
    print(f"tail exponent (fit trace): {a:.3f}")
    for kind, key in (("root", "root_u"), ("chain", "chain_u")):
        k, n = rates_by(held[key], by="rank", size=MAX_RANK)
        print(f"held-out {kind} p by rank:", np.round(k / np.maximum(n, 1), 4).tolist(), "n", n.astype(int).tolist())
    k, n = rates_by(held["root_u"], by="rank", size=MAX_RANK)
    p3 = k[3] / n[3]
    for label, p_tail in (("power", p3 * (4 / (np.arange(4, MAX_RANK) + 1.0)) ** a), ("flat", np.full(MAX_RANK - 4, p3))):
        ll = float(np.sum(k[4:] * np.log(p_tail) + (n[4:] - k[4:]) * np.log1p(-p_tail)))
        print(f"{label:5s} tail, ranks 4-{MAX_RANK - 1}: log-likelihood {ll:.1f}")
    for path in (args.fit_trace, args.held_out_trace):
        print(f"root rank 0 per unmatched cycle, {path}:\n{root_rank0(path).to_string()}")
    if args.export:
        _show_export(args.fit_trace, args.export)
    return 0


def _show_export(trace: str, budget: int) -> None:
    from goose_theory.regimeexport import regime_topologies
    from goose_theory.regimefile import unmatched_topology

    _, pair, fit, _ = regime_topologies([trace], benchmark=None, budget=budget, provenance={})
    tree = unmatched_topology(pair)
    print("fitted unmatched root p_t:", [round(x, 4) for x in fit.unmatched.transition_list(0)])
    print("first 15 unmatched slots (depth, rank):",
          [(int(d), int(r)) for d, r in zip(tree.depth[1:16], tree.rank[1:16])])


if __name__ == "__main__":
    raise SystemExit(main())
