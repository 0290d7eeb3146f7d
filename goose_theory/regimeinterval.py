"""How sure is a regime file's predicted tau? A prompt bootstrap of the two-regime fit.

``goose loop`` and ``fit-acceptance --regimes`` export two-regime topologies
(:mod:`goose_theory.regimeexport`) whose ``predicted_tau`` is what ``goose validate`` holds against
the measured tau. That prediction rests on a few fitted prompts (16 per set in ``traces/prior``),
so it carries a sampling error of its own. Every draw here resamples the fit's prompts with
replacement (a prompt is the unit: its rows in every trace file, across methods; those with rows of
the fitted methods and the others apart, :func:`strata`), redoes the
whole two-regime fit (:func:`~goose_theory.regimefit.fit_regimes`: psi, per-regime acceptance,
slot fill, spine models, the confident split) on the resampled rows, and prices the *same* trees,
the exported ones, under it (:func:`~goose_theory.regime.file_prediction`). The 2.5 and 97.5 percentiles over the draws
are the file's ``predicted_ci95``.

What it leaves out, as :mod:`goose_theory.fitinterval` does for one regime: sampling error alone;
the trees were chosen on the same data (the optimum's prediction tends to run above what the same
trees measure), and a model error is the same under every draw. A draw without confident cycles
prices a three-regime file's confident tree at nothing (two regimes), as an export from such data
would. Percentile
ends need draws: at the default 100 each rests on two or three draws, so they move a little with the
seed; below that the CLIs add a note.

Cost: each draw refits (pandas), the single tree's fit and the split one together
(:func:`~goose_theory.regimefit.fit_regimes_both`), 0.137 s a draw on stdlib of ``traces/prior``
(Zen 4 EPYC, 7 Dec); ``DRAWS`` = 100 draws add about 14 s a set.

Example: ``regime_intervals(read_frames(files, benchmark="stdlib"), ("goose+prior@8",), [single, pair])``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from .regime import file_prediction
from .regimefile import without_interval
from .regimefit import fit_regimes, fit_regimes_both
from .topology import Topology

DRAWS = 100
KEY = ["benchmark", "prompt_id"]


def prompt_keys(frames: Sequence[tuple[pd.DataFrame, dict]]) -> pd.MultiIndex:
    """The (benchmark, prompt_id) clusters of ``frames``, sorted: the bootstrap's unit."""
    keys = pd.concat([frame[KEY] for frame, _ in frames] or [pd.DataFrame(columns=KEY)]).drop_duplicates()
    return pd.MultiIndex.from_frame(keys.astype(str).sort_values(KEY))


def strata(frames: Sequence[tuple[pd.DataFrame, dict]], methods: Sequence[str]) -> list[pd.MultiIndex]:
    """The prompts, drawn apart in two strata: those with rows of the fitted ``methods`` (all prompts
    when none are named), on which the per-regime acceptance rests, then the others, which count for
    psi alone. Drawn together, a draw could miss every fitted prompt: in ``traces/``, goose@16 (the
    methods nearest budgets >= 12) ran 6 of stdlib's 16 prompts, and draw 68 of seed 0 held none of
    them (the fit refused it). Empty strata are left out."""
    keys = prompt_keys(frames)
    if not methods:
        return [keys] if len(keys) else []
    fitted = prompt_keys([(f[f["method"].isin(list(methods))], m) for f, m in frames])
    return [s for s in (fitted, keys.difference(fitted)) if len(s)]


def draw_counts(groups: Sequence[pd.MultiIndex], rng: np.random.Generator) -> pd.Series:
    """One bootstrap draw: how often each prompt is taken, each stratum resampled to its own size.

    Example:
        >>> k = pd.MultiIndex.from_tuples([("b", "x"), ("b", "y")])
        >>> int(draw_counts([k[:1], k[1:]], np.random.default_rng(0)).sum())
        2
    """
    return pd.concat([pd.Series(rng.multinomial(len(g), np.full(len(g), 1.0 / len(g))), index=g) for g in groups])


def resample_frames(frames: Sequence[tuple[pd.DataFrame, dict]], counts: pd.Series) -> list[tuple[pd.DataFrame, dict]]:
    """``frames`` with each prompt's rows taken ``counts[(benchmark, prompt_id)]`` times (0: left out).
    Copy j > 0 of a prompt is the prompt ``"<id>#<j>"``, so each copy is a cluster of its own, and
    copies are whole blocks in the original row order: a cycle's rows stay together, root first, as
    the fit indexes parents from its root row.

    Example:
        >>> f = pd.DataFrame({"benchmark": "b", "prompt_id": ["x", "x", "y"], "node": [0, 1, 0]})
        >>> counts = pd.Series([2, 0], index=pd.MultiIndex.from_tuples([("b", "x"), ("b", "y")]))
        >>> resample_frames([(f, {})], counts)[0][0]["prompt_id"].tolist()
        ['x', 'x', 'x#1', 'x#1']
    """
    out = []
    for frame, meta in frames:
        times = counts.reindex(pd.MultiIndex.from_frame(frame[KEY].astype(str))).fillna(0).to_numpy(dtype=np.int64)
        parts = [frame[times > j] if j == 0 else frame[times > j].assign(
                 prompt_id=lambda f, j=j: f["prompt_id"].astype(str) + f"#{j}") for j in range(int(times.max(initial=0)))]
        if parts and sum(len(p) for p in parts):
            out.append((pd.concat(parts, ignore_index=True), meta))
    return out


def _draw_fits(frames, methods: Sequence[str], plain: bool) -> tuple[Any, Any]:
    """(plain fit, or None where no file needs it; split fit) of one draw. The split fit prices the
    regime files, as the export does: without confident cycles it *is* the plain fit (the confident
    split cut nothing; tests/test_regimefit.py)."""
    if plain:
        return fit_regimes_both(frames, methods=methods)
    return None, fit_regimes(frames, methods=methods, split=True)


def _price(topology: Topology, plain: Any, split: Any) -> float:
    """:func:`~goose_theory.regime.file_prediction` under the fit its kind of file was exported from."""
    return file_prediction(topology, split if topology.meta.get("regimes") else plain).tau


def _check_pricing(frames, methods: Sequence[str], topologies: Sequence[Topology]) -> None:
    """Each topology priced under the fit of all the prompts is its ``predicted_tau``: the draws price
    it the way its prediction was made (a file exported otherwise, e.g. ``spare=False``, is refused)."""
    plain, split = _draw_fits(frames, methods, True)
    for t in topologies:
        here, said = _price(t, plain, split), t.meta.get("predicted_tau")
        if said is not None and abs(here - said) > 1e-9 * said:
            raise ValueError(f"the {t.meta.get('rule', 'topology')} file predicts tau {said!r}, but its fit prices "
                             f"it at {here!r}: it was not exported as this interval prices it")


def draw_taus(frames: Sequence[tuple[pd.DataFrame, dict]], methods: Sequence[str], topologies: Sequence[Topology], *,
              draws: int = DRAWS, seed: int = 0) -> np.ndarray:
    """(draws, topologies) array: each exported topology priced under the two-regime fit of each
    bootstrap draw of the prompts (``default_rng(seed)``; the same draws for every topology, so
    differences between them are paired)."""
    groups, rng = strata(frames, methods), np.random.default_rng(seed)
    plain = any(not t.meta.get("regimes") for t in topologies)
    out = np.empty((draws, len(topologies)))
    for d in range(draws):
        fits = _draw_fits(resample_frames(frames, draw_counts(groups, rng)), methods, plain)
        out[d] = [_price(t, *fits) for t in topologies]
    return out


def regime_intervals(frames: Sequence[tuple[pd.DataFrame, dict]], methods: Sequence[str],
                     topologies: Sequence[Topology], *, draws: int = DRAWS, seed: int = 0) -> list[tuple[float, float] | None]:
    """The 95% percentile interval of each topology's predicted tau over ``draws`` bootstrap draws
    (:func:`draw_taus`); None for each when there is nothing to resample (one prompt with rows of
    the fitted ``methods``, or ``draws`` < 1)."""
    groups = strata(frames, methods)
    if draws < 1 or not groups or len(groups[0]) < 2:
        return [None] * len(topologies)
    _check_pricing(frames, methods, topologies)
    taus = draw_taus(frames, methods, topologies, draws=draws, seed=seed)
    return [(float(lo), float(hi)) for lo, hi in np.percentile(taus, [2.5, 97.5], axis=0).T]


def with_intervals(topologies: Sequence[Topology], frames: Sequence[tuple[pd.DataFrame, dict]],
                   methods: Sequence[str], *, draws: int = DRAWS, seed: int = 0) -> list[Topology]:
    """``topologies`` with their ``predicted_ci95`` (:func:`regime_intervals`) in their metadata,
    and with none where there is no interval (a copy of another file's is dropped)."""
    cis = regime_intervals(frames, methods, topologies, draws=draws, seed=seed)
    return [without_interval(t) if ci is None else t.with_meta(predicted_ci95=list(ci)) for t, ci in zip(topologies, cis)]

