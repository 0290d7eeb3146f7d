"""The fit traces the validation commands read, checked before any long work.

``goose loop --traces`` takes a folder, a glob or files; ``goose validate`` finds the traces a
topology was fitted on in its provenance (their prompts are held out); ``fit-acceptance`` takes
paths. What each needs checked up front, before a fit of seconds or a model load:

- :func:`expand_paths`: paths, folders and globs as a file list (fit-acceptance, ``--traces``);
- :func:`trace_files`: ``--traces`` as files, none unreadable, none a copy of another;
- :func:`trace_copies`: the same trace under two names (or relabelled), whose cycles a fit would count twice;
- :func:`trace_sets`: the prompt sets the traces hold (``goose loop`` refuses others before its fit);
- :func:`check_provenance`: a topology's fit traces readable, an error naming the topology;
- :func:`fit_metadata`: the traces' footer metadata, read once for the two notes below;
- :func:`note_token_cap`: one line when the traces were decoded with another ``--max-new-tokens``;
- :func:`note_sampling`: one line when they were sampled at several temperatures (or cuts) or another one;
- :func:`note_model_mismatch`: one line when they were decoded by another model or dtype;
  :func:`note_latency_mismatch`: the same for fit-acceptance's latency profile.

Example:
    >>> [f.rsplit("/", 1)[-1] for f in trace_files("traces/prior")]
    ['humaneval-b8.parquet', 'mtbench-b8.parquet', 'stdlib-b8.parquet']
"""
from __future__ import annotations

import glob
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc

from goose_theory.cli_util import UsageError
from goose_theory.traceio import TraceFileError, TraceInfo, check_trace, open_trace, trace_metadata

from .cli_checks import SETTING_KEYS, sampling_setting, setting_label


def expand_paths(paths: list[str], *, skipped: list[str] | None = None) -> list[str]:
    """Files, folders (their own ``*.parquet``) and globs (``**`` recurses) -> a sorted, de-duplicated
    file list: ``fit-acceptance PATH...`` and ``goose loop --traces`` read paths alike. A folder
    without parquet files or a glob without matches is an error, or with ``skipped`` (``--skip-bad``)
    a line appended to it, as a missing file is a skipped file there.

    Example:
        >>> [f.rsplit("/", 1)[-1] for f in expand_paths(["traces/prior/*.parquet", "traces/prior"])]
        ['humaneval-b8.parquet', 'mtbench-b8.parquet', 'stdlib-b8.parquet']
    """
    out: list[str] = []
    for raw in paths:
        if not raw:  # was "error: : no such file"
            raise UsageError("a trace path is empty ('')")
        if os.path.isdir(raw):  # escaped: a folder's name may hold '[' or '*'
            found = sorted(glob.glob(os.path.join(glob.escape(raw), "*.parquet")))
            if not found:
                _refuse(f"{raw}: directory holds no *.parquet files", skipped)
            out += found
        elif glob.has_magic(raw) and not os.path.lexists(raw):  # a file that exists is itself, '[' or not
            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                _refuse(f"{raw}: no files match", skipped)
            out += [m for m in matches if not os.path.isdir(m)]
        else:
            out.append(raw)
    # one file under two spellings (x.parquet, ./x.parquet, a link) counts once, not twice
    unique: dict[str, str] = {}
    for path in out:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


def _refuse(problem: str, skipped: list[str] | None) -> None:
    if skipped is None:
        raise UsageError(problem)
    skipped.append(problem)


def trace_files(spec: str) -> list[str]:
    """``--traces``: a folder's parquet files, a glob's matches or a file (as :func:`expand_paths`
    reads them); each must read as a trace (its one-line error here) and none may be a copy of another."""
    try:
        files = expand_paths([spec])
    except UsageError as error:
        raise UsageError(f"--traces: {error} (record them with `goose record-traces`)") from None
    if files == [spec] and not os.path.lexists(spec):  # the default 'traces' outside the project folder
        raise UsageError(f"--traces {spec}: no such file or folder in {os.getcwd()} (the project folder ships "
                         f"traces/; else record them with `goose record-traces`)")
    copies = trace_copies([check_trace(f) for f in files])
    if copies:
        raise UsageError(f"--traces: {copy_problem(*copies[0])}")
    return files


def copy_problem(copy: TraceInfo, original: TraceInfo) -> str:
    """The one line that names a copy :func:`trace_copies` found (fit-acceptance, the explorer)."""
    if copy.footer.equals(original.footer):
        return f"{copy.path}: the same trace as {original.path} (an identical parquet footer): its cycles would count twice"
    return (f"{copy.path}: the same recording as {original.path} under other labels (every non-text column "
            "identical, timings included): its cycles would count twice")


def _data_key(info: TraceInfo) -> tuple | None:
    """Each row group's non-text column chunks: uncompressed size and statistics. Text columns are labels
    (run_id, model, method, ...) that a copy may rename; a second recording differs at least in
    its timings (verify_s, draft_s), so only a copy shares them all. None where a chunk has no
    statistics (the footer alone decides then)."""
    footer, key = info.footer, [info.num_rows]
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            kind = info.schema.field(chunk.path_in_schema).type
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                continue
            if not chunk.is_stats_set:  # sizes alone: plain-encoded numbers of equal row counts share them
                return None
            key.append((chunk.path_in_schema, chunk.total_uncompressed_size, str(chunk.statistics.to_dict())))
    return tuple(key)  # sizes before compression: the codec is the writer's choice


def trace_copies(infos: list[TraceInfo]) -> list[tuple[TraceInfo, TraceInfo]]:
    """(copy, original) for each file whose parquet footer equals an earlier file's: the same trace
    under a second name (the same path twice is already one entry), whose rows a fit would count
    twice and so narrow every interval. A footer holds the row count and each column's statistics
    and offsets, so two different traces do not share one. A copy whose labels were rewritten
    (another run_id: fuzzing, 7 Dec, fitted every cycle twice) is found by its data columns
    (:func:`_data_key`)."""
    copies, seen = [], []
    for info in infos:
        key = _data_key(info)
        same = (o for o, k in seen if o.num_rows == info.num_rows  # cheap first: a copy has as many rows
                and (o.footer.equals(info.footer) or (key is not None and k == key)))
        original = next(same, None)
        if original is None:
            seen.append((info, key))
        else:
            copies.append((info, original))
    return copies


def trace_sets(files: list[str]) -> list[str]:
    """The prompt sets (``benchmark`` values) trace ``files`` hold, sorted; reads that one column in
    batches, so a trace of millions of rows costs a fraction of a second and little memory."""
    sets: set[str] = set()
    for path in dict.fromkeys(files):
        with open_trace(path) as pf:
            for batch in pf.iter_batches(columns=["benchmark"], batch_size=1 << 20):
                sets.update(pc.unique(batch.column(0).cast(pa.string())).to_pylist())
    sets.discard(None)
    return sorted(sets)


def check_provenance(topology_path: str, traces: list[str]) -> None:
    """The fit traces a topology names that exist must be readable, checked before the model loads;
    the error names the topology, as the trace alone did not say where it came from. A missing one
    is a warning later (its prompts cannot be held out), not an error."""
    for trace in dict.fromkeys(traces):
        if os.path.exists(trace):
            try:
                check_trace(trace)
            except TraceFileError as exc:
                raise UsageError(f"--topology {topology_path}: provenance.traces: {exc}") from None


def note_token_cap(metas: list[dict], max_new_tokens: int) -> None:
    """Say so (one line on stderr) when the fit traces (their :func:`fit_metadata`) were decoded
    with another --max-new-tokens: the cap cuts each prompt's last cycle, and a fit of short runs
    predicts long ones badly (and the other way)."""
    caps = {_decode_setting(meta, "max_new_tokens") for meta in metas}
    caps.discard(None)
    if caps and caps != {max_new_tokens}:
        _note(f"the fit traces were decoded with --max-new-tokens {', '.join(map(str, sorted(caps)))}, "
              f"this run with {max_new_tokens}: predictions assume the traces' length")


def note_sampling(metas: list[dict], *, this_run: dict | None = None) -> None:
    """Say so (one line on stderr) when the traces were sampled at several settings (temperature and
    top-k / top-p / min-p cut, repetition / frequency / presence penalty; pooled in one fit), or at
    another than ``this_run``'s (``goose validate``'s and ``goose loop``'s
    :func:`~goose_runtime.cli_checks.sampling_settings`; :func:`~goose_runtime.cli_checks.setting_label`
    names each): a sampled target accepts fewer drafts as the temperature rises, and at T 1 more under
    a cut (docs/bench-runtime.md), so the fit describes the traces' setting. A trace without the keys
    (before sampling) was greedy."""
    settings = sorted({sampling_setting({key: _decode_setting(meta, key) for key in SETTING_KEYS}) for meta in metas})
    shown = ", ".join(map(setting_label, settings))
    if len(settings) > 1:
        _note(f"the traces were decoded at temperatures {shown} and are fitted together: acceptance changes "
              "with the setting (it falls as the temperature rises), so fit each setting's traces apart")
    elif settings and this_run is not None and settings[0] != (ours := sampling_setting(this_run)):
        _note(f"the fit traces were decoded at temperature {shown}, this run at {setting_label(ours)}: "
              "the predictions describe the traces' sampling")


def _decode_setting(meta: dict, key: str):
    """``config.decode[key]`` of a trace's :func:`fit_metadata` entry; None where a level is missing."""
    return ((meta.get("config") or {}).get("decode") or {}).get(key)


def note_model_mismatch(metas: list[dict], *, model: str, dtype: str) -> None:
    """Say so (one line on stderr) when the fit traces (their :func:`fit_metadata`) were decoded by
    another model or in another dtype than this run's: the fitted acceptance, and so every
    prediction, describes theirs (a tree fitted on one model may still be validated on another:
    that is a transfer test)."""
    for key, ours, theirs in _other_values(metas, model=model, dtype=dtype):
        _note(f"the fit traces were decoded with {key} {', '.join(theirs)}, this run with {ours}: the "
              f"predictions describe the traces' {key}")


def note_latency_mismatch(metas: list[dict], latency, path: str) -> None:
    """Say so (one line per key on stderr) when ``--latency`` was measured with another model or dtype
    than the traces (their key-value metadata) were decoded by: the cost-aware budget then prices
    the traces' trees with another model's forward times (a profile without the key says nothing)."""
    for key, ours, theirs in _other_values(metas, model=latency.model, dtype=latency.dtype):
        if ours:
            _note(f"--latency {path} was measured with {key} {ours}, the traces decoded with {', '.join(theirs)}: "
                  "the cost-aware budget prices their trees with its forward times")


def _other_values(metas: list[dict], **ours: str) -> list[tuple[str, str, list[str]]]:
    """(key, ours, the traces' other values, sorted) for each key where some trace's metadata differs."""
    out = []
    for key, value in ours.items():
        theirs = sorted({str(meta[key]) for meta in metas if meta.get(key) is not None} - {value})
        if theirs:
            out.append((key, value, theirs))
    return out


def fit_metadata(trace_files: list[str]) -> list[dict]:
    """Each readable trace's key-value metadata, a file once (a bad trace is reported where it
    matters); read before the model loads, so both notes above cost one footer read a file."""
    out = []
    for path in dict.fromkeys(trace_files):
        try:
            with open_trace(path) as pf:
                out.append(trace_metadata(pf))
        except TraceFileError:
            continue
    return out


def _note(text: str) -> None:
    print(f"[goose] note: {text}", file=sys.stderr, flush=True)
