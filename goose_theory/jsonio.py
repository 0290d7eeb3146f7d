"""Validated JSON input: every loader's one-line errors that name the file.

A hand-made JSON file can fail in more ways than a syntax error: it may be missing, a directory, a
device that never ends, not UTF-8, nested too deeply for the parser, or hold an integer of
thousands of digits. :func:`read_text_file`, :func:`loads_json` and :func:`load_json_file` turn
each into one line of the caller's error type; :func:`json_misfit` names the first key of a parsed
object whose value has the wrong type.

Example:
    >>> json_misfit({"version": 1, "n": "3"}, {"n": ((int,), "an integer")})
    ('n', 'an integer', '3')
"""
from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any, Callable, Mapping, TypeVar

from .errors import did_you_mean

T = TypeVar("T")

MAX_JSON_BYTES = 256 << 20  # no topology, latency or prompt file comes near; /dev/zero would never end


def loads_json(text: str) -> Any:
    """``json.loads`` whose every failure is a ``json.JSONDecodeError``: a hand-made file can also
    nest too deeply for the parser (RecursionError) or hold an integer of thousands of digits
    (Python's ValueError), which would otherwise escape as a traceback.

    Example:
        >>> loads_json('{"a": [1, 2]}')
        {'a': [1, 2]}
        >>> try:
        ...     loads_json("[" * 100_000)
        ... except json.JSONDecodeError as exc:
        ...     print(exc.msg)
        nested too deeply
        >>> try:
        ...     loads_json('{"nodes": [], "nodes": [1]}')
        ... except json.JSONDecodeError as exc:
        ...     print(exc.msg)
        the key 'nodes' appears twice in one object (which one was meant?)
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError:
        raise
    except _DuplicateKey as exc:
        raise DuplicateKeyError(f"the key {exc.args[0]!r} appears twice in one object (which one was meant?)",
                                text, 0) from None
    except RecursionError:
        raise _LimitError("nested too deeply", text, 0) from None
    except ValueError:  # Python refuses to convert an integer literal this long
        raise _LimitError(f"an integer longer than {sys.get_int_max_str_digits()} digits", text, 0) from None


def json_at(obj: Any, key: str) -> Any:
    """The value at a dotted ``key`` of parsed JSON; None where it or a parent is missing (or a
    parent is not an object).

    Example:
        >>> json_at({"a": {"b": 3}}, "a.b"), json_at({"a": 5}, "a.b"), json_at({}, "a")
        (3, None, None)
    """
    value = obj
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def json_misfit(obj: Any, shapes: Mapping[str, tuple[tuple[type, ...], str]]) -> tuple[str, str, Any] | None:
    """The first dotted key of ``shapes`` whose value (:func:`json_at`) is not of its allowed
    types, as (key, what it should be, the value); None when all fit. A missing key reads as None,
    so allow ``type(None)`` where it may be absent or null; JSON's true and false are never numbers.

    Example:
        >>> json_misfit({"n": True}, {"n": ((int, type(None)), "an integer")})
        ('n', 'an integer', True)
    """
    for key, (types, what) in shapes.items():
        value = json_at(obj, key)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return key, what, value
    return None


def unknown_key(obj: Mapping[str, Any], known: tuple[str, ...], what: str) -> str | None:
    """The problem with the first key of ``obj`` outside ``known`` (a typo would be dropped unsaid), or None.

    Example:
        >>> unknown_key({"p_s": 0.5, "p_t_chian": 0.9}, ("p_s", "p_t", "p_t_chain"), "an acceptance")
        "unknown key 'p_t_chian' (an acceptance holds p_s, p_t, p_t_chain); did you mean 'p_t_chain'?"
    """
    key = next((k for k in obj if k not in known), None)
    return None if key is None else f"unknown key {key!r} ({what} holds {', '.join(known)}){did_you_mean(key, known)}"


class _DuplicateKey(Exception):
    """An object with a key twice: Python's json keeps the last silently, so a hand-edited file's
    second "nodes" (or a node's second "source") would replace the first unsaid."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return obj


class _LimitError(json.JSONDecodeError):
    """A parser limit, not a syntax error at a position: its text is the message alone."""

    def __str__(self) -> str:
        return self.msg


def read_text_file(path: str | os.PathLike, error: type[Exception], *, max_bytes: int = MAX_JSON_BYTES,
                   what: str = "a JSON file") -> str:
    """A UTF-8 file's text; a missing, unreadable or oversized file raises ``error`` with one line
    naming it (``what`` the file should have been)."""
    if not os.fspath(path):
        raise error("'': the file name is empty")
    try:
        if os.path.isdir(path):
            raise error(f"{path}: is a directory, not {what}")
        mode = os.stat(path).st_mode if os.path.exists(path) else 0
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise error(f"{path}: is a device, not {what}")  # a pipe (/dev/stdin, <(...)) is fine
        with open(path, encoding="utf-8-sig") as fh:  # a leading BOM (Windows editors) is dropped, not refused
            text = fh.read(max_bytes + 1)
        if len(text) > max_bytes:
            raise error(f"{path}: larger than {max_bytes >> 20} MB, more than {what} of this toolkit holds")
        return text
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text, so not {what} ({exc})") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None


def read_json(path: str | os.PathLike, error: type[Exception]) -> Any:
    """Parse a JSON file; a missing or malformed file raises ``error`` with one line naming it."""
    text = read_text_file(path, error)
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: malformed JSON ({exc})") from None


def load_json_file(path: str | os.PathLike, parse: Callable[[Any], T], error: type[Exception]) -> T:
    """Read JSON and ``parse`` it; every failure is one ``error`` line that starts with the path."""
    data = read_json(path, error)
    try:
        return parse(data)
    except error as exc:
        raise error(f"{path}: {exc}") from None


class DuplicateKeyError(_LimitError):
    """Valid JSON whose object holds a key twice (a reader that tries other formats after JSON fails
    must not take it for a syntax error)."""
