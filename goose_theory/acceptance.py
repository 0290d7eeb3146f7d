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
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import InputError

MODELS = ("exclusive", "independent")
EXCLUSIVE_TOLERANCE = 1e-9


class AcceptanceError(InputError):
    """Bad acceptance parameters; the message names the bad value."""


def _as_probabilities(name: str, value: Any) -> tuple[float, ...]:
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise AcceptanceError(f"{name}: {value!r} is not a number or a comma-separated list of numbers") from None
    elif isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        values = [float(value)]
    elif isinstance(value, (list, tuple, np.ndarray)):
        try:
            values = [float(v) for v in value]
        except (TypeError, ValueError):
            raise AcceptanceError(f"{name}: {value!r} is not a list of numbers") from None
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
    """Validated acceptance parameters and the model that combines them."""

    p_s: tuple[float, ...]
    p_t: tuple[float, ...]
    model: str = "exclusive"

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_s", _as_probabilities("p_s", self.p_s))
        object.__setattr__(self, "p_t", _as_probabilities("p_t", self.p_t))
        if self.model not in MODELS:
            raise AcceptanceError(f"model: unknown acceptance model {self.model!r} (expected one of {', '.join(MODELS)})")

    @classmethod
    def parse(cls, p_s: Any, p_t: Any, model: str = "exclusive") -> "Acceptance":
        """Accept scalars, sequences or comma-separated strings (the CLI form)."""
        return cls(_as_probabilities("p_s", p_s), _as_probabilities("p_t", p_t), model)

    def spine_q(self, spine_depth: int) -> float:
        """Match probability of the spine node at depth ``spine_depth`` (>= 1)."""
        return self.p_s[min(spine_depth, len(self.p_s)) - 1]

    def transition_q(self, rank: int) -> float:
        """Match probability of a transition node of 0-based ``rank``."""
        return self.p_t[min(rank, len(self.p_t) - 1)]

    @property
    def p_s_array(self) -> np.ndarray:
        return np.asarray(self.p_s, dtype=np.float64)

    @property
    def p_t_array(self) -> np.ndarray:
        return np.asarray(self.p_t, dtype=np.float64)

    @property
    def independent(self) -> bool:
        return self.model == "independent"

    def with_model(self, model: str) -> "Acceptance":
        return Acceptance(self.p_s, self.p_t, model)

    def to_dict(self) -> dict[str, Any]:
        def compact(v: Sequence[float]) -> float | list[float]:
            return v[0] if len(v) == 1 else list(v)
        return {"p_s": compact(self.p_s), "p_t": compact(self.p_t), "model": self.model}
