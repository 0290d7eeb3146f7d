"""The regime file: the two-regime trees of a fit exported as ``goose-topology/1`` files.

:func:`export_topologies` writes two topologies for a :class:`~goose_theory.regimefit.RegimeFit`:
the *single* tree with the highest two-regime tau (:func:`~goose_theory.regimesingle.best_single`), and
the *pair* file (:func:`~goose_theory.regime.best_pair`): the matched tree at the top level, which
every runtime can read, and the trees of the other regimes under ``meta.regimes`` (``unmatched``,
``confident`` with its ``min_match``, ``matched_by_length`` or ``matched``), which
:mod:`goose_theory.regimefile` reads back. Each file records its own predicted tau and the fit it
came from, so ``goose validate`` can price it. :func:`regime_topologies` does the whole step from
trace files.

Example: ``single, pair, fit, methods = regime_topologies(["traces/stdlib.parquet"],
benchmark="stdlib", budget=16, provenance={})``.
"""
from __future__ import annotations

from typing import Any, Sequence

from .regime import SPARE, best_pair
from .regimesingle import best_single
from .regimefile import MIN_MATCH
from .topology import Topology


def export_topologies(fit: Any, budget: int, *, provenance: dict, split: Any = None, spare: bool = SPARE,
                      **limits: Any) -> tuple[Topology, Topology]:
    """(single, pair) topologies for a :class:`~goose_theory.regimefit.RegimeFit` at ``budget``,
    each with its ``predicted_tau`` and its fit in its metadata. The pair's file holds the matched
    tree and ``regimes.unmatched`` (:func:`~goose_theory.regimefile.unmatched_topology`); given a
    ``split`` fit with a confident regime, the pair comes from it and adds ``regimes.confident``
    (:func:`~goose_theory.regimefile.confident_topology`; drafted when the match is confident and
    >= ``min_match`` long). ``spare``: matched and confident trees with spare slots
    (:func:`~goose_theory.regime.best_pair`), the matched ones as ``regimes.matched_by_length``
    (one per offered match length, ``BY_LENGTH``) or else as ``regimes.matched``
    (:func:`~goose_theory.regimefile.matched_topology`), beside the exact-budget tree."""
    single = best_single(fit.matched, fit.unmatched, fit.psi, budget=budget, **limits)
    one = single.matched.with_meta(rule="regime-optimal", predicted_tau=single.prediction.tau,
                                   regime_prediction=single.prediction.to_dict(), weight=single.weight,
                                   acceptance=fit.matched.to_dict(), regime_fit=fit.to_dict(), provenance=provenance)
    if getattr(split, "confident", None) is None:
        split = fit
    pair = best_pair(split.matched, split.unmatched, split.psi, budget=budget, confident=getattr(split, "confident", None),
                     psi_confident=getattr(split, "psi_confident", 0.0), fill=getattr(split, "fill", (1.0, 1.0, 1.0)),
                     spines=getattr(split, "spines", (None, None)) if spare else (None, None), **limits)
    assert pair.unmatched is not None
    regimes: dict[str, Any] = {"unmatched": pair.unmatched.to_dict()}
    if pair.by_length:
        regimes["matched_by_length"] = [t.to_dict() for t in pair.by_length]
    elif pair.matched_spare is not None and pair.matched_spare.budget > budget:
        regimes["matched"] = pair.matched_spare.to_dict()
    if pair.confident is not None:
        regimes["confident"] = {**pair.confident.to_dict(), "min_match": MIN_MATCH}
    two = pair.matched.with_meta(rule="regime-pair" if pair.confident is None else "regime-triple",
                                 predicted_tau=pair.prediction.tau, regime_prediction=pair.prediction.to_dict(),
                                 regimes=regimes, acceptance=split.matched.to_dict(), regime_fit=split.to_dict(),
                                 provenance=provenance)
    return one, two


def regime_topologies(files: Sequence[str], *, benchmark: str | None, budget: int, provenance: dict,
                      spare: bool = SPARE) -> tuple[Topology, Topology, Any, tuple[str, ...]]:
    """Fit the two-regime model from trace ``files`` (one ``benchmark``'s rows, or all) using the
    trace methods whose budgets are nearest ``budget``, and export the (single, pair) topologies
    at ``budget``; also returns the fit and the methods used. Reads those rows into memory."""
    from .regimefill import method_budgets, nearest_methods
    from .regimefit import fit_regimes_both
    from .regimeinput import read_frames

    frames = read_frames(files, benchmark=benchmark)
    methods = tuple(nearest_methods(frames, budget))
    fit, split = fit_regimes_both(frames, methods=methods)
    budgets = method_budgets(frames)
    single, pair = export_topologies(fit, budget, provenance={**provenance, "regime_methods": list(methods),
                                                              "regime_budgets": [budgets[m] for m in methods]},
                                     split=split, spare=spare)
    return single, pair, fit, methods
