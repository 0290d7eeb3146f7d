"""Every `goose` / `fit-acceptance` command in the README's code blocks parses as written.

A review (7 Dec) found documented commands that had drifted from the CLI (`profile-latency` gained
a required `--out`, `--regimes` needs `--out`); this keeps the README's copyable lines honest.
Optional parts in ``[...]`` are tried both left out and put in (each alternative of ``a | b``;
``x|y`` inside a value takes its first choice); comments (`` # `` to the end of the line) are dropped.
Only the argument parsers run: nothing is decoded, fitted or written.
"""
from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from goose_runtime import cli, fit_cli

README = pathlib.Path(__file__).parents[1] / "README.md"
PROGRAMS = {"goose": cli.build_parser, "fit-acceptance": fit_cli.build_parser}
OPTIONAL = re.compile(r"\[([^\[\]]*)\]")


def code_block_commands(text: str) -> list[str]:
    """Lines of fenced code blocks that run one of PROGRAMS, comments dropped.

    Example:
        >>> code_block_commands("x\\n```\\n.venv/bin/goose yield --p-s 1   # E[tau]\\nls\\n```\\n`goose z`")
        ['goose yield --p-s 1']
    """
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        command = re.split(r"\s#(?:\s|$)", line)[0].strip().removeprefix(".venv/bin/")
        if inside and command.split(" ", 1)[0] in PROGRAMS:
            lines.append(command)
    return lines


def variants(command: str) -> list[str]:
    """The command with its first ``[...]`` part left out, or filled with each alternative; recursively.

    Example:
        >>> variants("goose x [--a 1 | --b] [--m p|q]")
        ['goose x', 'goose x --m p', 'goose x --a 1', 'goose x --a 1 --m p', 'goose x --b', 'goose x --b --m p']
    """
    found = OPTIONAL.search(command)
    if found is None:
        return [" ".join(re.sub(r"(\S+)\|\S+", r"\1", command).split())]
    head, tail = command[: found.start()], command[found.end():]
    out = []
    for choice in ["", *(part.strip() for part in found.group(1).split(" | "))]:
        out += variants(f"{head} {choice} {tail}")
    return out


COMMANDS = code_block_commands(README.read_text())


def test_the_readme_has_commands_of_both_programs():
    assert len(COMMANDS) >= 30 and {c.split()[0] for c in COMMANDS} == set(PROGRAMS)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_parses(command, capsys):
    for variant in variants(command):
        program, *argv = shlex.split(variant)
        try:
            PROGRAMS[program]().parse_args(argv)
        except SystemExit:
            pytest.fail(f"README: {variant!r} does not parse: {capsys.readouterr().err.strip()}")
