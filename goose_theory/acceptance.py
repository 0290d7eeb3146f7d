"""Acceptance models: how likely each tree node is to equal the target's argmax.

``p_s`` is a scalar or a list indexed by spine depth (1, 2, ...); ``p_t`` is a scalar or a list
indexed by transition rank (0, 1, ...). Past the end of a list its last value repeats (a
fitted curve is flat beyond the data). The root has q = 1.

Two models, both exact to compute (see :mod:`goose_theory.yields`):

* ``exclusive`` (default): at a reached node, child c is *the* match with probability q(c).
  Siblings are distinct tokens and only one can equal the argmax, so this is exact for greedy
  decoding; it requires the q's of one node's children to sum to <= 1.
* ``independent`` (the paper's analysis): children match independently; the walk takes the
  spine child first, then transition children by rank (UnifiedGreedyWalk). Child c is then
  *taken* with q(c) * prod over earlier siblings (1 - q), so both models reduce to the same
  path-product computation on "effective" probabilities.

Example:
    >>> a = Acceptance.parse("0.6,0.5", "0.05")
    >>> a.spine_q(1), a.spine_q(5), a.transition_q(3)
    (0.6, 0.5, 0.05)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import InputError
from .jsonio import unknown_key

MODELS = ("exclusive", "independent")
DICT_KEYS = ("p_s", "p_t", "model", "p_t_spine", "p_t_chain")  # what to_dict writes and from_dict reads
EXCLUSIVE_TOLERANCE = 1e-9


def pad_with_last(values: np.ndarray, width: int) -> np.ndarray:
    """``values`` (last axis: ranks or depths) widened to ``width`` by repeating its last entry, as
    a rate list repeats its last value past its end.

    Example:
        >>> pad_with_last(np.array([[0.3, 0.1]]), 4).tolist()
        [[0.3, 0.1, 0.1, 0.1]]
    """
    extra = width - values.shape[-1]
    return values if extra <= 0 else np.concatenate([values, np.repeat(values[..., -1:], extra, axis=-1)], axis=-1)


class AcceptanceError(InputError):
    """Bad acceptance parameters; the message names the bad value."""


def _is_number(value: Any) -> bool:  # JSON's true and false are no probabilities
    return isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)


def _to_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except OverflowError:  # JSON allows an integer of any length; float() refuses one past 1.8e308
        raise AcceptanceError(f"{name}: an integer too large for a float is not a probability in [0, 1]") from None


def _as_probabilities(name: str, value: Any) -> tuple[float, ...]:
    if isinstance(value, np.ndarray):
        value = value.tolist()  # plain Python values (a 0-d array: a scalar), checked as the JSON forms are
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise AcceptanceError(f"{name}: {value!r} is not a number or a comma-separated list of numbers") from None
    elif _is_number(value):
        values = [_to_float(name, value)]
    elif isinstance(value, (list, tuple)):
        if not all(_is_number(v) for v in value):  # float() would take "0.5" and true as well
            raise AcceptanceError(f"{name}: {value!r} is not a list of numbers")
        values = [_to_float(name, v) for v in value]
    else:
        raise AcceptanceError(f"{name}: {value!r} is not a probability or a list of probabilities")
    if not values:
        raise AcceptanceError(f"{name}: empty list")
    for v in values:
        if not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise AcceptanceError(f"{name}: {v!r} is not a probability in [0, 1]")
    return tuple(values)


@dataclass(frozen=True)
class Acceptance:
    """Validated acceptance parameters and the model that combines them.

    ``p_t`` applies to transition nodes hung on the root. Measured traces show that transition
    acceptance depends strongly on the parent (the shipped traces' fit, rank 0: 0.31-0.47 under
    the root, 0.07-0.53 under a spine node, 0.51-0.63 under a transition node, by prompt set),
    so two optional overrides exist:
    ``p_t_spine`` for transition children of spine nodes and ``p_t_chain`` for transition
    children of transition nodes. Each is a scalar or a list by rank; ``None`` means "as p_t".
    """

    p_s: tuple[float, ...]
    p_t: tuple[float, ...]
    model: str = "exclusive"
    p_t_spine: tuple[float, ...] | None = None
    p_t_chain: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_s", _as_probabilities("p_s", self.p_s))
        object.__setattr__(self, "p_t", _as_probabilities("p_t", self.p_t))
        for name in ("p_t_spine", "p_t_chain"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _as_probabilities(name, value))
        if self.model not in MODELS:
            raise AcceptanceError(f"model: unknown acceptance model {self.model!r} (expected one of {', '.join(MODELS)})")

    @classmethod
    def parse(cls, p_s: Any, p_t: Any, model: str = "exclusive", *, p_t_spine: Any = None,
              p_t_chain: Any = None) -> "Acceptance":
        """Accept scalars, sequences or comma-separated strings (the CLI form)."""
        return cls(_as_probabilities("p_s", p_s), _as_probabilities("p_t", p_t), model,
                   None if p_t_spine is None else _as_probabilities("p_t_spine", p_t_spine),
                   None if p_t_chain is None else _as_probabilities("p_t_chain", p_t_chain))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Acceptance":
        """Inverse of :meth:`to_dict` (missing overrides mean "as p_t"). An unknown key is refused:
        a typo such as "p_t_chian" was dropped unsaid, and the file priced without its override.

        Example:
            >>> Acceptance.from_dict({"p_s": 0.5, "p_t": 0.1, "p_t_chian": 0.9})
            Traceback (most recent call last):
            goose_theory.acceptance.AcceptanceError: unknown key 'p_t_chian' (an acceptance holds p_s, p_t, model, p_t_spine, p_t_chain); did you mean 'p_t_chain'?
        """
        problem = unknown_key(data, DICT_KEYS, "an acceptance")
        if problem:
            raise AcceptanceError(problem)
        return cls.parse(data["p_s"], data["p_t"], data.get("model", "exclusive"),
                         p_t_spine=data.get("p_t_spine"), p_t_chain=data.get("p_t_chain"))

    def spine_q(self, spine_depth: int) -> float:
        """Match probability of the spine node at depth ``spine_depth`` (>= 1)."""
        return self.p_s[min(spine_depth, len(self.p_s)) - 1]

    def transition_list(self, parent_source: int = 0) -> tuple[float, ...]:
        """p_t by rank for transition children of a parent of ``parent_source`` (0 root, 1 spine,
        2 transition)."""
        override = (None, self.p_t_spine, self.p_t_chain)[parent_source]
        return self.p_t if override is None else override

    def transition_q(self, rank: int, parent_source: int = 0) -> float:
        """Match probability of a transition node of 0-based ``rank`` whose parent is of
        ``parent_source`` (0 root, 1 spine, 2 transition)."""
        values = self.transition_list(parent_source)
        return values[min(rank, len(values) - 1)]

    # The arrays the exact-yield kernels read, built once per (immutable) instance: a fit scores
    # thousands of recorded trees under one acceptance. Callers must not write to them.
    @cached_property
    def p_s_array(self) -> np.ndarray:
        return np.asarray(self.p_s, dtype=np.float64)

    @property
    def p_t_array(self) -> np.ndarray:
        return np.asarray(self.p_t, dtype=np.float64)

    @cached_property
    def p_t_matrix(self) -> np.ndarray:
        """(3, K) p_t by parent source (rows: root, spine, transition) and rank; shorter lists
        are padded with their last value, so row[min(rank, K - 1)] is always right."""
        rows = [np.asarray(self.transition_list(k), dtype=np.float64) for k in range(3)]
        width = max(len(r) for r in rows)
        return np.stack([pad_with_last(r, width) for r in rows])

    @property
    def by_parent(self) -> bool:
        """True when transition acceptance depends on the parent's source."""
        return self.p_t_spine is not None or self.p_t_chain is not None

    @property
    def independent(self) -> bool:
        return self.model == "independent"

    def with_model(self, model: str) -> "Acceptance":
        """The same parameters under ``model`` (one instance per model, reused: the per-tree
        fallback to the independent model asks for it once per infeasible tree)."""
        if model == self.model:
            return self
        twins = self.__dict__.setdefault("_twins", {})  # the frozen fields stay untouched
        if model not in twins:
            twins[model] = replace(self, model=model)
        return twins[model]

    def to_dict(self) -> dict[str, Any]:
        def compact(v: Sequence[float]) -> float | list[float]:
            return v[0] if len(v) == 1 else list(v)
        out: dict[str, Any] = {"p_s": compact(self.p_s), "p_t": compact(self.p_t), "model": self.model}
        for name in ("p_t_spine", "p_t_chain"):
            if getattr(self, name) is not None:
                out[name] = compact(getattr(self, name))
        return out
