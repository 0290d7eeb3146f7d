"""The one base class of bad user input.

Every validation error of the project (a bad probability, topology, trace file, rule, latency
profile, method, prompt, model path...) subclasses :class:`InputError`, so the CLIs can turn
exactly these into one line on stderr and exit code 2, while a genuine bug still shows its
traceback. :func:`did_you_mean` adds the nearest known name to an "unknown name" line.
"""
from __future__ import annotations

import difflib
from typing import Iterable


class InputError(ValueError):
    """Bad input; the message is one line that names the bad value or file."""


class OutputPathError(InputError):
    """An output path that cannot be written (a directory, a device, an empty name...)."""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the known name nearest a typo, or "" when none is near.

    Example:
        >>> did_you_mean("gose", ["ar", "pld", "goose"]), did_you_mean("zzz", ["ar", "goose"])
        ("; did you mean 'goose'?", '')
    """
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
