"""How often the adjacency table has nothing to draft, and how well the model's prior would fill in.

For each validation trace (held-out runs of ``goose validate``), over the cycles of one tree method
without a context match: the share that verified the root alone (the table had no row for the
anchor token), and, for those cycles, where the token the target then emitted ranks in the prior's
top-k of the anchor (``goose_runtime.prior``), for the chat prefix the runtime uses and, with
``--code-prefix``, a code prefix for comparison. The emitted token is the next cycle's anchor.

    .venv/bin/python bench/bench_prior.py traces/large/validation-mtbench-holdout40.parquet \\
        traces/large/validation-humaneval-holdout82.parquet --code-prefix
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import torch

from goose_runtime.model import load_model
from goose_runtime.prior import build_prior, load_or_build_prior

CODE_PREFIX = "def main():\n    x = "


def bare_cycles(path: str, method: str) -> tuple[pd.DataFrame, int]:
    """Unmatched cycles of ``method`` that verified the root alone, with the token emitted next;
    and the number of unmatched cycles."""
    cols = ["prompt_id", "method", "cycle", "node", "token", "spine_avail"]
    t = pq.read_table(path, columns=cols).to_pandas()
    t = t[t["method"] == method]
    size = t.groupby(["prompt_id", "cycle"]).size().rename("n_nodes")
    roots = t[t["node"] == 0].set_index(["prompt_id", "cycle"]).join(size).sort_index()
    roots["next"] = roots.groupby(level=0)["token"].shift(-1)
    unmatched = roots[roots["spine_avail"].fillna(-1) == 0]
    bare = unmatched[(unmatched["n_nodes"] == 1) & unmatched["next"].notna()]
    return bare, len(unmatched)


def hit_ranks(tokens: np.ndarray, bare: pd.DataFrame) -> np.ndarray:
    """Share of ``bare`` cycles whose emitted token is the prior's rank r (last entry: not in top-k)."""
    k = tokens.shape[1]
    hits = np.zeros(k + 1)
    for anchor, emitted in zip(bare["token"].to_numpy(), bare["next"].to_numpy()):
        where = np.flatnonzero(tokens[int(anchor)] == int(emitted))
        hits[where[0] if len(where) else k] += 1
    return hits / max(len(bare), 1)


def code_prior(bundle, top_k: int) -> np.ndarray:
    """The prior's tokens with a code prefix instead of the chat opening (same build)."""
    prefix = bundle.tokenizer(CODE_PREFIX, add_special_tokens=False)["input_ids"]
    return build_prior(bundle, top_k=top_k, prefix=prefix).tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", help="validation traces (goose validate --trace-out / goose loop)")
    parser.add_argument("--method", default="goose@15", help="tree method whose cycles to read (default goose@15)")
    parser.add_argument("--code-prefix", action="store_true", help="also rate a prior built after a code prefix")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    bundle = load_model()
    priors = {"chat": load_or_build_prior(bundle, top_k=10).tokens}
    if args.code_prefix:
        priors["code"] = code_prior(bundle, 10)
    for path in args.traces:
        bare, n_unmatched = bare_cycles(path, args.method)
        print(f"{path}: {args.method}, {n_unmatched} unmatched cycles, {len(bare)} verified the root alone "
              f"({len(bare) / max(n_unmatched, 1):.1%})")
        for name, tokens in priors.items():
            hits = hit_ranks(tokens, bare)
            print(f"  {name} prefix: emitted token at prior rank 0..9 {np.round(hits[:-1], 3).tolist()}, "
                  f"in the top 10 {1 - hits[-1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
