"""How often a retrieval store's guess is right in unmatched cycles, and right where the table is not.

For each validation trace (held-out runs of ``goose validate``) and one tree method in it, over the
cycles without a context match: the share where the table drafted nothing (no row for the anchor),
the share whose root children
from the adjacency table include the token the target emitted next (any child / the rank-0 child /
rank 0 or 1), the share where the store's guess (``goose_runtime.store``, built from ``--corpus`` or
the default corpus) is that token, and where it is while no root child of the table is; and how
often the guess is right by the length of the context it came from and by its share (the bins of
``auto+store``'s calibration classes). Decoding is
lossless, so ``ar``'s roots in the same file are the text: the context of a cycle is the prompt and
that text up to the cycle's anchor.

    .venv/bin/python bench/bench_store.py traces/large/validation-humaneval-holdout82.parquet \\
        traces/large/validation-mtbench-holdout40.parquet --method goose@15
    # GOOSE_CACHE_DIR=$(mktemp -d) in front: the store is built, not read, and its build is timed
"""
from __future__ import annotations

import argparse
import collections
import time

import pyarrow.parquet as pq

from goose_runtime.dyntree import STORE_KEY, STORE_SHARE_EDGES, Calibration
from goose_runtime.model import load_model
from goose_runtime.prompts import encode_prompt, load_prompts
from goose_runtime.store import ORDERS, shared_store


def unmatched_hits(path: str, method: str, store, bundle) -> collections.Counter:
    cols = ["benchmark", "prompt_id", "method", "cycle", "node", "parent", "token", "tau", "spine_avail"]
    t = pq.read_table(path, columns=cols).to_pandas()
    bench = str(t["benchmark"].iloc[0])
    prompts = {p.id: p for p in load_prompts(bench)}
    out = collections.Counter()
    for pid, g in t.groupby("prompt_id"):
        ar = g[(g["method"] == "ar") & (g["node"] == 0)].sort_values("cycle")["token"].tolist()
        text = encode_prompt(bundle, prompts[str(pid)])[:-1] + ar  # the prompt's last token is ar's first root
        base = len(text) - len(ar)
        m = g[g["method"] == method]
        pos = 0
        for _, cyc in m.groupby("cycle", sort=True):
            done, pos = pos, pos + int(cyc["tau"].iloc[0])  # tokens emitted before / after this cycle
            if done + 1 >= len(ar) or int(cyc["spine_avail"].iloc[0]) != 0:
                continue  # the last cycle (its next token is not in the trace) and matched cycles
            kids = cyc[cyc["parent"] == 0].sort_values("node")["token"].tolist()
            nxt = ar[done + 1]  # ar[k] is the anchor after k emitted tokens
            context = text[: base + done + 1]
            t0 = time.perf_counter()
            guess, order, share = store.guess(context)
            out["lookup ns"] += round(1e9 * (time.perf_counter() - t0))
            out[f"order {order}"] += 1
            out[f"order {order} right"] += guess == nxt
            if guess >= 0:
                b = Calibration.store_key(share) - STORE_KEY
                out[f"share {b}"] += 1
                out[f"share {b} right"] += guess == nxt
                out[f"share {b} right, table none"] += guess == nxt and nxt not in kids
            out["cycles"] += 1
            out["bare"] += not kids  # the table had no row for the anchor: nothing drafted
            out["table any"] += nxt in kids
            out["table rank 0"] += kids[:1] == [nxt]
            out["table rank 0 or 1"] += nxt in kids[:2]
            out["store"] += guess == nxt
            out["store, table none"] += guess == nxt and nxt not in kids
            out["table rank 0 or store"] += kids[:1] == [nxt] or guess == nxt
            out["store, bare cycle"] += guess == nxt and not kids
            out["root children"] += len(kids)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--method", default="goose@15", help="the tree method whose unmatched cycles are read")
    ap.add_argument("--corpus", action="append", help="store corpus (default: the runtime's default)")
    args = ap.parse_args()
    bundle = load_model()
    t0 = time.perf_counter()
    store = shared_store(bundle, tuple(args.corpus or ()), log=print)
    # built (the log line above says so) or read from the goose cache; GOOSE_CACHE_DIR=<empty dir> builds it
    print(f"store: {store.n_tokens:,} corpus tokens, {store.n_contexts:,} contexts, "
          f"{time.perf_counter() - t0:.1f} s to build or load")
    for path in args.traces:
        hits = unmatched_hits(path, args.method, store, bundle)
        n = hits.pop("cycles")
        kids, bare, lookup_ns = hits.pop("root children"), hits.pop("bare"), hits.pop("lookup ns")
        orders = {k: hits.pop(k) for k in sorted(hits) if k.startswith("order")}
        shares = {k: hits.pop(k) for k in sorted(hits) if k.startswith("share")}
        print(f"\n{path}: {args.method}, {n} unmatched cycles, {bare / n:.3f} of them bare (no table row), "
              f"{kids / n:.2f} table children under the root; a lookup took {lookup_ns / n / 1e3:.1f} us on average")
        for name, value in hits.items():
            print(f"  next token is {name:<24} {value / n:.3f}")
        for order in range(ORDERS + 1):  # by the length of the context the guess came from (0: none)
            seen = orders.get(f"order {order}", 0)
            if seen and order == 0:
                print(f"  no guess (the anchor never followed twice by one token): {seen / n:.3f} of the cycles")
            elif seen:
                print(f"  guess from a {order}-token context: {seen / n:.3f} of the cycles, "
                      f"right in {orders.get(f'order {order} right', 0) / seen:.3f} of them")
        edges = (0.0, *STORE_SHARE_EDGES, 1.0)
        for b in range(len(edges) - 1):  # by the guess's share of its context's followers in the corpus
            seen = shares.get(f"share {b}", 0)
            if seen:
                print(f"  guess with a share in [{edges[b]:.2f}, {edges[b + 1]:.2f}{']' if b == len(edges) - 2 else ')'}: "
                      f"{seen / n:.3f} of the cycles, right in {shares.get(f'share {b} right', 0) / seen:.3f} of them, "
                      f"right while no table child is in {shares.get(f'share {b} right, table none', 0) / seen:.3f}")


if __name__ == "__main__":
    main()
