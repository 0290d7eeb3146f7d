"""The retrieval store's corpus: which files, read as UTF-8 text, and tokenized.

A user's ``--store-corpus`` is files and folders (hidden files below a folder skipped), checked
before anything is read: a missing or special path, a corpus without files, or one whose files
exceed :data:`MAX_CORPUS_BYTES` on disk is refused in one line (:class:`StoreError`). Files that are
not UTF-8 (a binary in a user's folder) are skipped when read; a corpus with no text at all is
refused, and :func:`check_corpus` finds that before the model loads by reading only up to the first
file with text. The default corpus is this interpreter's standard library minus the modules the
``stdlib`` prompt set is cut from (see :mod:`goose_runtime.store`).

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.py").write_text("x = 1"); _ = (folder / ".hidden").write_text("skip")
    >>> [p.name for p in corpus_files([str(folder)])], read_corpus(corpus_files([str(folder)]))
    (['a.py'], ['x = 1'])
"""
from __future__ import annotations

import pathlib
from typing import Iterable, Sequence

from goose_theory.errors import InputError

MAX_CORPUS_BYTES = 128 << 20  # files' sizes on disk, checked before reading: a 291 MB corpus took 6 min and GBs


class StoreError(InputError):
    """A corpus that cannot make a store, or a bench the default store would leak into."""


def default_corpus() -> list[pathlib.Path]:
    """This interpreter's standard library sources outside ``site-packages`` and the test suites,
    minus the modules of the ``stdlib`` prompt set: the files ``stdlib-wide`` is cut from; sorted."""
    from .stdlib_prompts import stdlib_root, stdlib_wide_modules

    root = stdlib_root()
    return sorted(root / f"{m}.py" for m in stdlib_wide_modules(root))


def corpus_files(paths: Sequence[str]) -> list[pathlib.Path]:
    """The files of a user's corpus: each path a file, or a folder whose files below it count
    (hidden ones skipped); sorted within each folder. Raises :class:`StoreError` for an empty, missing
    or special path (a pipe, a device), a corpus without files, or one whose files exceed
    ``MAX_CORPUS_BYTES`` on disk (checked here, before anything is read)."""
    files: list[pathlib.Path] = []
    for raw in paths:
        path = pathlib.Path(raw)
        if not raw:
            raise StoreError("--store-corpus: empty path")
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file()
                            and not any(part.startswith(".") for part in p.relative_to(path).parts))
        elif path.exists():
            raise StoreError(f"--store-corpus {raw}: not a regular file or folder")
        else:
            raise StoreError(f"--store-corpus {raw}: no such file or folder")
    if not files:
        raise StoreError(f"--store-corpus {' '.join(paths)}: holds no files")
    if sum(p.stat().st_size for p in files) > MAX_CORPUS_BYTES:
        raise StoreError(f"--store-corpus {' '.join(paths)}: more than {MAX_CORPUS_BYTES >> 20} MB of files; "
                         f"pass a smaller corpus")
    return files


def _text(path: pathlib.Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def read_corpus(files: Sequence[pathlib.Path]) -> list[str]:
    """The texts of ``files`` that are UTF-8 (others, e.g. binaries in a user's folder, or files
    that cannot be read, are skipped). Raises :class:`StoreError` when none is."""
    texts = [t for t in map(_text, files) if t is not None]
    _require_text(texts)
    return texts


def check_corpus(files: Sequence[pathlib.Path]) -> None:
    """What :func:`read_corpus` would refuse, found by reading only up to the first file with UTF-8
    text (a CLI checks a corpus before loading the model, and reads it all only if it builds)."""
    _require_text(map(_text, files))


def _require_text(texts: Iterable[str | None]) -> None:
    """The one refusal both readers share: no file holds UTF-8 text that is not blank (stops at the
    first that does)."""
    if not any(t is not None and t.strip() for t in texts):
        raise StoreError("store corpus: no UTF-8 text in it")


def tokenize(tokenizer, texts: Sequence[str], *, batch: int = 256) -> list[list[int]]:
    """Token ids of each text, without special tokens (the fast tokenizer runs a batch at once)."""
    out: list[list[int]] = []
    for i in range(0, len(texts), batch):
        out += [list(ids) for ids in tokenizer(list(texts[i:i + batch]), add_special_tokens=False)["input_ids"]]
    return out
