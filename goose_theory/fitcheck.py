"""Model checks for a fit: is p constant along the tree, are prompts alike, does the model
predict the observed tau?

* :func:`curve_test`: constant p against one p per spine depth (or per rank), by a binomial
  likelihood-ratio test and AIC. Sparse tail bins (fewer than ``min_n`` reached nodes) are pooled
  into the last well-populated bin, so the curve only has parameters the data can carry. The LRT
  treats nodes as independent (optimistic under over-dispersion), so a curve is *supported* only
  when both the LRT (p < 0.05) and AIC prefer it.
* over-dispersion across prompts (a beta-binomial fit) lives in :mod:`goose_theory.dispersion`;
  :func:`check_group` runs it on both sources.
* :func:`parent_test`: one p_t per parent source (root / spine / transition) against pooled p_t
  in the pooled model's rank bins (LRT and AIC, supported only when both agree).
* :func:`select_acceptance`: the model the data support (scalar or curves; p_t per parent source
  where supported: ``Acceptance``'s ``p_t_spine`` / ``p_t_chain``).

Goodness of fit and the paper's bound live in :mod:`goose_theory.fitpredict`.

Example:
    >>> t = curve_test(np.array([0, 60, 30, 15]), np.array([0, 100, 100, 100]), start=1)
    >>> t.supported, [round(p, 2) for p in t.curve]
    (True, [0.6, 0.3, 0.15])
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import special

from .acceptance import Acceptance, pad_with_last
from .dispersion import OverDispersion, chi2_sf, overdispersion
from .fit import PARENT_SOURCES, GroupFit
from .topology import PAPER_MAX_SPINE

MIN_BIN = 30


@dataclass(frozen=True)
class CurveTest:
    """Constant p against a curve over bins (spine depth from 1, or rank from 0)."""

    name: str
    curve: tuple[float, ...]  # fitted p per bin (last bin pools the sparse tail)
    bin_n: tuple[int, ...]
    constant: float
    loglik_constant: float
    loglik_curve: float
    lr: float
    df: int
    p_value: float
    aic_constant: float
    aic_curve: float

    @property
    def supported(self) -> bool:
        return bool(self.df > 0 and self.p_value < 0.05 and self.aic_curve < self.aic_constant)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "curve": list(self.curve), "bin_n": list(self.bin_n), "constant": self.constant,
                "lr": self.lr, "df": self.df, "p_value": self.p_value, "aic_constant": self.aic_constant,
                "aic_curve": self.aic_curve, "supported": self.supported}


def _binom_ll(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> float:
    return float(np.sum(special.xlogy(k, p) + special.xlog1py(n - k, -p)))


def pool_tail(x: np.ndarray, bins: int) -> np.ndarray:
    """``x`` (last axis: bins of depth or rank) cut to ``bins`` bins, the last one pooling the tail.

    Example:
        >>> pool_tail(np.array([5, 3, 2, 1]), 2).tolist()
        [5, 6]
    """
    return np.concatenate([x[..., : bins - 1], x[..., bins - 1:].sum(-1, keepdims=True)], axis=-1)


def fill_gaps(pb: np.ndarray, p0: float) -> None:
    """Bins without data (a rank a topology left out, between two it drafted) take the straight
    line between their nearest bins with data, and bins before the first take the pooled ``p0``:
    repeating the previous value rated rank 1 of ranks {0, 2} as rank 0 (0.3, 0.3, 0.1), and the
    optimizer then drafted it above its worth.

    Example:
        >>> pb = np.array([0.3, np.nan, 0.1]); fill_gaps(pb, 0.2); pb.round(3).tolist()
        [0.3, 0.2, 0.1]
    """
    have = np.flatnonzero(~np.isnan(pb))  # never empty: curve_test's last bin holds data (and fitinterval's
    # caller skips a draw without any); bins past the last with data, in a bootstrap draw, repeat its value
    gaps = np.flatnonzero(np.isnan(pb))
    inner = gaps[gaps > have[0]]
    pb[inner] = np.interp(inner, have, pb[have])
    pb[gaps[gaps < have[0]]] = p0


def curve_test(matched: np.ndarray, reached: np.ndarray, *, start: int = 1, min_n: int = MIN_BIN,
               name: str = "curve") -> CurveTest:
    """Binomial LRT and AIC of a per-bin curve against a constant (see module docstring)."""
    k, n = np.asarray(matched, float)[start:], np.asarray(reached, float)[start:]
    used = np.flatnonzero(n > 0)
    if used.size == 0:
        return CurveTest(name, (), (), math.nan, 0.0, 0.0, 0.0, 0, math.nan, math.nan, math.nan)
    well = np.flatnonzero(n >= min_n)
    last = int(well[-1]) if well.size else int(used[0])
    kb, nb = pool_tail(k, last + 1), pool_tail(n, last + 1)
    p0 = kb.sum() / nb.sum()
    with np.errstate(all="ignore"):
        pb = np.where(nb > 0, kb / np.where(nb > 0, nb, 1), np.nan)
    fill_gaps(pb, p0)
    has = nb > 0
    ll0 = _binom_ll(kb[has], nb[has], np.full(has.sum(), p0))
    ll1 = _binom_ll(kb[has], nb[has], pb[has])
    df = int(has.sum()) - 1
    lr = max(0.0, 2 * (ll1 - ll0))
    p_value = chi2_sf(lr, df) if df > 0 else 1.0
    return CurveTest(name, tuple(float(x) for x in pb), tuple(int(x) for x in nb), float(p0), ll0, ll1, lr, df,
                     p_value, 2 * 1 - 2 * ll0, 2 * (df + 1) - 2 * ll1)


@dataclass(frozen=True)
class ParentTest:
    """Pooled p_t against one p_t per parent source, in ``bins`` rank bins (1 = scalar p_t;
    ranks >= bins - 1 share the last bin, as in the pooled curve)."""

    estimates: tuple[float, ...]  # root, spine, transition: pooled over rank (NaN = no reached nodes)
    n: tuple[int, ...]
    bins: int
    loglik_pooled: float
    loglik_by_parent: float
    lr: float
    df: int
    p_value: float
    aic_pooled: float
    aic_by_parent: float

    @property
    def supported(self) -> bool:
        return bool(self.df > 0 and self.p_value < 0.05 and self.aic_by_parent < self.aic_pooled)

    def to_dict(self) -> dict[str, Any]:
        return {"estimates": dict(zip(PARENT_SOURCES, self.estimates)), "n": dict(zip(PARENT_SOURCES, self.n)),
                "bins": self.bins, "lr": self.lr, "df": self.df, "p_value": self.p_value, "aic_pooled": self.aic_pooled,
                "aic_by_parent": self.aic_by_parent, "supported": self.supported}


def parent_test(matched: np.ndarray, reached: np.ndarray, *, bins: int = 1) -> ParentTest:
    """Binomial LRT and AIC of "p_t depends on the parent's source" against pooled p_t.

    ``matched`` / ``reached``: (3, ranks) counts by parent source (root, spine, transition) and
    rank. Example (rank 0 only, two sources that differ):
        >>> t = parent_test(np.array([[40], [5], [60]]), np.array([[100], [100], [100]]))
        >>> t.supported, t.df
        (True, 2)
    """
    k, n = np.asarray(matched, float), np.asarray(reached, float)
    bins = max(1, min(bins, k.shape[1]))
    kb, nb = pool_tail(k, bins), pool_tail(n, bins)
    with np.errstate(all="ignore"):
        p0 = np.where(nb.sum(0) > 0, kb.sum(0) / nb.sum(0), 0.0)
        p1 = np.where(nb > 0, kb / np.where(nb > 0, nb, 1), 0.0)
        est = tuple(float(x) for x in np.where(n.sum(1) > 0, k.sum(1) / n.sum(1), np.nan))
    has1, has0 = nb > 0, nb.sum(0) > 0
    ll0 = _binom_ll(kb[has1], nb[has1], np.broadcast_to(p0, nb.shape)[has1])
    ll1 = _binom_ll(kb[has1], nb[has1], p1[has1])
    df = int(has1.sum() - has0.sum())
    lr = max(0.0, 2 * (ll1 - ll0))
    p_value = chi2_sf(lr, df) if df > 0 else 1.0
    return ParentTest(est, tuple(int(x) for x in n.sum(1)), bins, ll0, ll1, lr, df, p_value,
                      2 * int(has0.sum()) - 2 * ll0, 2 * int(has1.sum()) - 2 * ll1)


def spine_availability(hist: np.ndarray, *, max_spine: int = PAPER_MAX_SPINE) -> tuple[float, ...]:
    """a(d) = P(the matcher offers >= d spine tokens | it offered >= d - 1), d = 1..max_spine,
    from a histogram of offered tokens per cycle (``hist[v]``: cycles that offered v). Empty
    when nothing was recorded; 0 past the longest offer.

    Example:
        >>> spine_availability(np.array([50, 0, 25, 25]), max_spine=4)
        (0.5, 1.0, 0.5, 0.0)
    """
    hist = np.asarray(hist, dtype=float)
    if hist.sum() <= 0:
        return ()
    return tuple(float(a) for a in availability_rows(hist[None, :], max_spine=max_spine)[0])


def availability_rows(hist: np.ndarray, *, max_spine: int = PAPER_MAX_SPINE) -> np.ndarray:
    """:func:`spine_availability` of each row of a (draws, offers) histogram, as a (draws,
    max_spine) array (a row without cycles: all 0)."""
    hist = np.asarray(hist, dtype=float)
    hist = np.pad(hist, ((0, 0), (0, max(0, max_spine + 1 - hist.shape[1]))))
    at_least = hist[:, ::-1].cumsum(1)[:, ::-1]  # at_least[:, v] = cycles that offered >= v tokens
    below, above = at_least[:, :max_spine], at_least[:, 1: max_spine + 1]
    with np.errstate(all="ignore"):
        return np.where(below > 0, above / np.where(below > 0, below, 1.0), 0.0)


@dataclass(frozen=True)
class GroupChecks:
    """All model checks of one group, and the acceptance model they select."""

    spine_depth: CurveTest
    transition_rank: CurveTest
    spine_dispersion: OverDispersion
    transition_dispersion: OverDispersion
    scalar: Acceptance
    selected: Acceptance
    availability: tuple[float, ...] = ()  # a(d): see spine_availability; () = not recorded
    parent: ParentTest | None = None  # None: counts without parent sources
    parent_rank: tuple[CurveTest, ...] = ()  # p_t by rank per parent source (root, spine, transition)

    @property
    def for_recommendation(self) -> Acceptance:
        """The selected model with p_s(d) scaled by a(d): a fixed tree's spine node at depth d
        can only match when the matcher offered a d-th token (as recorded in ``spine_avail``).
        The per-parent p_t overrides are kept."""
        if not self.availability:
            return self.selected
        folded = fold_availability(self.selected.p_s_array, np.asarray(self.availability))
        return replace(self.selected, p_s=tuple(folded.tolist()))

    def to_dict(self) -> dict[str, Any]:
        return {"spine_depth": self.spine_depth.to_dict(), "transition_rank": self.transition_rank.to_dict(),
                "p_t_by_parent": None if self.parent is None else self.parent.to_dict(),
                "p_t_by_parent_rank": {s: t.to_dict() for s, t in zip(PARENT_SOURCES, self.parent_rank)},
                "spine_dispersion": self.spine_dispersion.to_dict(),
                "transition_dispersion": self.transition_dispersion.to_dict(),
                "scalar": self.scalar.to_dict(), "selected": self.selected.to_dict(),
                "spine_availability": list(self.availability),
                "for_recommendation": self.for_recommendation.to_dict()}


def _prob(x: float) -> float:
    return 0.0 if not math.isfinite(x) else min(max(x, 0.0), 1.0)


def fold_availability(p_s: np.ndarray, availability: np.ndarray) -> np.ndarray:
    """p_s(d) times a(d) for d = 1..len(a) (last axis), p_s repeating its last value past its end as
    :meth:`Acceptance.spine_q` does: :attr:`GroupChecks.for_recommendation` on the fit, and
    :mod:`goose_theory.fitinterval` on each bootstrap draw's rows.

    Example:
        >>> fold_availability(np.array([0.9, 0.6]), np.array([0.5, 1.0, 0.5])).tolist()
        [0.45, 0.6, 0.3]
    """
    depths = availability.shape[-1]
    return pad_with_last(p_s, depths)[..., :depths] * availability


def check_group(group: GroupFit, counts: Any, *, model: str = "exclusive", min_n: int = MIN_BIN) -> GroupChecks:
    """Curve tests, the parent-source test and over-dispersion for one group; pick the supported
    model. A source with no reached nodes gets p = 0 (absent from the recorded trees), a parent
    source with no reached transition children the pooled p_t."""
    c = group.clusters
    sm, sr = counts.spine_matched[c], counts.spine_reached[c]
    rm, rr = counts.rank_matched[c], counts.rank_reached[c]
    depth = curve_test(sm.sum(0), sr.sum(0), start=1, min_n=min_n, name="p_s by spine depth")
    rank = curve_test(rm.sum(0), rr.sum(0), start=0, min_n=min_n, name="p_t by rank")
    scalar = Acceptance.parse(_prob(group.p_s.estimate), _prob(group.p_t.estimate), model)
    p_s = [_prob(x) for x in depth.curve] if depth.supported else scalar.p_s
    p_t = [_prob(x) for x in rank.curve] if rank.supported else scalar.p_t
    selected = Acceptance.parse(p_s, p_t, model)
    parent, parent_rank = None, ()
    if getattr(counts, "parent_rank_reached", None) is not None:
        pm, pr = counts.parent_rank_matched[c].sum(0), counts.parent_rank_reached[c].sum(0)
        parent = parent_test(pm, pr, bins=len(rank.curve) if rank.supported else 1)
        parent_rank = tuple(curve_test(pm[k], pr[k], start=0, min_n=min_n, name=f"p_t by rank under {s}")
                            for k, s in enumerate(PARENT_SOURCES))
        if parent.supported:
            per = [_source_p_t(t, pm[k], pr[k], p_t) for k, t in enumerate(parent_rank)]
            selected = Acceptance.parse(p_s, per[0], model, p_t_spine=per[1], p_t_chain=per[2])
    units = np.unique(counts.cluster_prompt[c], return_inverse=True)[1]  # per prompt, as the bootstrap
    per_prompt = [np.bincount(units, weights=x.sum(1)) for x in (sm, sr, rm, rr)]
    return GroupChecks(depth, rank, overdispersion(per_prompt[0], per_prompt[1], name="p_s"),
                       overdispersion(per_prompt[2], per_prompt[3], name="p_t"), scalar, selected,
                       spine_availability(counts.spine_avail[c].sum(0)), parent, parent_rank)


def _source_p_t(test: CurveTest, matched: np.ndarray, reached: np.ndarray, pooled: Any) -> Any:
    """One parent source's p_t: its rank curve where supported, else its scalar; pooled if unseen."""
    if reached.sum() == 0:
        return pooled
    return [_prob(x) for x in test.curve] if test.supported else _prob(matched.sum() / reached.sum())


def select_acceptance(group: GroupFit, counts: Any, *, model: str = "exclusive") -> Acceptance:
    """The acceptance model the data support (depth/rank curves and p_t per parent source only
    where LRT and AIC agree)."""
    return check_group(group, counts, model=model).selected
