"""Theory subcommands of ``goose``: yield, simulate, optimize, compare.

Each handler parses nothing itself: argparse gives strings, :class:`Acceptance` validates the
probabilities (comma-separated lists allowed), the library computes, and the handler prints one
JSON object (``--json``) or a readable table. Bad input exits 2 with one line (see cli_util).
"""
from __future__ import annotations

import argparse
import math
from typing import Any

from .acceptance import Acceptance
from .cli_util import (UsageError, check_not_an_input, check_output_file, count, file_scored, format_table,
                       latency_table_lines, load_latency_option, print_json, regime_note, unpriced_note)
from .topology import PAPER_TOP_K, load_topology, save_topology
from .topometa import MAX_TOP_K  # also a file's top_k

# bound and yields import the numba kernels (0.2 s): each handler imports what it uses, so that
# `goose --help` and the runtime's commands start without them

MAX_BUDGET = 10_000  # the optimal rule takes about 2 ms at 1000 and grows faster than linearly
# depth multiplies the same cost: at budget 10000, depth and spine 64 take about a minute, 128 two
# (10000 x 10000 ran out of memory); the paper's trees stop at depth 6, its spine at 20
MAX_DEPTH = 64
FEW_CYCLES = 100
MAX_CYCLES = 10**11  # about 17 minutes at 100 M cycles/s; 1e20 asked numpy for 43 PiB of chunk keys


def _add_acceptance(p: argparse.ArgumentParser) -> None:
    p.add_argument("--p-s", help="spine acceptance: a probability or a list by spine depth (0.6,0.5,...)")
    p.add_argument("--p-t", help="transition acceptance (under the root; everywhere unless overridden): a "
                   "probability or a list by rank (0.05,0.03,...; its last value repeats up to --top-k)")
    p.add_argument("--p-t-spine", help="transition acceptance under spine nodes, by rank (default: as --p-t)")
    p.add_argument("--p-t-chain", help="transition acceptance under transition nodes, by rank (default: as --p-t)")
    p.add_argument("--acceptance-from", metavar="TOPOLOGY", help="instead of --p-s/--p-t/--p-t-spine/--p-t-chain: "
                   "the acceptance a topology file holds (fit-acceptance --out writes the fitted one, goose optimize "
                   "the one it was given)")
    p.add_argument("--model", help="acceptance model: exclusive (default) or independent")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_shape(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", type=int, required=True, help="non-root nodes of the tree")
    p.add_argument("--max-depth", type=int, default=6, help="depth bound of transition nodes (default 6, the paper's)")
    p.add_argument("--max-spine", type=int, default=20, help="spine length bound (default 20, the paper's)")
    p.add_argument("--top-k", type=int, help="transition candidates per node (default: the --acceptance-from file's, "
                   "else 10, the paper's)")


def register(sub: Any) -> None:
    p = sub.add_parser("yield", help="exact E[tau], Var[tau], pmf and the paper's lower bound of a topology")
    p.add_argument("--topology", required=True, help="goose-topology/1 JSON file")
    p.add_argument("--lbar", default="topology", help="bound's continuation term: topology (default), zero, or a number")
    _add_acceptance(p)
    p.set_defaults(handler=cmd_yield)

    p = sub.add_parser("simulate", help="numba Monte Carlo of verification cycles of a topology")
    p.add_argument("--topology", required=True, help="goose-topology/1 JSON file")
    p.add_argument("--cycles", type=count, default=1_000_000, help="verification cycles to simulate (default 1e6)")
    p.add_argument("--seed", type=int, default=0, help="random seed; the result is the same at any thread count (default 0)")
    p.add_argument("--bursty", metavar="PS_REP,PS_NOVEL,TO_NOVEL,TO_REP",
                   help="two-state Markov regime instead of --p-s: p_s when the text is repetitive / novel, and the "
                        "per-cycle probabilities of switching to novel / to repetitive (p_t and the model come from "
                        "--p-t... or --acceptance-from, whose p_s the regime replaces)")
    _add_acceptance(p)
    p.set_defaults(handler=cmd_simulate)

    p = sub.add_parser("optimize", help="build the tree of a rule at a budget and write it as topology JSON")
    _add_shape(p)
    p.add_argument("--rule", default="optimal", help="optimal (default), linear, harmonic, paper, source-blind, "
                   "isotropic:K, mixed-isotropic:K, uniform-levels (vLLM's kind of tree), or the references "
                   "spine-only and transition-only; --latency makes any of them cost-aware")
    p.add_argument("--latency", help="goose-latency/1 profile: choose the budget (<= --budget) that maximises tokens/s")
    p.add_argument("--out", required=True, help="where to write the topology JSON")
    _add_acceptance(p)
    p.set_defaults(handler=cmd_optimize)

    p = sub.add_parser("compare", help="every rule side by side at one budget")
    _add_shape(p)
    p.add_argument("--topology", action="extend", nargs="+", default=[], metavar="FILE",
                   help="also trees of yours (goose-topology/1; e.g. from goose choices import), each at its own "
                        "budget; several after one flag, or the flag repeated")
    _add_acceptance(p)
    p.set_defaults(handler=cmd_compare)


def _acceptance(args: argparse.Namespace) -> Acceptance:
    """The command line's acceptance: the flags, or --acceptance-from a file (--model may override its model)."""
    flags = [f"--{name.replace('_', '-')}" for name in ("p_s", "p_t", "p_t_spine", "p_t_chain")
             if getattr(args, name) is not None]
    if args.acceptance_from is not None:
        if flags:
            raise UsageError(f"--acceptance-from gives the acceptance; drop {', '.join(flags)}")
        acceptance, top_k = acceptance_of_file(args.acceptance_from)
        if getattr(args, "top_k", 0) is None:  # optimize / compare without --top-k: the file's own, as a fit of
            args.top_k = top_k or PAPER_TOP_K  # three observed ranks must not draft ten (checked on load)
        return acceptance if args.model is None else acceptance.with_model(args.model)
    missing = [flag for flag in ("--p-s", "--p-t") if flag not in flags]
    if missing:
        raise UsageError(f"{' and '.join(missing)} required (or --acceptance-from TOPOLOGY)")
    model = "exclusive" if args.model is None else args.model  # '' is refused as unknown, not taken as the default
    return Acceptance.parse(args.p_s, args.p_t, model, p_t_spine=args.p_t_spine, p_t_chain=args.p_t_chain)


def acceptance_of_file(path: str) -> tuple[Acceptance, int | None]:
    """The ``acceptance`` and ``top_k`` (None: not recorded) a topology file holds, checked on load (topometa).

    Example:
        >>> import os, tempfile
        >>> from goose_theory.topology import Topology
        >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
        >>> save_topology(Topology.root_only(meta={"acceptance": {"p_s": 0.5, "p_t": [0.1, 0.05]}}), path)
        >>> acceptance_of_file(path)[0].p_t, acceptance_of_file(path)[1]
        ((0.1, 0.05), None)
    """
    meta = load_topology(path).meta
    data = meta.get("acceptance")
    if data is None:
        raise UsageError(f"--acceptance-from {path}: the file holds no 'acceptance' (goose optimize and "
                         f"fit-acceptance --out write one)")
    return Acceptance.from_dict(data), meta.get("top_k")


def _check_shape(args: argparse.Namespace) -> None:
    if args.top_k is None:  # left out, and no --acceptance-from file gave one (_acceptance runs first)
        args.top_k = PAPER_TOP_K
    for name in ("budget", "max_depth", "max_spine", "top_k"):
        value = getattr(args, name)
        if value < 0 or (name == "top_k" and value < 1):
            raise UsageError(f"--{name.replace('_', '-')} must be {'>= 1' if name == 'top_k' else '>= 0'}, got {value}")
    if args.budget > MAX_BUDGET:
        raise UsageError(f"--budget must be at most {MAX_BUDGET}, got {args.budget}")
    if args.top_k > MAX_TOP_K:
        raise UsageError(f"--top-k must be at most {MAX_TOP_K}, got {args.top_k}")
    for name in ("max_depth", "max_spine"):
        if getattr(args, name) > MAX_DEPTH:
            raise UsageError(f"--{name.replace('_', '-')} must be at most {MAX_DEPTH}, got {getattr(args, name)}")


def cmd_yield(args: argparse.Namespace) -> int:
    from .bound import paper_lower_bound
    from .yields import exact_yield
    topology, acceptance = load_topology(args.topology), _acceptance(args)
    lbar: str | float = args.lbar
    if lbar not in ("topology", "zero"):
        try:
            lbar = float(lbar)
        except ValueError:
            raise UsageError(f"--lbar: {args.lbar!r} is not 'topology', 'zero' or a number") from None
        if not (math.isfinite(lbar) and lbar >= 0):
            raise UsageError(f"--lbar: {args.lbar!r} must be a finite non-negative number")
    result = file_scored(args.topology, exact_yield, topology, acceptance)
    bound = paper_lower_bound(topology, acceptance, lbar=lbar)
    regime_note(topology, args.topology, "scores")  # after the scoring: a tree it refuses is one line
    out = {"exact": result.expected_tau, "variance": result.variance, "std": result.std,
           "lower_bound": float(bound.lower_bound), "gap": float(bound.gap), "lbar": bound.lbar,
           "lbar_rule": bound.lbar_rule, "pmf": result.pmf.tolist(), "budget": topology.budget,
           "model": acceptance.model}
    if args.json:
        print_json(out)
    else:
        print(f"E[tau] = {out['exact']:.6f}   Var = {out['variance']:.6f}   ({acceptance.model} model, budget {topology.budget})")
        how = {"topology": "the smallest expected continuation below a first-level branch node of this tree"
               if bound.widths[:bound.spine_length].sum() else "no branch node leaves the spine before its end, so 0",
               "zero": "the plain bound"}.get(bound.lbar_rule, "given")
        print(f"paper lower bound = {out['lower_bound']:.6f} (lbar = {bound.lbar:.4g}: {how}); gap {out['gap']:.6f}")
        if how == "given" and out["gap"] < -1e-9:  # the given lbar is larger than the continuations below branches
            print(f"note: the given lbar puts the bound above E[tau]: it bounds E[tau] only for an lbar up to the "
                  f"continuations below the tree's branches (--lbar topology takes {paper_lower_bound(topology, acceptance).lbar:.4g})")
        print(format_table([{"tau": k, "P(tau)": p} for k, p in enumerate(out["pmf"]) if k > 0]))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    bursty = args.bursty is not None
    if bursty and args.p_s is not None:
        raise UsageError("--bursty sets p_s per regime (PS_REP, PS_NOVEL); drop --p-s")
    if not bursty and args.p_s is None and args.acceptance_from is None:
        raise UsageError("--p-s is required (or --bursty PS_REP,PS_NOVEL,TO_NOVEL,TO_REP, or --acceptance-from)")
    if not 1 <= args.cycles <= MAX_CYCLES:
        raise UsageError(f"--cycles must be in 1..{MAX_CYCLES:.0e}, got {args.cycles}")  # 1e+11 is a --cycles value too
    from .simulate import BurstyRegime, simulate, simulate_bursty
    from .yields import exact_yield
    if bursty:
        try:
            parts = [float(x) for x in args.bursty.split(",")]
        except ValueError:
            raise UsageError(f"--bursty: {args.bursty!r} is not four comma-separated probabilities") from None
        if len(parts) != 4:
            raise UsageError(f"--bursty needs four comma-separated probabilities, got {len(parts)}")
        regime = BurstyRegime(*parts)  # names a value that is not a probability
        if args.acceptance_from is None:  # a placeholder: the simulator replaces p_s per regime
            args.p_s = str(regime.p_s_repetitive)
    topology, acceptance = load_topology(args.topology), _acceptance(args)
    if bursty:
        result = file_scored(args.topology, simulate_bursty, topology, acceptance, regime, cycles=args.cycles, seed=args.seed)
        exact = result.iid_mixture_tau
    else:
        exact = file_scored(args.topology, exact_yield, topology, acceptance).expected_tau  # first: names the file
        result = simulate(topology, acceptance, cycles=args.cycles, seed=args.seed)
    regime_note(topology, args.topology, "simulates")
    out = {"mean": result.mean, "std": result.std, "ci95": list(result.ci95), "cycles": result.cycles,
           "seed": args.seed, "exact": exact, "histogram": result.histogram.tolist(), "model": acceptance.model}
    if bursty:
        out.update(fraction_repetitive=result.fraction_repetitive, lag1_autocorrelation=result.lag1_autocorrelation)
    if args.json:
        print_json(out)
    else:
        print(f"mean tau = {result.mean:.6f}  95% CI [{result.ci95[0]:.6f}, {result.ci95[1]:.6f}]  "
              f"std {result.std:.4f}  ({result.cycles} cycle{'s' if result.cycles > 1 else ''}, seed {args.seed})")
        if result.cycles < FEW_CYCLES:  # the normal interval needs many cycles (it was [1, 1] at one)
            print(f"note: {result.cycles} cycle{'s are' if result.cycles > 1 else ' is'} too few for the normal 95% "
                  f"interval; use at least {FEW_CYCLES}")
        label = "stationary-mixture E[tau]" if bursty else "exact E[tau]"
        print(f"{label} = {exact:.6f}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    acceptance = _acceptance(args)  # first: a file's top_k is --top-k's default
    _check_shape(args)
    check_output_file(args.out, "--out")
    check_not_an_input(args.out, "--out", {"--latency": args.latency, "--acceptance-from": args.acceptance_from})
    from .optimize import build_topology
    shape = dict(max_depth=args.max_depth, max_spine=args.max_spine, top_k=args.top_k)
    extra: dict[str, Any] = {}
    if args.latency is not None:  # an empty path is refused, not taken as "not given"
        if not args.latency:
            raise UsageError(f"--latency: {args.latency!r} is empty (give a goose-latency/1 file or leave the flag out)")
        from .latency import cost_aware
        profile = load_latency_option(args.latency)
        low, top = profile.sizes[0] - 1, min(args.budget, max(profile.sizes) - 1)  # the trees it can price
        if top < low:
            raise UsageError(f"--latency {args.latency}: it measures trees of {profile.sizes[0]}..{profile.sizes[-1]} "
                             f"tokens, none of them within --budget {args.budget} + 1")
        choice = cost_aware(acceptance, profile, rule=args.rule, budgets=range(low, top + 1), **shape)
        result = choice.best
        extra = {"cost_aware": True, "chosen_budget": result.budget, "latency_table": choice.table,
                 "priced_budgets": [low, top]}
    else:
        result = build_topology(args.rule, acceptance, budget=args.budget, **shape)
    chosen = {"cost_aware": True, "chosen_budget": result.budget} if extra else {}
    topology = result.topology.with_meta(rule=result.rule, predicted_tau=result.predicted_tau,
                                         acceptance=acceptance.to_dict(), requested_budget=args.budget, **chosen)
    save_topology(topology, args.out)
    truncated = list(result.details.get("truncated") or [])
    # the tree's own budget: a small candidate tree (or a cost-aware choice) may hold fewer nodes
    out = {"predicted_tau": result.predicted_tau, "rule": result.rule, "budget": topology.budget,
           "requested_budget": args.budget, "out": args.out, "truncated": truncated, **extra}
    if args.json:
        print_json(out)
    else:
        print(f"{result.rule}: budget {topology.budget}{_requested(topology.budget, args.budget, result.budget if extra else None)}, "
              f"predicted E[tau] = {result.predicted_tau:.4f} -> {args.out}")
        if truncated:
            more = f" (and {len(truncated) - 1} more like it; all in the file's 'truncated')" if len(truncated) > 1 else ""
            print(f"note: {truncated[0]}{more}")
        if extra:
            # the chosen row is the budget the scan priced; its tree may hold fewer nodes (the rule's shape ends)
            print("\n".join(latency_table_lines(extra["latency_table"], chosen=result.budget)))
            if top < args.budget:  # the profile cannot price larger trees (no extrapolation)
                print(f"note: --latency {args.latency} {unpriced_note(max(profile.sizes), args.budget)}")
    return 0


def _requested(budget: int, requested: int, chosen: int | None = None) -> str:
    if chosen is not None and chosen != budget:  # cost-aware: the rule's shape ended before the chosen budget did
        return f" (requested {requested}; the cost-aware choice is the rule's tree at budget {chosen}, {budget} nodes)"
    return "" if budget == requested else f" (requested {requested})"


def cmd_compare(args: argparse.Namespace) -> int:
    acceptance = _acceptance(args)  # first: a file's top_k is --top-k's default
    _check_shape(args)
    from .optimize import compare_rules, too_wide
    from .yields import exact_yield
    results = compare_rules(acceptance, budget=args.budget, max_depth=args.max_depth,
                            max_spine=args.max_spine, top_k=args.top_k)
    trees = [(r.rule, r.topology, r.predicted_tau) for r in results]  # each its own budget (a rule may build fewer)
    for path in args.topology:  # loaded and priced before anything is printed: a bad file is one line
        topology = load_topology(path)
        trees.append((f"topology:{path}", topology, file_scored(path, exact_yield, topology, acceptance).expected_tau))
        regime_note(topology, path, "prices")
    rows = [{"rule": rule, "budget": topology.budget, "predicted_tau": tau, "spine_length": topology.spine_length,
             "widths": ",".join(str(w) for w in topology.first_level_widths[:8])} for rule, topology, tau in trees]
    if args.json:
        print_json({"budget": args.budget, "acceptance": acceptance.to_dict(), "rules": rows})
    else:
        print(format_table(rows))
        print("widths: transition children of the root, then of spine nodes 1, 2, ... (the first 8)")
        short = [row["rule"] for row in rows[:len(results)] if row["budget"] != args.budget]
        if short:
            print(f"note: budget is each tree's node count; {', '.join(short)} built fewer than --budget {args.budget}")
        if wide := too_wide(args.top_k):
            print(f"note: {', '.join(wide)} left out: K is above --top-k {args.top_k}")
        if any(r.details.get("truncated") for r in results):
            print("note: the exclusive model caps the ranks a tree may use where p_s + the p_t of all top-k ranks would "
                  "exceed 1 (goose optimize names them)")
    return 0
