"""``goose record-traces`` as a library call: every prompt set decoded by every method, one trace file each.

The files are written together once every set has run (:func:`~goose_theory.fileio.write_files_together`),
and torch's thread count, which is process-wide, is put back when the recording ends (a caller's later
forwards must not run on the recording's one thread).
"""
from __future__ import annotations

import os
import time

from .runner import parse_labeled, run_methods, summarize, write_results_trace


def record_traces(*, out_dir: str, limit: int, max_new_tokens: int, benches: tuple[str, ...],
                  methods: tuple[str, ...], model: str = "default", threads: int | None = None,
                  device: str = "cpu", dtype: str = "float32", sampling: dict | None = None) -> list[dict]:
    """Record one trace file per prompt set (all ``methods``) with ``model`` (fp32 on the CPU unless
    ``device``/``dtype`` say otherwise), greedy or at ``sampling``'s DecodeConfig fields, on ``threads``
    torch threads (None: as they are).

    A set that fails, or a file that cannot be written, replaces none of the files and leaves no new one
    behind. Returns one row per file: benchmark, file, rows, MB, seconds, and the methods' tau/speedup.
    """
    import torch
    from transformers.utils import logging as hf_logging

    from goose_theory.fileio import write_files_together

    from . import model as model_mod
    from .config import DecodeConfig

    hf_logging.disable_progress_bar()
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        bundle = model_mod.load_model(model, device=device, dtype=dtype)
        specs = [parse_labeled(m) for m in methods]
        config = DecodeConfig(max_new_tokens=max_new_tokens, record=True, **(sampling or {}))
        rows, writers = [], {}
        for bench in benches:
            row, write = _record_set(bundle, specs, config, bench, limit=limit, out_dir=out_dir)
            rows.append(row)
            writers[row["file"]] = write
        write_files_together(writers)
    finally:
        torch.set_num_threads(before)
    return rows


def _record_set(bundle, specs: list, config, bench: str, *, limit: int, out_dir: str):
    """One prompt set decoded by every method: its summary row and the writer of its trace file (which
    fills in the row's ``rows`` and ``MB``)."""
    from .prompts import load_prompts

    prompts = load_prompts(bench, limit=limit)
    start = time.perf_counter()
    results = run_methods(bundle, specs, prompts, config=config)
    summary = summarize(results)
    row = {"benchmark": bench, "file": os.path.join(out_dir, f"{bench}.parquet"), "rows": 0, "MB": 0.0,
           "seconds": time.perf_counter() - start, **{f"tau {k}": v.tau for k, v in summary.items()},
           "all = ar": all(v.matches_ar for v in summary.values())}

    def write(tmp: str) -> None:
        row["rows"] = write_results_trace(tmp, bundle, specs, results, config, run_id_prefix=f"record-{bench}",
                                          benchmark=bench, prompt_ids=[p.id for p in prompts])
        row["MB"] = os.path.getsize(tmp) / 1e6
    return row, write
