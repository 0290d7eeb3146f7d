"""What ``goose validate`` and ``goose loop`` check before the model loads: each set's held-out
prompts (those whose ids the topology's fit traces do not hold, in the set's fixed order; a set
whose every prompt was fitted is refused, not run as nothing), and outputs that would replace an
input (a topology, its fit traces, a prompt file, the latency profile) or each other (the table
and a validation trace), or land where ``--traces`` would fit them next time.
"""
from __future__ import annotations

import os
import sys
from typing import Mapping, Sequence

from goose_theory.cli_util import UsageError, check_not_an_input, check_output_file
from goose_theory.topology import Topology
from goose_theory.traceio import open_trace

from .prompts import BENCHMARKS, SHUFFLED_OF, Prompt, load_prompts, set_name


def bench_files(benches: list[str]) -> list[str]:
    """The ``--bench`` entries that are JSONL files (not built-in sets): inputs an output must not replace."""
    return [b for b in benches if b not in BENCHMARKS]


def validation_trace(folder: str, bench: str) -> str:
    """Where validate (``--trace-dir``) and the loop (``--out-dir``) record a set's validation run."""
    return os.path.join(folder, f"validation-{set_name(bench)}.parquet")


def provenance_traces(topology: Topology) -> list[str]:
    """The trace files a topology's provenance names: those it was fitted on."""
    return list((topology.meta.get("provenance") or {}).get("traces") or [])


def fitted_set(topology: Topology) -> str | None:
    """The prompt set a topology was fitted on, where its provenance names one (fit-acceptance
    --group-by benchmark, goose loop), else None."""
    return ((topology.meta.get("provenance") or {}).get("group_key") or {}).get("benchmark")


def topology_notes(topologies: Mapping[str, Topology], benches: Sequence[str], *, prior: bool) -> list[str]:
    """What the validation of ``topologies`` (path -> loaded file) on ``benches`` should say first: a
    file fitted on another set than one it runs on (its prediction describes that set), and a regime
    fit recorded with the successor prior validated without it, or the other way round (as goose
    loop says)."""
    from goose_theory.regimefill import prior_mismatch_note

    notes = []
    for path, topology in topologies.items():
        fitted, others = fitted_set(topology), [set_name(b) for b in benches]
        if fitted is not None and any(SHUFFLED_OF.get(b, b) != fitted for b in others):
            runs = ", ".join(b for b in others if SHUFFLED_OF.get(b, b) != fitted)
            notes.append(f"{path} was fitted on {fitted} prompts; on {runs} its prediction describes another set")
        methods = (topology.meta.get("provenance") or {}).get("regime_methods") or []
        if (note := prior_mismatch_note(methods, prior)) is not None:
            notes.append(f"{path}: {note}")
    return notes


def fitted_prompt_ids(traces: Sequence[str], benchmark: str) -> set[str]:
    """Prompt ids of ``benchmark`` in the trace files ``traces`` (each read once); a shuffled set
    and its source are one set here (the same prompts, ids and texts in another order)."""
    base = SHUFFLED_OF.get(benchmark, benchmark)
    ids: set[str] = set()
    for path in dict.fromkeys(traces):
        if not os.path.exists(path):
            print(f"[goose] warning: fitted trace {path} is missing; its prompts cannot be held out",
                  file=sys.stderr)
            continue
        rows = open_trace(path).read(columns=["benchmark", "prompt_id"]).to_pydict()  # validated: one-line errors
        ids.update(p for b, p in zip(rows["benchmark"], rows["prompt_id"]) if SHUFFLED_OF.get(b, b) == base)
    return ids


def holdout_prompts(benchmark: str, fitted_traces: Sequence[str], *, limit: int, holdout: bool = True) -> list[Prompt]:
    """The first ``limit`` prompts of the set (fixed order); with ``holdout``, none that the fit
    traces hold (under the traces' label, a JSONL file's stem)."""
    exclude = fitted_prompt_ids(fitted_traces, set_name(benchmark)) if holdout else set()
    return [p for p in load_prompts(benchmark) if p.id not in exclude][:limit]


def held_out(benches: list[str], fit_traces: dict[str, list[str]], args) -> dict[str, list]:
    """Every set's held-out prompts (none that the fit traces hold; ``fit_traces``: where they come
    from -> those files: validate's topology path -> its provenance traces, the loop's
    ``"--traces SPEC"`` -> its trace files; the error names them), before the model loads and any
    file is written: a set whose every prompt was fitted is a UsageError, not a run of nothing
    (an all-NaN table, a trace writer failing on no cycles after earlier files were written)."""
    holdout = getattr(args, "holdout", True)
    traces = [t for files in fit_traces.values() for t in files]
    missing = [(name, t) for name, files in fit_traces.items() for t in files if not os.path.exists(t)]
    if holdout and missing:  # else its prompts would run and be reported as held out (noise band included)
        name, path = missing[0]
        hint = "; --no-holdout runs the sets anyway, not as held out" if hasattr(args, "holdout") else ""
        raise UsageError(f"{name}: its fit trace {path} is missing, so its prompts cannot be held out{hint}")
    out = {}
    for bench in benches:
        out[bench] = holdout_prompts(bench, traces, limit=args.limit, holdout=holdout)
        if not out[bench]:  # only a holdout empties a set: load_prompts refuses an empty one
            label = set_name(bench)
            where = [name for name, files in fit_traces.items() if fitted_prompt_ids(files, label)]
            hint = "; --no-holdout runs them anyway" if hasattr(args, "holdout") else ""
            raise UsageError(f"--bench {bench}: no held-out prompts (all {len(load_prompts(bench))} are in the fit "
                             f"traces of {', '.join(where) or 'the fit'}){hint}")
    return out


def check_validate_outputs(args, benches: list[str], fit_traces: dict[str, list[str]]) -> None:
    """validate's outputs replace none of its inputs (the topologies, their fit traces, the prompt
    sets, the latency file) nor each other (--out is not a validation trace nor the trace folder),
    before the model loads. A trace from an earlier validate run in --trace-dir is replaced, as a
    rerun should."""
    inputs = {"--topology": args.topology, "--latency": getattr(args, "latency", None),
              "--bench": bench_files(benches),
              **{f"a fit trace of --topology {name}": files for name, files in fit_traces.items()}}
    check_not_an_input(args.out, "--out", inputs)
    if args.trace_dir is None:
        return
    traces = [validation_trace(args.trace_dir, b) for b in benches]
    for trace in traces:
        check_not_an_input(trace, "--trace-dir: the validation trace", inputs)
        check_output_file(trace, "--trace-dir")
    if args.out is not None:
        out, folder = os.path.realpath(args.out), os.path.realpath(args.trace_dir)
        if folder == out or folder.startswith(out + os.sep):
            raise UsageError(f"--out {args.out} is also --trace-dir {args.trace_dir} (or a folder above it): "
                             "the table and the traces need separate paths")
        for bench, trace in zip(benches, traces):
            if os.path.realpath(trace) == out:
                raise UsageError(f"--out {args.out} is also the validation trace of set {set_name(bench)!r} in "
                                 f"--trace-dir {args.trace_dir}: the table would replace the trace")


def picked_up_by(spec: str, path: str) -> bool:
    """Whether ``--traces spec`` (a folder, a file or a glob: :func:`~goose_runtime.fit_inputs.trace_files`)
    would take the file ``path`` (which need not exist yet) as a fit trace."""
    import glob

    if os.path.isdir(spec):
        return os.path.realpath(os.path.dirname(path)) == os.path.realpath(spec)
    if os.path.lexists(spec) or not glob.has_magic(spec):
        return os.path.realpath(spec) == os.path.realpath(path)
    # as written and with symlinked folders resolved (a glob's folder part, where it has no magic)
    paths = {os.path.abspath(path), os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))}
    folder, pattern = os.path.split(os.path.abspath(spec))
    specs = {os.path.abspath(spec)}
    if not glob.has_magic(folder):
        specs.add(os.path.join(os.path.realpath(folder), pattern))
    return any(_glob_matches(s.split(os.sep), p.split(os.sep)) for p in paths for s in specs)


def _glob_matches(pattern: list[str], parts: list[str]) -> bool:
    """Whether path ``parts`` match glob ``pattern`` components as ``glob(recursive=True)`` reads
    them: ``**`` is any number of folders (none included), the rest match one component each.

    Example:
        >>> _glob_matches(["", "t", "**", "*.parquet"], ["", "t", "a", "b", "v.parquet"])
        True
    """
    import fnmatch

    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob_matches(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _glob_matches(pattern[1:], parts[1:])


def check_loop_outputs(args, benches: list[str]) -> None:
    """The loop's own files (validation.json, validation-<set>.parquet) can be written and replace no
    input, and no validation trace lands where ``--traces`` would fit it on the next run."""
    table = os.path.join(args.out_dir, "validation.json")
    check_output_file(table, "--out-dir")
    check_not_an_input(table, "--out-dir: the table", {"--latency": getattr(args, "latency", None),
                                                       "--bench": bench_files(benches)})
    for bench in benches:
        trace = validation_trace(args.out_dir, bench)
        check_output_file(trace, "--out-dir")
        if picked_up_by(args.traces, trace):
            raise UsageError(f"--out-dir {args.out_dir}: its validation trace {os.path.basename(trace)} would be one "
                             f"of the --traces {args.traces} (replacing a fit trace, or fitted by the next run): "
                             "use another --out-dir")
