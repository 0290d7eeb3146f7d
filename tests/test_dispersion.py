"""Over-dispersion: the beta-binomial fit and the distribution helpers against scipy.stats."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from goose_theory.dispersion import betabinom_logpmf, binom_logpmf, chi2_sf, overdispersion


def test_overdispersion_recovers_beta_binomial_rho():
    rng = np.random.default_rng(0)
    a, b = 3.0, 5.0  # rho = 1/(a+b+1) = 1/9
    n = rng.integers(20, 60, 400)
    k = stats.betabinom.rvs(n, a, b, random_state=rng)
    od = overdispersion(k, n)
    assert od.overdispersed and abs(od.rho - 1 / 9) < 0.04
    flat = overdispersion(rng.binomial(n, 0.4), n)
    assert not flat.overdispersed and flat.rho < 0.02


def test_overdispersion_degenerate_inputs():
    # one prompt, or nothing matched, or everything matched: no beta-binomial to fit, rho unknown
    one = overdispersion(np.array([3]), np.array([10]))
    assert one.prompts == 1 and one.p == 0.3 and np.isnan(one.rho) and not one.overdispersed
    none = overdispersion(np.array([0, 0, 0]), np.array([5, 9, 0]))
    assert none.prompts == 2 and none.p == 0.0 and np.isnan(none.p_value)
    empty = overdispersion(np.array([0]), np.array([0]))
    assert empty.prompts == 0 and np.isnan(empty.p)


def test_distribution_helpers_equal_scipy_stats():
    """The chi2 tail and binomial / beta-binomial log-pmfs (kept off scipy.stats, whose
    import costs ~0.8 s) give scipy.stats' values (the same bits under scipy 1.17, whose formulas
    they copy; a tolerance here, as a later scipy may compute them in another order)."""
    rng = np.random.default_rng(2)
    n = rng.integers(1, 400, 200).astype(float)
    k = np.floor(rng.random(200) * (n + 1))
    for p in (0.003, 0.15, 0.91):
        np.testing.assert_allclose(binom_logpmf(k, n, p), stats.binom.logpmf(k, n, p), rtol=1e-12)
    for a, b in ((0.4, 2.0), (6.4, 1.3), (50.0, 900.0)):
        np.testing.assert_allclose(betabinom_logpmf(k, n, a, b), stats.betabinom.logpmf(k, n, a, b), rtol=1e-12)
    for x, df in ((0.0, 1), (0.7, 1), (3.84, 1), (187.8, 19), (11673.2, 9), (20.0, 20)):
        assert chi2_sf(x, df) == pytest.approx(stats.chi2.sf(x, df), rel=1e-12, abs=0)
