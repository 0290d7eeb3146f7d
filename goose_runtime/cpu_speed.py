"""Faster small-batch fp32 linears on the CPU: oneDNN with prepacked weights instead of MKL sgemm.

A verification forward multiplies q = 1..64 rows by every weight matrix. On this machine's AMD
EPYC, MKL 2024.2's sgemm is slow for those shapes (q >= 2 costs about twice q = 1 on the
49152 x 576 lm_head), while oneDNN's matmul on a weight reordered once into its blocked layout
(``torch.ops.mkldnn._reorder_linear_weight`` + ``_linear_pointwise``, the kernels inductor uses)
is 2-3x faster at q = 2..64 and still true fp32: it only sums in another order, so outputs agree
with ``F.linear`` to fp32 rounding (no TF32 / bf16). It is also batch-invariant: a row's output
does not depend on how many rows share the call (MKL's does, in the last bit). Numbers and the
measurement script: ``docs/bench-cpu-speed.md``, ``bench/bench_cpu_speed.py``.

:func:`tune_for_cpu` switches every ``nn.Linear`` of a loaded CPU fp32 model to that path in
place. Which path is faster depends on the CPU: on the AMD EPYC host of this project's VM oneDNN
won at every row count measured, on its Intel Xeon host (AVX-512 with AMX) MKL is faster at 1-3
rows (the decode step: 33 against 41 ms) and oneDNN from 4. :func:`set_stock_rows` sends inputs of at most
``k`` rows back to ``F.linear``; :mod:`goose_runtime.linear_plan` measures ``k`` per device. The
dense parameters stay as they are (tied embeddings, ``state_dict`` and ``.to()`` keep
working); the packed copies cost one more copy of the linear weights in memory. Call it last,
after the model is on its device and in its dtype: it does nothing on CUDA or in other dtypes,
and it is idempotent. ``GOOSE_CPU_TUNE=0`` in the environment turns it off (for A/B runs).

Example:
    >>> from goose_runtime.model import tiny_random_bundle
    >>> bundle = tiny_random_bundle(seed=0)
    >>> tune_for_cpu(bundle.model)["linears"] > 0
    True
    >>> tune_for_cpu(bundle.model)["linears"]   # already tuned: nothing more to do
    0
"""
from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def onednn_available() -> bool:
    """Whether this torch build has the oneDNN linear ops (every x86 CPU wheel has them)."""
    return (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class OneDnnLinear(nn.Linear):
    """An ``nn.Linear`` whose inference forward runs oneDNN on a prepacked copy of its weight.

    Instances are made by :func:`tune_for_cpu` re-classing an existing ``nn.Linear``; the dense
    ``weight`` parameter is kept. When autograd is recording (training, gradient checks) it falls
    back to ``F.linear`` so gradients stay correct.
    """

    _packed: torch.Tensor | None = None
    _packed_version: int = -1
    _stock_rows: int = 0  # inputs of at most this many rows take F.linear (MKL): set_stock_rows

    def _pack(self) -> torch.Tensor:
        # re-pack when the dense weight was changed in place (load_state_dict, copy_), so the two
        # copies can never silently disagree; the version counter costs nothing to read
        version = self.weight._version
        if self._packed is None or version != self._packed_version:
            with torch.no_grad():
                self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach())
            self._packed_version = version
        return self._packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102 - same contract as nn.Linear
        if x.numel() <= self._stock_rows * self.in_features:  # few rows: MKL is faster on some CPUs
            return F.linear(x, self.weight, self.bias)  # (first: the decode step pays no other check)
        usable = (x.device.type == "cpu" and x.dtype == torch.float32 and self.weight.device.type == "cpu"
                  and self.weight.dtype == torch.float32)
        if not usable or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
            return F.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.detach()
        return torch.ops.mkldnn._linear_pointwise(x, self._pack(), bias, "none", [], "")


def _first_param(model: nn.Module) -> torch.Tensor | None:
    return next(iter(model.parameters()), None)


def tune_for_cpu(model: nn.Module) -> dict[str, Any]:
    """Route every ``nn.Linear`` of a CPU fp32 ``model`` through prepacked oneDNN, in place.

    Returns what it did: ``{"applied": bool, "reason": str, "linears": n_switched_now,
    "packed_mb": extra_megabytes}``. A no-op (``applied`` False, with the reason) on CUDA, in
    other dtypes, where oneDNN is missing or with ``GOOSE_CPU_TUNE=0``; calling it again switches nothing more.
    """
    if os.environ.get("GOOSE_CPU_TUNE", "1") == "0":
        return {"applied": False, "reason": "GOOSE_CPU_TUNE=0", "linears": 0, "packed_mb": 0.0}
    param = _first_param(model)
    if param is None or param.device.type != "cpu":
        return {"applied": False, "reason": "model is not on the CPU", "linears": 0, "packed_mb": 0.0}
    if param.dtype != torch.float32:
        return {"applied": False, "reason": f"dtype {param.dtype} is not float32", "linears": 0, "packed_mb": 0.0}
    if not onednn_available():
        return {"applied": False, "reason": "this torch build has no oneDNN linear", "linears": 0,
                "packed_mb": 0.0}
    switched, nbytes = 0, 0
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.dtype == torch.float32:
            module.__class__ = OneDnnLinear
            module._pack()  # pack now: the first decoding cycle should not pay for it
            nbytes += module.weight.numel() * module.weight.element_size()
            switched += 1
    already = sum(isinstance(m, OneDnnLinear) for m in model.modules())
    return {"applied": already > 0, "reason": "oneDNN prepacked fp32 linears" if already else "no nn.Linear found",
            "linears": switched, "packed_mb": round(nbytes / 2**20, 1)}


def set_stock_rows(model: nn.Module, rows: int) -> int:
    """Send inputs of at most ``rows`` rows of every tuned linear of ``model`` to ``F.linear``
    (0: oneDNN for every input). Returns how many linears it set.

    Example:
        >>> from goose_runtime.model import tiny_random_bundle
        >>> model = tiny_random_bundle(seed=0).model
        >>> tune_for_cpu(model)["linears"], set_stock_rows(model, 2)
        (15, 15)
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ValueError(f"stock rows must be an integer >= 0, got {rows!r}")
    count = 0
    for module in model.modules():
        if isinstance(module, OneDnnLinear):
            module._stock_rows = rows
            count += 1
    return count


def untune(model: nn.Module) -> int:
    """Undo :func:`tune_for_cpu` (plain ``nn.Linear`` again, packed copies freed); returns how many."""
    count = 0
    for module in model.modules():
        if isinstance(module, OneDnnLinear):
            module.__dict__.pop("_packed", None)
            module.__dict__.pop("_packed_version", None)
            module.__dict__.pop("_stock_rows", None)
            module.__class__ = nn.Linear
            count += 1
    return count
