"""The acceptance model fitted from traces, as the sidebar holds it once the Traces tab loads it.

``fit-acceptance`` predicts and recommends with p_s by spine depth *times* a(d), the chance that
the context matcher offered a d-th spine token given that it offered a (d-1)-th (a fixed tree's
spine node can only match then), p_t by rank and, where the data support it, by parent source
(:attr:`goose_theory.fitcheck.GroupChecks.for_recommendation`). The sidebar's sliders hold one
p_s, which a What-if tree applies to a spine token it always has; loaded in their place, this
model makes the What-if tab's optimal tree at the recorded budget the very tree ``fit-acceptance``
recommends, with its predicted tau.

No Streamlit here: an entry is a plain dict (``acceptance``: :meth:`Acceptance.to_dict`,
``budget``: the recorded runs', ``top_k``: the ranks they drafted), kept in session state.

Example:
    >>> entry = {"acceptance": {"p_s": [0.3, 0.2], "p_t": 0.05, "model": "exclusive"}, "budget": 8, "top_k": 4}
    >>> as_arguments(entry)
    {'p_s': (0.3, 0.2), 'p_t': (0.05,), 'model': 'exclusive', 'p_t_spine': None, 'p_t_chain': None}
    >>> describe(entry)
    'p_s at spine depth d times the chance the matcher offered a d-th token given a (d-1)-th 0.300, 0.200; p_t 0.050'
"""
from __future__ import annotations

from typing import Any, Sequence

from goose_theory.acceptance import Acceptance

FITTED_KEY = "fitted_acceptance"  # session state: {"label": group, **entry} once loaded
WHERE = {"p_t_spine": "under a spine node", "p_t_chain": "under a transition node"}


def probabilities_text(values: float | Sequence[float], *, head: int = 6) -> str:
    """A list of probabilities, short enough for a caption or a table cell.

    Example:
        >>> probabilities_text((0.5, 0.25, 0.125)), probabilities_text(0.5)
        ('0.500, 0.250, 0.125', '0.500')
        >>> probabilities_text([0.1] * 8 + [0.0] * 12)
        '0.100, 0.100, 0.100, 0.100, 0.100, 0.100, ..., 0.000 (20 values)'
    """
    values = [values] if isinstance(values, (int, float)) else list(values)
    if len(values) <= head + 1:
        return ", ".join(f"{v:.3f}" for v in values)
    return ", ".join(f"{v:.3f}" for v in values[:head]) + f", ..., {values[-1]:.3f} ({len(values)} values)"


def as_arguments(entry: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments every compute call takes (p_s, p_t, model, p_t_spine, p_t_chain), as
    the tuples :class:`Acceptance` keeps (hashable, for the page's cached calls)."""
    acc = Acceptance.from_dict(entry["acceptance"])
    return {"p_s": acc.p_s, "p_t": acc.p_t, "model": acc.model, "p_t_spine": acc.p_t_spine, "p_t_chain": acc.p_t_chain}


def describe(entry: dict[str, Any]) -> str:
    """The loaded model in words (per-parent p_t where the fit kept it)."""
    acc = entry["acceptance"]
    by_parent = any(acc.get(k) is not None for k in WHERE)
    parts = [f"p_s at spine depth d times the chance the matcher offered a d-th token given a (d-1)-th "
             f"{probabilities_text(acc['p_s'])}",
             f"p_t{' under the root' if by_parent else ''} {probabilities_text(acc['p_t'])}"]
    parts += [f"p_t {where} {probabilities_text(acc[k])}" for k, where in WHERE.items() if acc.get(k) is not None]
    return "; ".join(parts)
