"""Over-dispersion across prompts: a beta-binomial fit of per-prompt counts against one binomial.

Cycles within one prompt are not independent (a prompt that repeats itself matches often all
along), so the binomial's variance understates the spread of per-prompt acceptance.
:func:`overdispersion` fits Beta-Binomial(n, a, b) to per-prompt ``matched`` of ``reached`` by
maximum likelihood and reports rho = 1 / (a + b + 1), the intra-prompt correlation (0 for a
binomial), with a boundary likelihood-ratio test (p = 0.5 * the chi2_1 tail, as rho = 0 sits on
the edge of the parameter space). The distribution helpers below are scipy.stats' formulas
without its import.

Example:
    >>> od = overdispersion(np.array([2, 18, 3, 17]), np.array([20, 20, 20, 20]))
    >>> od.overdispersed, round(od.p, 3)
    (True, 0.5)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special


# scipy.stats.chi2.sf, binom.logpmf and betabinom.logpmf, written as scipy 1.17 computes them (the
# same special functions in the same order, so the same bits; tests/test_dispersion.py compares them):
# importing scipy.stats costs 0.4-0.6 s (bench/bench_fit_cli.py), a fifth of a `fit-acceptance` run.
def chi2_sf(x: float, df: int) -> float:
    """P(chi2_df > x) for x >= 0."""
    return float(special.chdtrc(df, x))


def binom_logpmf(k: np.ndarray, n: np.ndarray, p: float | np.ndarray) -> np.ndarray:
    """log P(K = k) for K ~ Binomial(n, p), integral k in 0..n."""
    combiln = special.gammaln(n + 1) - (special.gammaln(k + 1) + special.gammaln(n - k + 1))
    return combiln + special.xlogy(k, p) + special.xlog1py(n - k, -p)


def betabinom_logpmf(k: np.ndarray, n: np.ndarray, a: float, b: float) -> np.ndarray:
    """log P(K = k) for K ~ BetaBinomial(n, a, b), integral k in 0..n."""
    combiln = -np.log(n + 1) - special.betaln(n - k + 1, k + 1)
    return combiln + special.betaln(k + a, n - k + b) - special.betaln(a, b)


@dataclass(frozen=True)
class OverDispersion:
    """Beta-binomial against binomial over per-prompt counts."""

    name: str
    prompts: int
    p: float
    rho: float  # intra-prompt correlation; 0 = binomial
    alpha: float
    beta: float
    lr: float
    p_value: float

    @property
    def overdispersed(self) -> bool:
        return bool(self.p_value < 0.05)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "prompts": self.prompts, "p": self.p, "rho": self.rho, "alpha": self.alpha,
                "beta": self.beta, "lr": self.lr, "p_value": self.p_value, "overdispersed": self.overdispersed}


def overdispersion(matched: np.ndarray, reached: np.ndarray, *, name: str = "p") -> OverDispersion:
    """MLE beta-binomial fit of per-prompt ``matched`` of ``reached`` (arrays over prompts)."""
    k, n = np.asarray(matched, float), np.asarray(reached, float)
    keep = n > 0
    k, n = k[keep], n[keep]
    if k.size < 2 or k.sum() in (0, n.sum()):
        p = k.sum() / n.sum() if n.sum() else math.nan
        return OverDispersion(name, int(k.size), float(p), math.nan, math.nan, math.nan, 0.0, math.nan)
    p = k.sum() / n.sum()
    ll_bin = float(np.sum(binom_logpmf(k, n, p)))  # with the binomial coefficient, as betabinom

    const = float(np.sum(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)))

    def nll(theta: np.ndarray) -> float:
        # the beta-binomial log-pmf summed, its a, b-free part taken once (the final value
        # below is betabinom_logpmf's)
        a, b = np.exp(theta)
        return -(const + float(np.sum(special.betaln(k + a, n - k + b))) - k.size * float(special.betaln(a, b)))

    # start at the pooled mean with a few precisions; bounds keep exp() finite
    best = None
    for log_precision in (1.0, 4.0, 10.0):
        x0 = np.array([math.log(p * math.exp(log_precision)), math.log((1 - p) * math.exp(log_precision))])
        res = optimize.minimize(nll, x0, method="Nelder-Mead", bounds=[(-10, 25), (-10, 25)],
                                options={"xatol": 1e-6, "fatol": 1e-8})
        if best is None or res.fun < best.fun:
            best = res
    a, b = np.exp(best.x)
    ll_bb = float(np.sum(betabinom_logpmf(k, n, a, b)))
    lr = max(0.0, 2 * (ll_bb - ll_bin))
    return OverDispersion(name, int(k.size), float(p), float(1 / (a + b + 1)), float(a), float(b), lr,
                          0.5 * chi2_sf(lr, 1))
