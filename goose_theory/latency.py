"""Latency profiles and the cost-aware choice of budget.

A latency profile (JSON, ``"schema": "goose-latency/1"``) records how long one verification
forward pass takes for a tree of n fed tokens (the root is fed too: n = budget + 1), plus the
per-cycle cost outside the forward pass (drafting, the walk, harvesting):

    {"schema": "goose-latency/1", "device": "...", "model": "...", "dtype": "...",
     "sizes": [1, 16, 32, 64], "seconds": [0.020, 0.021, 0.022, 0.026],
     "draft_s": 0.0004, "draft_s_per_node": 0.0}

t(n) is linear interpolation between measured sizes of the seconds' isotonic fit (:func:`isotonic`:
the least-squares non-decreasing sequence); sizes outside the measured range are an error (no
extrapolation). A forward over more tokens is never cheaper, so a dip in a measured profile is noise,
and priced as measured it makes the trees just past it look cheap: a 2-core profile of 3 Dec read 12
rows 101.9 ms and 16 rows 97.1, and the cost-aware rule chose budget 15 where 4 ran 19% faster. The
file keeps the measured seconds. One cycle costs ``t(budget + 1) + draft_s + draft_s_per_node * budget``;
budget 0 is a plain autoregressive step, so its draft cost is omitted.

:func:`cost_aware` picks the budget that maximises E[tau] / cycle seconds: on hardware where big
trees are slow this beats a fixed B = 60.

Example:
    >>> prof = LatencyProfile(sizes=(1, 61), seconds=(0.02, 0.05))
    >>> round(prof.verify_seconds(31), 6), round(prof.cycle_seconds(60), 6)
    (0.035, 0.05)
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .acceptance import Acceptance
from .errors import InputError
from .jsonio import load_json_file, unknown_key
from .optimize import OptimizeResult, _check_int, build_topology, optimal_curve_nodes, parse_rule
from .topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE, PAPER_TOP_K, write_json_atomic

SCHEMA = "goose-latency/1"
# the keys to_dict writes and latency_from_dict reads (device, model, dtype: provenance)
DICT_KEYS = ("schema", "device", "model", "dtype", "sizes", "seconds", "draft_s", "draft_s_per_node")
MAX_SIZE = 4096  # tokens in one forward: the default model's context is 8192 and trees stay far below


class LatencyError(InputError):
    """A bad latency profile; the message is one line naming the problem."""


def isotonic(values: Sequence[float]) -> tuple[float, ...]:
    """The least-squares non-decreasing fit of ``values`` (pool adjacent violators, equal
    weights); a non-decreasing input comes back unchanged.

    Example:
        >>> isotonic([1.0, 3.0, 2.0, 4.0]), isotonic([1.0, 2.0, 2.0])
        ((1.0, 2.5, 2.5, 4.0), (1.0, 2.0, 2.0))
    """
    blocks: list[tuple[float, int]] = []  # (mean, count) of pooled runs
    for v in values:
        mean, count = float(v), 1
        while blocks and blocks[-1][0] > mean:
            prev, n = blocks.pop()
            mean, count = (prev * n + mean * count) / (n + count), n + count
        blocks.append((mean, count))
    return tuple(mean for mean, count in blocks for _ in range(count))


def _number(name: str, value: Any, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LatencyError(f"{name} must be a finite number, got {value!r}"[:200])
    try:
        number = float(value)
    except OverflowError:  # JSON allows an integer of any length; float() refuses one past 1.8e308
        raise LatencyError(f"{name} must be a finite number, got an integer too large for a float") from None
    if not math.isfinite(number):
        raise LatencyError(f"{name} must be a finite number, got {value!r}")
    if (number <= 0) if positive else (number < 0):
        raise LatencyError(f"{name} must be {'> 0' if positive else '>= 0'}, got {value!r}"[:200])
    # no device runs a forward in under a nanosecond or a cycle's drafting for more than a day: such a
    # number (1e-320, 1e308) is a typo, and priced it made tokens/s inf or 0 without a word
    if (positive and number < 1e-9) or number > 86400:
        raise LatencyError(f"{name} must be {'between 1e-9 and' if positive else 'at most'} 86400 seconds "
                           f"(a day), got {value!r}"[:200])
    return number


@dataclass(frozen=True)
class LatencyProfile:
    """Verification seconds per tree size, and the per-cycle drafting cost."""

    sizes: tuple[int, ...]
    seconds: tuple[float, ...]
    draft_s: float = 0.0
    draft_s_per_node: float = 0.0
    device: str = ""
    model: str = ""
    dtype: str = ""

    def __post_init__(self) -> None:
        sizes, seconds = self.sizes, self.seconds
        if not isinstance(sizes, (list, tuple)) or not isinstance(seconds, (list, tuple)):
            raise LatencyError("sizes and seconds must be lists")
        if len(sizes) != len(seconds) or not sizes:
            raise LatencyError(f"sizes and seconds must be non-empty lists of the same length "
                               f"(got {len(sizes)} and {len(seconds)})")
        for n in sizes:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise LatencyError(f"sizes must be integers >= 1, got {n!r}"[:200])
            if n > MAX_SIZE:  # a typo or a hand-made file: the budget scans would run for hours
                raise LatencyError(f"sizes must be at most {MAX_SIZE} tokens (one forward), got {n}"[:200])
        for a, b in zip(sizes, sizes[1:]):
            if b <= a:
                raise LatencyError(f"sizes must be strictly increasing (no duplicates), got {a} then {b}"[:200])
        secs = tuple(_number("seconds entry", t, positive=True) for t in seconds)
        object.__setattr__(self, "sizes", tuple(sizes))
        object.__setattr__(self, "seconds", secs)
        object.__setattr__(self, "draft_s", _number("draft_s", self.draft_s, positive=False))
        object.__setattr__(self, "draft_s_per_node", _number("draft_s_per_node", self.draft_s_per_node, positive=False))
        object.__setattr__(self, "_priced", isotonic(secs))  # what t(n) interpolates (module docstring)

    @property
    def priced_seconds(self) -> tuple[float, ...]:
        """The seconds t(n) interpolates: the measured ones' isotonic fit (equal where they never dip)."""
        return self._priced

    def verify_seconds(self, n_nodes: int) -> float:
        """t(n): one forward pass over ``n_nodes`` fed tokens (linear interpolation of
        :attr:`priced_seconds`)."""
        lo, hi = self.sizes[0], self.sizes[-1]
        if not lo <= n_nodes <= hi:
            raise LatencyError(f"tree size {n_nodes} is outside the measured sizes {lo}..{hi}")
        return float(np.interp(n_nodes, self.sizes, self._priced))

    def cycle_seconds(self, budget: int) -> float:
        """Seconds per verification cycle with ``budget`` drafted nodes (budget 0: no drafting)."""
        if budget == 0:
            return self.verify_seconds(1)
        return self.verify_seconds(budget + 1) + self.draft_s + self.draft_s_per_node * budget

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "device": self.device, "model": self.model, "dtype": self.dtype,
                "sizes": list(self.sizes), "seconds": list(self.seconds), "draft_s": self.draft_s,
                "draft_s_per_node": self.draft_s_per_node}


def latency_from_dict(data: Any) -> LatencyProfile:
    """Parse a ``goose-latency/1`` object; raises :class:`LatencyError`."""
    if not isinstance(data, dict):
        raise LatencyError("a latency profile must be a JSON object")
    if "schema" not in data:
        raise LatencyError(f"no 'schema' key (expected {SCHEMA!r}): not a latency profile")
    if data.get("schema") != SCHEMA:
        raise LatencyError(f"unknown schema {data.get('schema')!r} (expected {SCHEMA!r})")
    for key in ("sizes", "seconds", "draft_s"):
        if key not in data:
            raise LatencyError(f"missing key {key!r}")
    problem = unknown_key(data, DICT_KEYS, "a latency profile")
    if problem:  # a typo ("draft_s_per_nod") priced drafting at 0 s a node unsaid
        raise LatencyError(problem)
    text = {k: data.get(k, "") for k in ("device", "model", "dtype")}
    for key, value in text.items():
        if not isinstance(value, str):
            raise LatencyError(f"{key} must be a string, got {value!r}")
    return LatencyProfile(sizes=data["sizes"], seconds=data["seconds"], draft_s=data["draft_s"],
                          draft_s_per_node=data.get("draft_s_per_node", 0.0), **text)


def load_latency(path: str | os.PathLike) -> LatencyProfile:
    """Read and validate a latency profile; every failure is a one-line LatencyError."""
    return load_json_file(path, latency_from_dict, LatencyError)


def save_latency(profile: LatencyProfile, path: str | os.PathLike) -> None:
    """Write ``profile`` as ``goose-latency/1`` JSON, atomically."""
    write_json_atomic(path, profile.to_dict())


@dataclass(frozen=True)
class CostAwareResult:
    """The budget with the most tokens per second, and the whole per-budget table."""

    best: OptimizeResult
    # per budget: budget, nodes (the tree's node count), predicted_tau, cycle_s (priced at nodes),
    # tokens_per_s, speedup_vs_ar
    table: list[dict]


def priced(latency: LatencyProfile, nodes: int, tau: float) -> dict[str, Any]:
    """A tree of ``nodes`` drafted nodes and E[tau] ``tau`` under ``latency``: its cycle seconds,
    tokens/s and speedup against plain decoding (None when the profile does not measure n = 1).
    LatencyError past the profile's largest size (no extrapolation).

    Example:
        >>> r = priced(LatencyProfile(sizes=(1, 11), seconds=(0.02, 0.04)), 2, 1.75)
        >>> round(r["cycle_s"], 3), round(r["tokens_per_s"], 2), round(r["speedup_vs_ar"], 3)
        (0.024, 72.92, 1.458)
    """
    # a tree smaller than the profile's smallest size is priced at that size: an upper bound,
    # as the priced cost never falls with size (isotonic), and no extrapolation
    cycle = latency.cycle_seconds(max(nodes, latency.sizes[0] - 1))
    rate = tau / cycle
    ar = latency.verify_seconds(1) if latency.sizes[0] == 1 else None
    return {"nodes": nodes, "predicted_tau": tau, "cycle_s": cycle, "tokens_per_s": rate,
            "speedup_vs_ar": None if ar is None else rate * ar}


def cost_aware(acceptance: Acceptance, latency: LatencyProfile, *, rule: str = "optimal",
               budgets: Sequence[int] | None = None, max_depth: int = PAPER_MAX_DEPTH, max_spine: int = PAPER_MAX_SPINE,
               top_k: int = PAPER_TOP_K) -> CostAwareResult:
    """Maximise E[tau] / cycle seconds over ``budgets`` (default: every budget the profile
    covers, i.e. ``sizes[0] - 1 .. sizes[-1] - 1``). ``speedup_vs_ar`` compares with plain
    decoding at 1 token per t(1); it is None when the profile does not cover n = 1.
    Each row is priced at the nodes its tree holds, which can be fewer than its budget (the
    rule's shape ends, or the exclusive model caps the ranks; below the profile's smallest size,
    at that size): the first budget wins a tie, so the
    choice is the smallest budget that builds the best tree. The ``optimal`` rule's E[tau] at every budget comes from one
    optimisation (:func:`goose_theory.optimize.optimal_curve_nodes`, equal to each budget's own tree
    to 1e-12; the chosen budget's row is its tree's exact value); other rules build each budget's tree.

    Example:
        >>> steep = LatencyProfile(sizes=(1, 11), seconds=(0.02, 0.04))  # +10% per node
        >>> res = cost_aware(Acceptance.parse(0.5, 0.05), steep)
        >>> res.best.budget, len(res.table), round(res.table[2]["speedup_vs_ar"], 3)
        (2, 11, 1.458)
    """
    lo, hi = latency.sizes[0], latency.sizes[-1]
    budgets = list(range(lo - 1, hi)) if budgets is None else list(budgets)
    if not budgets:
        raise LatencyError("no budgets to choose from")
    shape = dict(max_depth=max_depth, max_spine=max_spine, top_k=top_k)
    # the range and the rule are checked before the optimizer runs
    for budget in budgets:
        latency.cycle_seconds(_check_int("budget", budget, 0))
    optimal = parse_rule(rule, top_k)[0] == "optimal"
    # optimal trees: every budget's E[tau] from one optimisation; other rules: a tree per budget
    curve, curve_nodes = optimal_curve_nodes(acceptance, budget=max(budgets), **shape) if optimal else ([], [])

    def row(budget: int, nodes: int, tau: float) -> dict:
        return {"budget": budget, **priced(latency, nodes, tau)}

    results = [None if optimal else build_topology(rule, acceptance, budget=b, **shape) for b in budgets]
    # a tree may hold fewer nodes than its budget (the rule's shape ends, or the exclusive model caps
    # the ranks): it is priced at the nodes it holds, so a larger budget never costs more than its tree
    nodes = [curve_nodes[b] for b in budgets] if optimal else [r.topology.budget for r in results]
    table = [row(b, n, curve[b] if optimal else r.predicted_tau) for b, n, r in zip(budgets, nodes, results)]
    best_at = max(range(len(table)), key=lambda i: table[i]["tokens_per_s"])  # the first of equal rates
    best = results[best_at]
    if best is None:  # the chosen tree, and its row scored as that tree (the curve's sums run in another order)
        best = build_topology(rule, acceptance, budget=budgets[best_at], **shape)
        table[best_at] = row(budgets[best_at], best.topology.budget, best.predicted_tau)
    return CostAwareResult(best, table)
