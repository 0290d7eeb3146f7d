"""``goose``: one entry point, one module per family of subcommands.

Theory commands (yield, simulate, optimize, compare) live in :mod:`goose_theory.cli` and never
import torch; runtime commands import torch lazily, inside their handlers, so ``goose yield``
starts fast.
"""
from __future__ import annotations

import importlib
import sys

from goose_theory.cli_util import make_parser, run_command

# (module, description) -- each module defines register(subparsers) that adds its subcommands
# and sets ``handler`` on each subparser.
COMMAND_MODULES = (
    "goose_theory.cli",
    "goose_theory.choices_cli",
    "goose_runtime.decode_cli",
    "goose_runtime.record_cli",
    "goose_runtime.validate_cli",
    "goose_runtime.loop_cli",
    "goose_runtime.app_cli",
)


def build_parser():
    parser = make_parser("goose", "Goose speculation trees: theory, simulation, decoding and validation.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a family not built yet
        module.register(sub)
    parser.set_defaults(command_names=tuple(sub.choices))  # for the message when none is given
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "handler", None):  # one line, as every other bad input (the help went to stdout)
        commands = ", ".join(args.command_names)
        print(f"error: goose: a command is needed, one of {commands} (goose --help says what each does)",
              file=sys.stderr)
        return 2
    return run_command(args.handler, args)


if __name__ == "__main__":
    sys.exit(main())
