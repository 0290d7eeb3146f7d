"""``goose choices export|import``: topologies as the tree choices of Medusa, EAGLE, TensorRT-LLM, vLLM.

``export TOPOLOGY.json [--out FILE] [--format list|vllm] [--regime unmatched [--all-slots]]`` prints
(or writes) the rank paths of a transition-only tree (or of a regime file's unmatched tree, cut to the file's budget);
``import CHOICES --out TOPOLOGY.json`` turns a choices list (JSON or a Python literal) into a
``goose-topology/1`` file that ``goose yield``, ``compare`` and ``decode --method topology:FILE``
read. See :mod:`goose_theory.choices` for the convention.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .choices import ChoicesError, choices_from_topology, choices_text, load_choices, portability_notes
from .cli_util import UsageError, check_not_an_input, check_output_file, print_json
from .fileio import write_text_atomic
from .topology import Topology, load_topology, save_topology


def register(sub: Any) -> None:
    p = sub.add_parser("choices", help="convert between topology JSON and the tree choices (rank paths) of "
                                       "Medusa, EAGLE, TensorRT-LLM and vLLM")
    way = p.add_subparsers(dest="direction", metavar="DIRECTION")
    e = way.add_parser("export", help="a transition-only topology as a choices list [[0], [1], [0, 0], ...]")
    e.add_argument("topology", help="goose-topology/1 JSON file (no spine nodes)")
    e.add_argument("--out", help="write the list to this file (default: print it)")
    e.add_argument("--format", choices=["list", "vllm"], default="list", help="list (default): the rank paths as "
                   "JSON, as Medusa, EAGLE and TensorRT-LLM take them; vllm: the speculative_config entries "
                   "speculative_token_tree (a string of tuples, breadth-first) and num_speculative_tokens")
    e.add_argument("--regime", choices=["unmatched"], help="of a regime file (fit-acceptance --regimes): export "
                   "its unmatched tree, the one drafted without a context match (its other trees have a spine): "
                   "its first BUDGET slots in goose's fill order, as goose drafts it when every slot has a candidate")
    e.add_argument("--all-slots", action="store_true", help="with --regime unmatched: every slot of the tree, the "
                   "spare ones past the file's budget included (goose fills them only where earlier slots found no "
                   "candidate)")
    e.set_defaults(handler=cmd_export)
    i = way.add_parser("import", help="a choices list (JSON or Python literal, e.g. [(0,), (1,), (0, 0)]) as "
                                      "topology JSON")
    i.add_argument("choices", help="file holding the list, a runtime's JSON config holding it, or a Python source "
                                   "such as Medusa's medusa_choices.py")
    i.add_argument("--name", help="the entry of a JSON config, or the NAME = [...] list of a Python source, to take")
    i.add_argument("--out", required=True, help="where to write the topology JSON")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(handler=cmd_import)
    p.set_defaults(handler=_need_direction)


def _need_direction(args: argparse.Namespace) -> int:
    raise UsageError("goose choices: say export TOPOLOGY.json or import CHOICES --out TOPOLOGY.json")


def cmd_export(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    check_not_an_input(args.out, "--out", {"the TOPOLOGY file": args.topology})
    from .regimefile import unmatched_topology  # here: the regime modules are not for every command's start-up

    topology = load_topology(args.topology)
    unmatched = unmatched_topology(topology)
    if args.regime == "unmatched":
        if unmatched is None:
            raise UsageError(f"--regime unmatched: {args.topology} is not a regime file with an unmatched tree "
                             f"(fit-acceptance --regimes --out writes one)")
        topology = unmatched if args.all_slots else _budget_cut(unmatched, topology.budget, args.topology)
    elif args.all_slots:
        raise UsageError("--all-slots goes with --regime unmatched (a plain tree has no spare slots)")
    try:
        paths = choices_from_topology(topology)
    except ChoicesError as exc:
        hint = ("; it is a regime file: --regime unmatched exports its tree without spine"
                if unmatched and topology.spine_length else "")  # the spine refusal's advice, and only that
        raise ChoicesError(f"{args.topology}: {exc}{hint}") from None
    if args.format == "vllm" and not paths:  # docs/tree-choices.md: vLLM fails on "[]"
        raise UsageError(f"{args.topology}: the tree has no node past the root, and vLLM refuses an empty "
                         "speculative_token_tree")
    text = choices_text(paths) if args.format == "list" else vllm_config_text(paths)
    if args.out is None:
        print(text, end="")
    else:
        write_text_atomic(args.out, text)
        print(f"{len(paths)} paths, depth {max(map(len, paths), default=0)} -> {args.out}")
    for note in portability_notes(paths):  # stderr: stdout stays the bare list a config can take
        print(f"note: {note}", file=sys.stderr)
    return 0


def vllm_config_text(paths: list) -> str:
    """vLLM's ``speculative_config`` entries for the tree, one JSON line to merge into the config: the
    paths as a string of Python tuples, sorted breadth-first as vLLM sorts them, and
    ``num_speculative_tokens``, the node count vLLM's tree proposer is given with it.

    Example:
        >>> vllm_config_text([[0], [0, 0], [1]])
        '{"num_speculative_tokens": 3, "speculative_token_tree": "[(0,), (1,), (0, 0)]"}\\n'
    """
    tree = sorted((tuple(p) for p in paths), key=lambda t: (len(t), t))
    return json.dumps({"num_speculative_tokens": len(tree), "speculative_token_tree": str(tree)}) + "\n"


def _budget_cut(unmatched: Topology, budget: int, name: str) -> Topology:
    """The unmatched tree as goose drafts it where every slot finds a candidate: its first ``budget``
    slots in the fill order (a regime file gives it up to twice the file's budget in spare slots,
    which a runtime that drafts every path of a list, such as vLLM's or Medusa's, would all verify)."""
    from .regimefill import first_nodes

    if unmatched.budget <= budget:
        return unmatched
    print(f"note: {name}'s unmatched tree has {unmatched.budget} slots for the file's budget of {budget}: goose fills "
          f"them in order and stops at {budget} nodes, using the spare ones where a slot finds no candidate; "
          f"exported: the first {budget} (--all-slots: all {unmatched.budget})", file=sys.stderr)
    return first_nodes(unmatched, budget)


def cmd_import(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    check_not_an_input(args.out, "--out", {"the CHOICES file": args.choices})
    topology = load_choices(args.choices, name=args.name)
    save_topology(topology, args.out)
    summary = {"budget": topology.budget, "depth": int(topology.depth.max()), "max_rank": max(topology.rank),
               "out": args.out}
    if args.json:
        print_json(summary)
    else:
        print(f"{topology.budget} nodes, depth {summary['depth']}, highest rank {summary['max_rank']} -> {args.out}")
    return 0
