"""The per-node acceptance trace format (parquet, ``goose_trace_version=1``): schema, atomic
writer and validating reader. The runtime writes it; ``fit-acceptance`` and the app read it.

One row per tree node per verification cycle, root included. Key-value metadata carries
``goose_trace_version`` (checked by the reader), model, device, dtype, library versions and the
run's full config (JSON).

Required columns (the contract) and the extra columns the runtime adds for fitting:

=============  ========  ==============================================================
column         type      meaning
=============  ========  ==============================================================
run_id         string    one id per ``goose decode`` run
model          string    model id or path
benchmark      string    prompt set (humaneval, mtbench, stdlib, stdlib-wide, a file name, prompt)
prompt_id      string    id of the prompt inside the set
method         string    ar, pld, tr, iso:K, mixed-iso:K, goose, topology:NAME
cycle          int32     verification cycle index within the prompt (0-based)
node           int32     node index in the cycle's tree (0 = root)
parent         int32     parent node index (-1 for the root)
depth          int16     0 for the root
source         string    root / spine / transition
rank           int16     spine 0; transition: rank of the candidate in the adjacency list
token          int32     drafted token id (root: the anchor token)
match          bool      token == target argmax at its parent (true for the root)
accepted       bool      on the accepted path (true for the root)
reached        bool      parent accepted (true for the root) [extra; derivable]
score          float32   adjacency score of a transition candidate (NaN otherwise) [extra]
spine_pos      int16     1-based position on the spine, 0 otherwise [extra]
ngram          int8      n-gram length of the context match that produced the spine [extra]
consensus      int16     earlier occurrences agreeing on the first spine token, at most 32767 [extra]
tau            int16     accepted tokens of the cycle, bonus included [extra]
budget         int16     non-root nodes of the cycle's tree (the fit checks its rows against it) [extra]
verify_s       float32   seconds in the verification forward pass of the cycle [extra]
draft_s        float32   seconds outside the forward pass (match, build, walk, ...) [extra]
ema            float32   EMA of spine acceptance after the cycle (NaN if unused) [extra]
bypass         bool      consensus bypass fired (linear chain verified) [extra]
spine_avail    int16     continuation tokens the context matcher offered this cycle, before the
                         tree cut them (0: no match; null: not recorded) [extra]
confident      bool      the match was confident: >= 2 n-gram lengths agree on its first token
                         (the bypass and regime-file condition, with >= 8 tokens; null: method
                         has no matcher, or a trace from before 30 Nov 11:45 UTC) [extra]
=============  ========  ==============================================================
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InputError
from .fileio import atomic_output
from .jsonio import json_misfit, loads_json

TRACE_VERSION = "1"
VERSION_KEY = b"goose_trace_version"

REQUIRED_COLUMNS: dict[str, pa.DataType] = {
    "run_id": pa.string(), "model": pa.string(), "benchmark": pa.string(), "prompt_id": pa.string(),
    "method": pa.string(), "cycle": pa.int32(), "node": pa.int32(), "parent": pa.int32(),
    "depth": pa.int16(), "source": pa.string(), "rank": pa.int16(), "token": pa.int32(),
    "match": pa.bool_(), "accepted": pa.bool_(),
}
EXTRA_COLUMNS: dict[str, pa.DataType] = {
    "reached": pa.bool_(), "score": pa.float32(), "spine_pos": pa.int16(), "ngram": pa.int8(),
    "consensus": pa.int16(), "tau": pa.int16(), "budget": pa.int16(), "verify_s": pa.float32(),
    "draft_s": pa.float32(), "ema": pa.float32(), "bypass": pa.bool_(), "spine_avail": pa.int16(),
    "confident": pa.bool_(),
}
SOURCES = ("root", "spine", "transition")


class TraceFileError(InputError):
    """A trace file that cannot be used; the message names the file and the problem."""


def trace_schema(metadata: Mapping[str, Any] | None = None) -> pa.Schema:
    """The full v1 schema, with ``goose_trace_version`` and ``metadata`` (values JSON-encoded
    unless they are strings) as key-value metadata."""
    fields = [pa.field(k, t) for k, t in {**REQUIRED_COLUMNS, **EXTRA_COLUMNS}.items()]
    kv = {VERSION_KEY: TRACE_VERSION.encode()}
    for key, value in (metadata or {}).items():
        kv[key.encode()] = (value if isinstance(value, str) else json.dumps(value, default=str)).encode()
    return pa.schema(fields, metadata=kv)


def write_trace(path: str | os.PathLike, columns: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> None:
    """Write one trace file atomically (temp file beside it, then rename).

    ``columns`` maps every required column to a sequence or array; an extra column that is
    absent is written as nulls (a recorder that does not know it yet stays valid).
    """
    schema = trace_schema(metadata)
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise ValueError(f"write_trace: missing columns {', '.join(missing)}")
    n_rows = len(columns["node"])
    table = pa.table({f.name: (pa.array(columns[f.name], type=f.type) if f.name in columns
                               else pa.nulls(n_rows, type=f.type)) for f in schema}, schema=schema)
    with atomic_output(path, ".parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 20)


@dataclass(frozen=True)
class TraceInfo:
    """A trace file that passed :func:`check_trace`: its path, parsed footer and arrow schema.

    What a reader needs later without touching the footer again: :meth:`open` reopens the data
    with this footer (no second footer read, no second validation), :attr:`columns` says which
    optional columns were recorded, :meth:`metadata` is the decoded key-value metadata.
    """

    path: str
    footer: pq.FileMetaData
    schema: pa.Schema

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    @property
    def num_rows(self) -> int:
        return int(self.footer.num_rows)

    def open(self, *, read_dictionary: Sequence[str] | None = None) -> pq.ParquetFile:
        """The file for reading, with the checked footer (``read_dictionary``: string columns
        to read as dictionaries)."""
        return pq.ParquetFile(self.path, metadata=self.footer, read_dictionary=read_dictionary)

    def metadata(self) -> dict[str, Any]:
        """Decoded key-value metadata, as :func:`trace_metadata`."""
        return _decode_metadata(self.schema)


def open_trace(path: str | os.PathLike) -> pq.ParquetFile:
    """Open and validate a trace file: readable parquet, v1, required columns, not empty."""
    name = os.fspath(path)
    try:
        pf = pq.ParquetFile(name)
    except UnicodeEncodeError:  # a name whose bytes are not UTF-8 (listed with surrogates): pyarrow takes UTF-8 only
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise TraceFileError(f"{shown}: the file's name is not UTF-8 text, which pyarrow cannot open; "
                             "rename the file") from None
    except FileNotFoundError:
        raise TraceFileError(f"{name}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        raise TraceFileError(f"{name}: not a readable parquet file ({str(exc).splitlines()[0]})") from None
    try:
        _validate(name, pf.schema_arrow, pf.metadata.num_rows)
    except TraceFileError:
        pf.close()
        raise
    return pf


def check_trace(path: str | os.PathLike) -> TraceInfo:
    """:func:`open_trace`, keeping only what later readers need (the file is closed again), so a
    long list of files can be checked up front without holding one open handle per file.

    Example:
        >>> check_trace("no-such.parquet")
        Traceback (most recent call last):
        ...
        goose_theory.traceio.TraceFileError: no-such.parquet: no such file
    """
    with open_trace(path) as pf:
        return TraceInfo(os.fspath(path), pf.metadata, pf.schema_arrow)


def _validate(name: str, schema: pa.Schema, num_rows: int) -> None:
    meta = schema.metadata or {}
    version = meta.get(VERSION_KEY)
    if version is None:
        raise TraceFileError(f"{name}: no goose_trace_version in the parquet metadata (not a goose trace)")
    text = version.decode("utf-8", errors="replace")  # bytes that are not text: named, not a traceback
    if text != TRACE_VERSION:
        raise TraceFileError(f"{name}: goose_trace_version {text!r} is not supported (expected {TRACE_VERSION})")
    counts = Counter(schema.names)
    twice = [c for c in schema.names if counts[c] > 1]
    if twice:  # which of the two is meant cannot be known (schema.field(name) raised a KeyError traceback)
        raise TraceFileError(f"{name}: column {twice[0]} appears {counts[twice[0]]} times")
    missing = [c for c in REQUIRED_COLUMNS if c not in schema.names]
    if missing:
        raise TraceFileError(f"{name}: missing required column(s) {', '.join(missing)}")
    for column, expected in {**REQUIRED_COLUMNS, **EXTRA_COLUMNS}.items():
        if column in schema.names and not _same_kind(schema.field(column).type, expected, column in EXTRA_COLUMNS):
            raise TraceFileError(f"{name}: column {column} is {schema.field(column).type}, expected {expected} "
                                 "(or another width of that kind)")
    if num_rows == 0:
        raise TraceFileError(f"{name}: the trace is empty (no rows)")
    problem = config_problem(meta.get(b"config"))
    if problem:
        raise TraceFileError(f"{name}: metadata config: {problem}")


# what the fit's readers take from a method entry of the config: key -> (allowed JSON types, name)
_METHOD_FIELDS = {"label": ((str,), "a string"), "name": ((str, type(None)), "a string"),
                  "budget": ((int, type(None)), "an integer"), "min_score": ((int, float, type(None)), "a number"),
                  "topology": ((dict, type(None)), "a topology object")}


def config_problem(raw: bytes | None) -> str | None:
    """Why a trace's ``config`` metadata cannot be read by the fit (one phrase), or None: the
    recorder writes an object whose ``decode`` is an object and whose ``methods`` are objects
    with a string ``label`` (each its own), a budget >= 0 and a topology that loads; a file
    edited or made elsewhere may hold anything there.

    Example:
        >>> config_problem(b'{"methods": [{"label": "ar", "budget": 0}]}') is None
        True
        >>> config_problem(b'{"methods": [{"label": "ar", "budget": "8"}]}')
        "methods[0].budget is not an integer: '8'"
    """
    if raw is None:
        return None
    try:
        config = loads_json(raw.decode(errors="replace"))
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    if config is None:
        return None
    if not isinstance(config, dict):
        return f"not a JSON object but {type(config).__name__}"
    if not isinstance(config.get("decode") or {}, dict) or not isinstance(config.get("methods") or [], list):
        return "decode must be an object and methods a list"
    cap = (config.get("decode") or {}).get("max_new_tokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        return f"decode.max_new_tokens is not a positive integer: {cap!r}"[:200]  # 10**1000 stays one short line
    labels: set[str] = set()
    for i, method in enumerate(config.get("methods") or []):
        if not isinstance(method, dict):
            return f"methods[{i}] is not an object"
        misfit = json_misfit(method, _METHOD_FIELDS)
        if misfit:
            key, what, value = misfit
            return f"methods[{i}].{key} is not {what}: {value!r}"[:200]
        if isinstance(method.get("budget"), int) and method["budget"] < 0:  # ar records 0; a log of it warned
            return f"methods[{i}].budget is negative: {method['budget']}"[:200]
        if (problem := _topology_problem(method.get("topology"))) is not None:
            return f"methods[{i}].topology: {problem}"[:200]
        if method["label"] in labels:  # the fit finds a method's topology by its label (the rows name it)
            return f"methods[{i}].label {method['label']!r} names an earlier method too"[:200]
        labels.add(method["label"])
    return None


def _topology_problem(data: dict | None) -> str | None:
    """Why a method's recorded topology does not load (the --regimes fit loads it; its error named
    neither the trace nor its metadata), or None."""
    if data is None:
        return None
    from .topology import TopologyError, topology_from_dict  # here: topology's numpy is not every reader's
    try:
        topology_from_dict(data)
    except TopologyError as exc:
        return str(exc)
    return None


def _same_kind(found: pa.DataType, expected: pa.DataType, may_be_null: bool) -> bool:
    """bool, integer, float or string, at any width or layout (strings stored as text "true" counted
    every row as accepted); an extra column a recorder left empty may be of null type."""
    if may_be_null and pa.types.is_null(found):
        return True
    for kind in (pa.types.is_boolean, pa.types.is_integer, pa.types.is_floating):
        if kind(expected):
            return kind(found)
    return is_text(found) or (pa.types.is_dictionary(found) and is_text(found.value_type))


def is_text(kind: pa.DataType) -> bool:
    """A string type of any layout: ``string``, ``large_string`` or ``string_view`` (what pyarrow 26
    and polars' newest arrow output write; read as a dictionary, or cast, it is the same text)."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)


def trace_metadata(pf: pq.ParquetFile) -> dict[str, Any]:
    """Decoded key-value metadata (JSON values parsed where they parse)."""
    return _decode_metadata(pf.schema_arrow)


def _decode_metadata(schema: pa.Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw_key, value in (schema.metadata or {}).items():
        # keys too: bytes that are not UTF-8 were a UnicodeDecodeError naming no file
        key, text = raw_key.decode(errors="replace"), value.decode(errors="replace")
        try:
            out[key] = loads_json(text)
        except json.JSONDecodeError:
            out[key] = text
    return out
