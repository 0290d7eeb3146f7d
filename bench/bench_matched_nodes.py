"""Nodes placed and tokens per cycle in matched cycles, by the match length the matcher offered,
per method of a trace (docs/two-regime.md section 13).

A cycle is *confident* when the match was confident and offered >= 8 tokens (goose's bypass
condition), *matched* when it offered >= 1 token otherwise, *unmatched* else. For matched cycles
the table splits by offered length (8 and more pooled): a fixed tree drops spine slots past the
offer, so a short match shows up as few nodes placed.

    .venv/bin/python bench/bench_matched_nodes.py traces/large/validation-stdlib-wide-holdout197.parquet
"""
from __future__ import annotations

import argparse

import pandas as pd
import pyarrow.parquet as pq

COLUMNS = ["method", "prompt_id", "cycle", "node", "source", "tau", "confident", "spine_avail"]


def cycles(path: str, methods: list[str] | None) -> pd.DataFrame:
    """One row per cycle: nodes placed (root included), spine nodes, tau, regime, offered length."""
    frame = pq.read_table(path, columns=COLUMNS).to_pandas()
    if methods:
        frame = frame[frame["method"].isin(methods)]
    # shorter labels: topology:topology-X -> file:X
    frame = frame.assign(spine=frame["source"] == "spine",
                         method=frame["method"].str.replace("topology:topology-", "file:", regex=False))
    out = frame.groupby(["method", "prompt_id", "cycle"], sort=False).agg(
        nodes=("node", "size"), spine=("spine", "sum"), tau=("tau", "first"), confident=("confident", "first"),
        offered=("spine_avail", "first")).reset_index()
    out["regime"] = "unmatched"
    out.loc[out["offered"] > 0, "regime"] = "matched"
    out.loc[(out["confident"] == 1) & (out["offered"] >= 8), "regime"] = "confident"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--methods", nargs="*", help="only these methods, as recorded (default: every method with a matcher)")
    args = p.parse_args(argv)
    table = cycles(args.trace, args.methods)
    table = table[table["offered"] >= 0]  # methods without a matcher record -1
    pd.set_option("display.width", 200)
    by_regime = table.groupby(["method", "regime"]).agg(cycles=("nodes", "size"), nodes=("nodes", "mean"),
                                                         spine=("spine", "mean"), tau=("tau", "mean"))
    print(by_regime.round(3).to_string())
    matched = table[table["regime"] == "matched"]
    by_length = matched.groupby(["method", matched["offered"].clip(upper=8).rename("offered (8: >= 8)")]).agg(
        cycles=("nodes", "size"), nodes=("nodes", "mean"), tau=("tau", "mean"))
    print()
    print(by_length.round(2).unstack(0).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
