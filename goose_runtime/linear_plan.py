"""Which linear kernel to use at which row count on this CPU: measured once per device, then cached.

:func:`goose_runtime.cpu_speed.tune_for_cpu` routes every ``nn.Linear`` through oneDNN with a
prepacked weight. That is 1.8-2.1x faster than MKL's sgemm for 2-64 rows on the AMD EPYC host this
project was first measured on, but on an Intel Xeon host of the same VM MKL is faster for 1-3 rows,
and one row is the decode step that every speedup is measured against (``docs/bench-cpu-speed.md``).
So the crossover is measured rather than assumed:

- :func:`measure_stock_rows` times every tuned linear of the model, at 1, 2, 3, 4, 6 and 8 rows,
  once through ``F.linear`` and once through oneDNN (interleaved round by round, so background load
  hits both alike; medians), and :func:`stock_rows_from_times` turns the times into ``k``: the
  largest row count up to which MKL is faster at every count (0: oneDNN everywhere).
- :func:`plan_linears` applies ``k`` to the model: from ``GOOSE_STOCK_ROWS`` when set (A/B runs,
  or to pin it), else from a cache file in the goose cache folder keyed by the CPU's identity, the
  torch thread count and the torch version (:func:`cpu_digest`), else measured (about 2 s) and cached.

Both kernels compute in fp32 and differ only in summation order (logits agree to ~5e-5), the same
kind of difference as a tree forward against a one-token forward, so losslessness (every method
gives ``ar``'s tokens in the same process) is unaffected; the tests check it on the real model.

Example:
    >>> stock_rows_from_times((1, 2, 3, 4), stock_ms=(30.0, 31.0, 40.0, 45.0), onednn_ms=(38.0, 39.0, 40.5, 41.0))
    3
"""
from __future__ import annotations

import hashlib
import os
import statistics
import time
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from goose_theory.errors import OutputPathError
from goose_theory.jsonio import loads_json
from goose_theory.topology import write_json_atomic

from .cpu_speed import OneDnnLinear, set_stock_rows

ROWS = (1, 2, 3, 4, 6, 8)
SCHEMA = "goose-linear-plan/1"


def stock_rows_from_times(rows: Sequence[int], *, stock_ms: Sequence[float], onednn_ms: Sequence[float]) -> int:
    """The largest row count ``k`` such that MKL was faster at every measured count up to ``k``
    (0 when oneDNN is faster at the smallest). ``rows`` ascending."""
    best = 0
    for n, stock, onednn in zip(rows, stock_ms, onednn_ms):
        if stock >= onednn:
            break
        best = n
    return best


def _linears(model) -> list[OneDnnLinear]:
    return [m for m in model.modules() if isinstance(m, OneDnnLinear)]


@torch.inference_mode()
def measure_stock_rows(model, *, rows: Sequence[int] = ROWS, repeats: int = 5,
                       seed: int = 0) -> tuple[int, dict[str, Any]]:
    """Time MKL against oneDNN on the model's own linears; returns ``k`` and the measured table.

    One timing is a pass over every tuned linear (in module order, as a forward runs them) with a
    random input of ``n`` rows; round 0 warms both paths up.
    """
    layers = _linears(model)
    if not layers or repeats < 1:
        return 0, {"rows": list(rows), "stock_ms": [], "onednn_ms": []}
    gen = torch.Generator().manual_seed(seed)
    inputs = {(n, f): torch.randn(1, n, f, generator=gen) for n in rows for f in {m.in_features for m in layers}}
    packed = [(m.weight.detach(), m._pack(), None if m.bias is None else m.bias.detach()) for m in layers]

    def stock(n: int) -> None:
        for m, (w, _, b) in zip(layers, packed):
            F.linear(inputs[n, m.in_features], w, b)

    def onednn(n: int) -> None:
        for m, (_, p, b) in zip(layers, packed):
            torch.ops.mkldnn._linear_pointwise(inputs[n, m.in_features], p, b, "none", [], "")

    times: dict[str, list[list[float]]] = {"stock": [[] for _ in rows], "onednn": [[] for _ in rows]}
    for rep in range(repeats + 1):
        for i, n in enumerate(rows):
            for name, run in (("stock", stock), ("onednn", onednn)):
                start = time.perf_counter()
                run(n)
                if rep:
                    times[name][i].append(time.perf_counter() - start)
    stock_ms = [round(statistics.median(t) * 1e3, 3) for t in times["stock"]]
    onednn_ms = [round(statistics.median(t) * 1e3, 3) for t in times["onednn"]]
    k = stock_rows_from_times(rows, stock_ms=stock_ms, onednn_ms=onednn_ms)
    return k, {"rows": list(rows), "stock_ms": stock_ms, "onednn_ms": onednn_ms}


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo ("cpu" where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "cpu")
    except OSError:
        return "cpu"


def cpu_fields(*names: str) -> dict[str, str]:
    """The first CPU's /proc/cpuinfo fields among ``names``, in the file's order ({} where it
    cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            block = fh.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    pairs = (line.split(":", 1) for line in block.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in pairs if k.strip() in names}


def cpu_id() -> str:
    """"family/model/stepping ISA" of the first CPU, as bench and trace records carry it beside the
    bare model name: an AVX2-only and an AVX-512 AMD EPYC both read "AMD EPYC" on these VMs, and a
    step costs 64 ms on one and 33-41 on the other. ``"?"`` where /proc/cpuinfo cannot be read.

    Example (the AVX2-only EPYC of 3 Dec read ``'25/1/1 avx2'``):
        >>> cpu_id() == "?" or cpu_id().rsplit(" ", 1)[1] in ("avx512", "avx2", "no-avx2")
        True
    """
    fields = cpu_fields("cpu family", "model", "stepping", "flags")
    if not fields:
        return "?"
    flags = set(fields.get("flags", "").split())
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "no-avx2"
    return "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping")) + f" {isa}"


def _cpu_identity() -> str:
    """The first CPU's /proc/cpuinfo fields that tell hosts apart (a VM's model name alone is often
    as bare as "Intel(R) Xeon(R) Processor"): vendor, family, model, stepping, flags."""
    fields = cpu_fields("vendor_id", "cpu family", "model", "stepping", "flags")
    return "|".join(f"{k}={v}" for k, v in fields.items()) or cpu_name()


def cpu_digest() -> str:
    """12 hex digits naming this CPU (its identity, not only its name), torch thread count and
    torch version: the key of every per-device cache file (a VM may wake up on another host)."""
    key = f"{_cpu_identity()}|{torch.get_num_threads()}|{torch.__version__}"
    return hashlib.sha1(key.encode()).hexdigest()[:12]


def plan_path(cache_dir: str, model_name: str) -> str:
    """The cache file of this model's plan on this CPU."""
    return os.path.join(cache_dir, f"linear-plan-{os.path.basename(model_name)}-{cpu_digest()}.json")


def _read_plan(path: str) -> int | None:
    """``stock_rows`` of a cached plan, or None when the file is missing or not a valid plan."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = loads_json(fh.read())
    except (OSError, ValueError):
        return None
    rows = data.get("stock_rows") if isinstance(data, dict) and data.get("schema") == SCHEMA else None
    return rows if isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0 else None


def _env_rows() -> int | None:
    text = os.environ.get("GOOSE_STOCK_ROWS")
    if text is None or text == "":
        return None
    if not text.strip().isdigit():
        raise ValueError(f"GOOSE_STOCK_ROWS must be an integer >= 0, got {text!r}")
    return int(text)


def plan_linears(model, *, cache_dir: str, model_name: str, refresh: bool = False) -> dict[str, Any]:
    """Set the model's MKL/oneDNN crossover (``GOOSE_STOCK_ROWS``, else cached, else measured and
    cached) and return ``{"stock_rows": k, "source": "env"|"cached"|"measured"|"untuned", "cpu": name, "cpu_id": cpu_id()}``
    (``"measured, busy host: not cached"`` when :func:`host_busy`).
    ``refresh`` measures again in place of the cache (``--refresh-latency``: a plan measured while the
    machine was busy would otherwise stay). A model without tuned linears (CUDA, bf16,
    ``GOOSE_CPU_TUNE=0``) is left alone."""
    info: dict[str, Any] = {"stock_rows": 0, "source": "untuned", "cpu": cpu_name(), "cpu_id": cpu_id()}
    if not _linears(model):
        return info
    rows = _env_rows()
    if rows is not None:
        set_stock_rows(model, rows)
        return {**info, "stock_rows": rows, "source": "env"}
    path = plan_path(cache_dir, model_name)
    rows = None if refresh else _read_plan(path)
    if rows is not None:
        set_stock_rows(model, rows)
        return {**info, "stock_rows": rows, "source": "cached", "file": path}
    if not refresh and path in _UNCACHED:  # measured on a busy host earlier in this process
        set_stock_rows(model, _UNCACHED[path])
        return {**info, "stock_rows": _UNCACHED[path], "source": "measured, busy host: not cached"}
    busy = host_busy()
    rows, table = measure_stock_rows(model)
    set_stock_rows(model, rows)
    if busy:  # 6 Dec: one measured beside test runs put a Zen 4's one-row step on MKL for good (64 ms; oneDNN 37)
        _UNCACHED[path] = rows
        return {**info, "stock_rows": rows, "source": "measured, busy host: not cached"}
    _write_plan(path, {"schema": SCHEMA, "stock_rows": rows, "cpu": info["cpu"], "threads": torch.get_num_threads(),
                       "torch": torch.__version__, "model": model_name, **table})
    return {**info, "stock_rows": rows, "source": "measured", "file": path}


_UNCACHED: dict[str, int] = {}  # plan file -> rows measured on a busy host, for this process only


def host_busy() -> bool:
    """Whether other work holds the CPU (1-minute load average above the core count) before a measurement:
    its plan then serves this process but is not cached (the next quiet start measures again)."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except (OSError, AttributeError):  # no load average on this platform (Windows has no os.getloadavg)
        return False


def _write_plan(path: str, data: dict) -> None:
    """Atomically (temp file, rename); a cache folder that cannot be written only costs a re-measure."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomic(path, data)
    except (OSError, OutputPathError):  # atomic_output names a failed write as an OutputPathError
        pass
