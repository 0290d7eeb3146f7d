"""Where a regime file's prediction misses: the figures of docs/two-regime.md section 10.

From a validation trace (``goose validate --trace-dir``), per method: emitted against accepted
tokens per cycle (the token cap cuts each prompt's last cycle), and the cycles split by kind
(confident match, other match, none) with their accepted tokens, the tokens the matcher offered,
and per-depth spine acceptance: for every method with a matcher where the trace has the
``confident`` column, for goose alone (its ``bypass``) in older traces. With ``--file`` (a regime
file of ``goose loop``) and ``--tail P``, the file's stored prediction re-priced with the matched regime's
spine acceptance set to P from depth ``--from`` on (the fit repeats its last measured value there).

    .venv/bin/python bench/bench_regime_miss.py traces/large/validation-stdlib-wide-fitted40.parquet \\
        --file bench/results/topology-stdlib-wide-regimes_2026-11-30.json --tail 0.908 --from 6,8
"""
from __future__ import annotations

import argparse
import sys

from goose_theory.acceptance import Acceptance
from goose_theory.regime import regime_tau
from goose_theory.regimefile import confident_topology, matched_by_length, matched_topology, unmatched_topology
from goose_theory.regimespare import SpineModel
from goose_theory.topology import load_topology
from goose_theory.traceio import open_trace


def read_nodes(path: str):
    """The trace's node rows with the columns this script uses (``confident`` where the file has it)."""
    pf = open_trace(path)
    columns = ["method", "prompt_id", "cycle", "node", "accepted", "tau", "bypass", "spine_avail", "source",
               "spine_pos", "reached", "match"]
    try:
        return pf.read(columns=columns + (["confident"] if "confident" in pf.schema_arrow.names else [])).to_pandas()
    finally:
        pf.close()


def cycle_table(nodes):
    """One row per (method, prompt, cycle): emitted tau, accepted tokens, spine_avail, and ``conf``:
    a confident match of >= 8 tokens (the condition of goose's bypass and of a regime file's
    confident tree) from the ``confident`` column where the trace has it, else goose's ``bypass``;
    ``labelled``: whether this method's cycles carry that label (a matcher, or goose)."""
    has_conf = "confident" in nodes.columns
    keys = ["method", "prompt_id", "cycle"]
    roots = nodes[nodes["node"] == 0].set_index(keys)
    if has_conf:
        roots = roots.assign(conf=roots["confident"].eq(True) & (roots["spine_avail"] >= 8),
                             labelled=roots["confident"].notna())
    else:
        roots = roots.assign(conf=roots["bypass"], labelled=roots.groupby(level="method")["bypass"].transform("any"))
    roots = roots[["tau", "spine_avail", "conf", "labelled"]]
    return roots.join(nodes.groupby(keys)["accepted"].sum().rename("accepted"))  # root included: the bonus


def report_trace(path: str) -> None:
    nodes = read_nodes(path)
    cycles = cycle_table(nodes)
    for method, c in cycles.groupby(level="method"):
        print(f"{method:40} cycles {len(c):5d}  emitted {c['tau'].mean():.3f}  accepted {c['accepted'].mean():.3f}")
        if not c["labelled"].all() or not c["conf"].any():
            continue
        kinds = {"confident": c["conf"], "other matched": (c["spine_avail"] > 0) & ~c["conf"],
                 "unmatched": c["spine_avail"] == 0}
        for kind, sel in kinds.items():
            offered = c.loc[sel, "spine_avail"]
            print(f"    {kind:14} cycles {int(sel.sum()):5d}  emitted {c.loc[sel, 'tau'].mean():.3f}  "
                  f"accepted {c.loc[sel, 'accepted'].mean():.3f}  offered {offered.mean():.2f} tokens, "
                  f"<= 2 in {(offered <= 2).mean():.2f}")
    labelled = cycles[cycles["labelled"]]
    other = labelled[(labelled["spine_avail"] > 0) & ~labelled["conf"]].reset_index()[["method", "prompt_id", "cycle"]]
    confident = labelled[labelled["conf"]].reset_index()[["method", "prompt_id", "cycle"]]
    reached = nodes[(nodes["source"] == "spine") & nodes["reached"]]
    for kind, chosen in (("other matched", other), ("confident", confident)):
        for method, s in reached.merge(chosen, on=["method", "prompt_id", "cycle"]).groupby("method"):
            rates = s.groupby("spine_pos")["match"].agg(["mean", "size"])
            print(f"{method}: {kind} spine acceptance by depth "
                  + ", ".join(f"{d}: {r['mean']:.2f} ({int(r['size'])})" for d, r in rates.iterrows()))


def reprice(path: str, tail: float, starts: list[int]) -> None:
    topo = load_topology(path)
    fit = topo.meta["regime_fit"]
    spines = [SpineModel.from_dict(s) if s else None for s in fit["spines"]]
    fill = (fit["fill"]["root"], fit["fill"]["spine"], fit["fill"]["transition"])
    matched, unmatched = Acceptance.from_dict(fit["matched"]), Acceptance.from_dict(fit["unmatched"])
    confident_tree, _ = confident_topology(topo)

    def price(spine: SpineModel, acceptance: Acceptance):
        return regime_tau(matched_topology(topo) or topo, acceptance, unmatched, fit["psi"], unmatched_topology(topo),
                          confident=Acceptance.from_dict(fit["confident"]), psi_confident=fit["psi_confident"],
                          confident_topology=confident_tree, fill=fill, budget=topo.budget, spines=(spine, spines[1]),
                          by_length=matched_by_length(topo) or ())
    base = price(spines[0], matched)
    print(f"stored fit: predicted {base.tau:.3f}, matched regime {base.tau_matched:.3f}; spine p_s by depth, "
          f"matched {[round(x, 3) for x in spines[0].p_s]}, confident {[round(x, 3) for x in spines[1].p_s]}")
    for start in starts:
        spine = SpineModel(tuple(spines[0].p_s[:start - 1]) + (tail,), spines[0].avail, spines[0].end)
        acceptance = Acceptance.parse(spine.effective(), matched.p_t, "exclusive", p_t_spine=matched.p_t_spine,
                                      p_t_chain=matched.p_t_chain)
        r = price(spine, acceptance)
        print(f"matched p_s = {tail} from depth {start}: predicted {r.tau:.3f}, matched regime {r.tau_matched:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", help="a validation trace (goose validate --trace-dir)")
    p.add_argument("--file", help="a regime file of goose loop, to re-price")
    p.add_argument("--tail", type=float, default=0.908)
    p.add_argument("--from", dest="starts", default="6,8", help="depths from which the tail value applies")
    args = p.parse_args(argv)
    report_trace(args.trace)
    if args.file:
        reprice(args.file, args.tail, [int(x) for x in args.starts.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
