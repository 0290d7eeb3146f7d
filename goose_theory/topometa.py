"""The shapes of the metadata the toolkit writes into a topology file, checked on load.

``fit-acceptance --out`` and ``goose loop`` store what a file was fitted on and what it predicts
(``predicted_tau`` and its 95% interval ``predicted_ci95``, ``acceptance``, ``provenance``,
``regime_fit``); ``goose validate`` reads them back to predict tau and to hold the fitted prompts
out. A hand-edited file may hold anything
there, so each of those keys, where present, must have the type the toolkit wrote: otherwise the
file is refused on load with one line, rather than failing mid-run with an AttributeError.
Only the shapes are checked, and what validate predicts with is parsed: the two acceptance models
(``acceptance``, ``provenance.fitted.selected``), the prediction, its interval and prompt counts (float-convertible:
JSON allows an integer of any length), and the regime fit (matched and unmatched acceptance, the
share psi, the spine models); other values are validated where they are used.

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
import sys
from typing import Any, Mapping

from .acceptance import Acceptance, AcceptanceError
from .jsonio import json_at, json_misfit

_NULL = type(None)  # every key may be absent or null
_NUMBER, _OBJECT, _LIST = ((int, float, _NULL), "a number"), ((dict, _NULL), "an object"), ((list, _NULL), "a list")
_COUNT = ((int, _NULL), "a number of prompts")
# dotted key -> (allowed types, what to call them)
SHAPES: dict[str, tuple[tuple[type, ...], str]] = {
    "predicted_tau": _NUMBER, "predicted_ci95": _LIST, "acceptance": _OBJECT, "provenance": _OBJECT, "regime_fit": _OBJECT,
    "provenance.traces": _LIST, "provenance.fitted": _OBJECT, "provenance.fitted.selected": _OBJECT,
    "provenance.group_key": _OBJECT, "provenance.regime_budgets": _LIST, "provenance.prompts": _COUNT,
    "regime_fit.unmatched": _OBJECT, "regime_fit.matched": _OBJECT, "regime_fit.confident": _OBJECT,
    "regime_fit.spines": _LIST, "regime_fit.psi": _NUMBER, "regime_fit.psi_confident": _NUMBER,
    "regime_fit.prompts": _COUNT,
}


ACCEPTANCE_KEYS = ("acceptance", "provenance.fitted.selected")
# what validate prices goose with (regime.regime_tau); the confident regime is optional
REGIME_REQUIRED = ("matched", "unmatched", "psi")
REGIME_ACCEPTANCES = ("matched", "unmatched", "confident")
SPINE_KEYS = ("p_s", "avail", "end")  # regimespare.SpineModel, which the trace replay reads
TOO_LARGE = "an integer too large for a float"  # JSON allows any number of digits; float() does not
# the exact optimum costs O(node types x children x budget^2): 2000 ranks at budget 1200 ran for
# minutes (1200 ranks 26 s, 1000 ranks at budget 10000 1.5 s); a real adjacency table keeps 10
MAX_TOP_K = 1000


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """Why a topology's ``meta`` cannot be read by the toolkit (one phrase), or None."""
    misfit = json_misfit(meta, SHAPES)
    if misfit:
        key, what, value = misfit
        return f"{key} must be {what}, got {value!r}"[:200]
    if not all(isinstance(t, str) for t in json_at(meta, "provenance.traces") or []):
        return "provenance.traces must be a list of file names"
    for key in ACCEPTANCE_KEYS:  # validate predicts with these: a bad value is named with its file now
        acc = json_at(meta, key)
        if isinstance(acc, dict):  # half a model ({"p_s": 0.5}) is no model: goose yield --acceptance-from read it
            problem = _missing_rate(key, acc) or _acceptance_problem(key, acc)
            if problem:
                return problem
    return (_tau_problem(meta.get("predicted_tau")) or _interval_problem(meta.get("predicted_ci95"))
            or _prompts_problem(meta) or _top_k_problem(meta.get("top_k")) or _regime_fit_problem(meta.get("regime_fit")))


def _top_k_problem(top_k: Any) -> str | None:
    """optimize / compare take a file's top_k as --top-k's default (a bool or 3.0 fell back to 10 unsaid)."""
    if top_k is None or (type(top_k) is int and 1 <= top_k <= MAX_TOP_K):
        return None
    return f"top_k must be a whole number of ranks in 1..{MAX_TOP_K}, got {top_k!r}"[:200]


def _tau_problem(tau: Any) -> str | None:
    """validate reads the prediction with float() mid-run (after the model loads), so a value float()
    refuses fails here."""
    if tau is None:
        return None
    what = "predicted_tau must be a number of tokens per cycle, at least 1, got"
    try:
        value = float(tau)
    except OverflowError:
        return f"{what} {TOO_LARGE}"
    if not 1 <= value < math.inf:  # NaN too: a file with no prediction leaves the key out
        return f"{what} {tau!r}"
    return None


def _interval_problem(ci: Any) -> str | None:
    """validate prints the interval beside the prediction: two taus, low first (a bootstrap's
    percentiles need not hold the point estimate, so that is not asked)."""
    if ci is None:
        return None
    ok = (len(ci) == 2 and all(type(x) in (int, float) for x in ci)
          and 1 <= ci[0] <= ci[1] <= sys.float_info.max)  # NaN, inf and 10**400 fail it
    return None if ok else f"predicted_ci95 must be two taus [low, high] with 1 <= low <= high, got {ci!r}"[:200]


def _prompts_problem(meta: Mapping[str, Any]) -> str | None:
    """validate's noise band divides by these counts (a float division) after decoding."""
    for key in ("provenance.prompts", "regime_fit.prompts"):
        count = json_at(meta, key)
        if count is not None and not 0 <= count <= sys.float_info.max:
            return f"{key} must be a number of prompts, at least 0, got {count!r}"[:200]
    return None


def _missing_rate(key: str, acc: Mapping[str, Any]) -> str | None:
    missing = next((k for k in ("p_s", "p_t") if k not in acc), None)
    return None if missing is None else f"{key}.{missing} is missing"


def _acceptance_problem(key: str, acc: Mapping[str, Any]) -> str | None:
    try:
        Acceptance.from_dict(acc)
    except AcceptanceError as exc:
        return f"{key}: {exc}"[:200]
    return None


def _regime_fit_problem(fit: Mapping[str, Any] | None) -> str | None:
    """validate prices goose with a regime fit mid-run (after the model loads and --trace-dir is
    made): whatever it reads must be there and parse now."""
    if fit is None:
        return None
    missing = next((key for key in REGIME_REQUIRED if fit.get(key) is None), None)
    if missing:
        return f"regime_fit.{missing} is missing"
    return _regime_acceptance_problem(fit) or _shares_problem(fit) or _spines_problem(fit.get("spines") or [])


def _regime_acceptance_problem(fit: Mapping[str, Any]) -> str | None:
    for key in REGIME_ACCEPTANCES:
        acc = fit.get(key)
        if acc is None:  # only the confident one may be absent (REGIME_REQUIRED)
            continue
        problem = _missing_rate(f"regime_fit.{key}", acc) or _acceptance_problem(f"regime_fit.{key}", acc)
        if problem:
            return problem
    return None


def _shares_problem(fit: Mapping[str, Any]) -> str | None:
    for key in ("psi", "psi_confident"):  # shares of all tokens
        share = fit.get(key)
        if share is not None and not 0 <= share <= 1:  # NaN too
            return f"regime_fit.{key} must be a share of tokens in [0, 1], got {share!r}"[:200]
    if (fit.get("psi_confident") or 0) > fit["psi"]:  # regime.regime_tau refuses it: confident tokens are matched ones
        return f"regime_fit.psi_confident {fit['psi_confident']!r} exceeds psi {fit['psi']!r}"
    return None


def _spines_problem(spines: list) -> str | None:
    for i, spine in enumerate(spines):
        if spine is None:
            continue
        if not isinstance(spine, dict):
            return f"regime_fit.spines[{i}] must be an object, got {spine!r}"[:200]
        for key in SPINE_KEYS:  # each is indexed from its first value on
            values = spine.get(key)
            if not isinstance(values, list) or not values or not all(_probability(v) for v in values):
                return f"regime_fit.spines[{i}].{key} must be a non-empty list of probabilities in [0, 1]"
    return None


def _probability(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1
