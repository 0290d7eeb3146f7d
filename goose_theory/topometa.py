"""The shapes of the metadata the toolkit writes into a topology file, checked on load.

``fit-acceptance --out`` and ``goose loop`` store what a file was fitted on and what it predicts
(``predicted_tau``, ``acceptance``, ``provenance``, ``regime_fit``); ``goose validate`` reads them
back to predict tau and to hold the fitted prompts out. A hand-edited file may hold anything
there, so each of those keys, where present, must have the type the toolkit wrote: otherwise the
file is refused on load with one line, rather than failing mid-run with an AttributeError.
Only the shapes are checked, and the two acceptance models validate predicts with (``acceptance``,
``provenance.fitted.selected``) are parsed; other values are validated where they are used.

Example:
    >>> meta_problem({"predicted_tau": 2.5, "provenance": {"traces": ["a.parquet"]}}) is None
    True
    >>> meta_problem({"provenance": "fit.json"})
    "provenance must be an object, got 'fit.json'"
    >>> meta_problem({"predicted_tau": float("nan")})
    'predicted_tau must be a number of tokens per cycle, at least 1, got nan'
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from .acceptance import Acceptance, AcceptanceError
from .fileio import json_at, json_misfit

_NULL = type(None)  # every key may be absent or null
_NUMBER, _OBJECT, _LIST = ((int, float, _NULL), "a number"), ((dict, _NULL), "an object"), ((list, _NULL), "a list")
# dotted key -> (allowed types, what to call them)
SHAPES: dict[str, tuple[tuple[type, ...], str]] = {
    "predicted_tau": _NUMBER, "acceptance": _OBJECT, "provenance": _OBJECT, "regime_fit": _OBJECT,
    "provenance.traces": _LIST, "provenance.fitted": _OBJECT, "provenance.fitted.selected": _OBJECT,
    "provenance.group_key": _OBJECT, "provenance.regime_budgets": _LIST,
    "regime_fit.unmatched": _OBJECT, "regime_fit.matched": _OBJECT, "regime_fit.confident": _OBJECT,
    "regime_fit.spines": _LIST,
}


ACCEPTANCE_KEYS = ("acceptance", "provenance.fitted.selected")


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """Why a topology's ``meta`` cannot be read by the toolkit (one phrase), or None."""
    misfit = json_misfit(meta, SHAPES)
    if misfit:
        key, what, value = misfit
        return f"{key} must be {what}, got {value!r}"[:200]
    tau = meta.get("predicted_tau")
    if tau is not None and not 1 <= tau < math.inf:  # NaN too: a file with no prediction leaves the key out
        return f"predicted_tau must be a number of tokens per cycle, at least 1, got {tau!r}"
    if not all(isinstance(t, str) for t in json_at(meta, "provenance.traces") or []):
        return "provenance.traces must be a list of file names"
    for key in ACCEPTANCE_KEYS:  # validate predicts with these: a bad value is named with its file now
        acc = json_at(meta, key)
        if isinstance(acc, dict) and "p_s" in acc and "p_t" in acc:
            try:
                Acceptance.from_dict(acc)
            except AcceptanceError as exc:
                return f"{key}: {exc}"[:200]
    return None

