"""The one base class of bad user input.

Every validation error of the project (a bad probability, topology, trace file, rule, latency
profile, method, prompt, model path...) subclasses :class:`InputError`, so the CLIs can turn
exactly these into one line on stderr and exit code 2, while a genuine bug still shows its
traceback.
"""
from __future__ import annotations


class InputError(ValueError):
    """Bad input; the message is one line that names the bad value or file."""


class OutputPathError(InputError):
    """An output path that cannot be written (a directory, a device, an empty name...)."""
