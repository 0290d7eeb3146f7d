"""Atomic file output: the one implementation every writer of the project shares (validated JSON
input is :mod:`goose_theory.jsonio`).

Every file the toolkit writes goes to a temp file beside its target first and is renamed over it
only when complete, so a crash or a bad input never leaves a half-written file.

Example:
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "x.txt")
    >>> with atomic_output(target, ".txt") as tmp:
    ...     with open(tmp, "w") as fh:
    ...         _ = fh.write("done")
    >>> with open(target) as fh:
    ...     fh.read()
    'done'
"""
from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack, contextmanager, suppress
from typing import Callable, Iterator, Mapping

from .errors import OutputPathError


def output_file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be an output file (one phrase), or None: checked before the work, so a
    long run does not end in a failed rename. The atomic rename would replace a device node or a
    FIFO by a plain file, so only a regular file (or nothing) may stand there.

    Example:
        >>> output_file_problem(""), output_file_problem("/"), output_file_problem("  ")
        ('is empty', 'is a directory', 'is blank (white space only)')
    """
    text = os.fspath(path)
    if not text:
        return "is empty"
    if not text.strip():  # '--out "  "' wrote a file named two spaces
        return "is blank (white space only)"
    if os.path.isdir(text):
        return "is a directory"
    if text.endswith(os.sep):
        return "ends with a '/': that names a folder, not a file"
    if os.path.lexists(text) and not os.path.isfile(text):
        return "exists and is not a regular file"
    absolute = os.path.abspath(text)
    reason = _too_long(absolute) or _blocked(os.path.dirname(absolute))
    return None if reason is None else f"cannot be written: {reason}"


def output_dir_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be (created as) an output folder, or None."""
    text = os.fspath(path)
    if not text:
        return "is empty"
    if not text.strip():
        return "is blank (white space only)"
    absolute = os.path.abspath(text)
    reason = _too_long(absolute) or _blocked(absolute)
    return None if reason is None else f"cannot be used: {reason}"


def _nearest_existing(absolute: str) -> str:
    """``absolute`` itself if it exists, else its nearest existing ancestor (at worst the root)."""
    while not os.path.exists(absolute):
        absolute = os.path.dirname(absolute)
    return absolute


def _too_long(absolute: str) -> str | None:
    """A name past the file system's limit (255 bytes on most) fails only at the final rename,
    after the work: say so now."""
    folder = _nearest_existing(absolute)
    try:
        limit = os.pathconf(folder if os.path.isdir(folder) else os.path.dirname(folder), "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for part in absolute.split(os.sep):
        size = len(os.fsencode(part))
        if size > limit:
            return f"a name of {size} bytes, more than the file system's {limit}"
    return None


def _blocked(folder: str) -> str | None:
    probe = _nearest_existing(folder)  # the nearest existing ancestor decides
    if not os.path.isdir(probe):
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK):
        return f"{probe} is not writable"
    # os.access says yes to root everywhere, also under /proc and /sys, in a read-only mount or an
    # immutable folder: only making something there tells (a temp entry, removed at once)
    try:
        if probe == folder:
            fd, made = tempfile.mkstemp(dir=probe, prefix=".tmp-probe-")
            os.close(fd)
            os.unlink(made)
        else:
            os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".tmp-probe-"))
    except OSError as exc:
        return f"nothing can be created in {probe} ({exc.strerror or exc})"
    return None


@contextmanager
def atomic_output(path: str | os.PathLike, suffix: str) -> Iterator[str]:
    """Yield a temp path beside ``path``; on success it is renamed to ``path`` (mode 0644), on
    any exception it is removed and ``path`` is left as it was. A ``path`` that is not a possible
    output file (:func:`output_file_problem`) raises OutputPathError before anything is made."""
    problem = output_file_problem(path)
    if problem:
        raise OutputPathError(f"{os.fspath(path) or repr('')}: {problem}")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    except OSError as exc:  # the folder changed since the check, or the disk is full
        raise OutputPathError(f"{os.fspath(path)}: cannot be written ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        try:
            yield tmp
        except OSError as exc:  # a full disk says only "No space left on device": name the file
            raise OutputPathError(f"{os.fspath(path)}: cannot be written ({_os_reason(exc)})") from None
        try:  # both named here: an OSError escaping to an enclosing atomic_output would be named as its file
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; written files are meant to be shared
            os.replace(tmp, path)
        except OSError as exc:  # e.g. an immutable file stands there: name it, not the temp file
            raise OutputPathError(f"{os.fspath(path)}: cannot be replaced ({exc.strerror or exc})") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_files_together(writers: Mapping[str, Callable[[str], None]]) -> None:
    """Write files that belong together (a report and the files it names): each writer is called
    with a temp path beside its target, and the targets are replaced only once every writer has
    finished; an exception in any writer leaves every target as it was. The renames then follow one
    another in the order given (list a report last: it goes in place after the files it names), so
    only a crash or a failed rename among them could still leave a mixed set.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> def fail(tmp):
        ...     raise ValueError("second file fails")
        >>> def text(tmp):
        ...     with open(tmp, "w") as fh:
        ...         _ = fh.write("a")
        >>> try:
        ...     write_files_together({os.path.join(folder, "a.txt"): text, os.path.join(folder, "b.txt"): fail})
        ... except ValueError:
        ...     pass
        >>> os.listdir(folder)  # the first file was not put in place either
        []
    """
    made = _missing_folders(writers)
    try:
        with ExitStack() as stack:
            # entered last to first, so that they are renamed first to last (an ExitStack unwinds in
            # reverse): a report listed last goes in place after the files it names
            temps = {path: stack.enter_context(atomic_output(path, os.path.splitext(os.fspath(path))[1] or ".tmp"))
                     for path in reversed(list(writers))}
            for path, write in writers.items():
                try:
                    write(temps[path])
                except OSError as exc:  # named here: the innermost temp's context would name the last file
                    raise OutputPathError(f"{os.fspath(path)}: cannot be written ({_os_reason(exc)})") from None
    except BaseException:
        for folder in made:  # a folder made for the set goes with it (only if empty: never anything else)
            with suppress(OSError):
                os.rmdir(folder)
        raise


def _missing_folders(paths) -> list[str]:
    """The folders above ``paths`` that do not exist yet, deepest first."""
    missing = set()
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        while folder and not os.path.exists(folder):
            missing.add(folder)
            folder = os.path.dirname(folder)
    return sorted(missing, key=len, reverse=True)


def _os_reason(exc: OSError) -> str:
    return exc.strerror or " ".join(str(exc).split()) or type(exc).__name__


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8 (not atomic: for the temp paths of :func:`atomic_output`
    and :func:`write_files_together`)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temp file beside it: never a half file."""
    with atomic_output(path, os.path.splitext(os.fspath(path))[1] or ".txt") as tmp:
        write_text(tmp, text)
