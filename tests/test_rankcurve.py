"""Rank curves: the level from the selected methods, the shape from every method, and a power-law
tail past the ranks the traces placed, checked against held-out runs that placed every rank."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from goose_theory.rankcurve import extend_tail, rank_curve, rates_by, tail_exponent

ROOT = Path(__file__).parents[1]


def _rows(counts):  # counts: {rank: (matched, reached)}
    return pd.DataFrame([{"rank": r, "match": i < k} for r, (k, n) in counts.items() for i in range(n)])


def test_rank_curve_borrows_the_reference_shape_past_sparse_ranks():
    sel = _rows({0: (30, 100), 1: (1, 5)})
    ref = _rows({0: (400, 1000), 1: (100, 1000), 2: (20, 1000)})
    curve = rank_curve(sel, ref, exponent=0.0, size=10)
    assert curve[0] == pytest.approx(0.30)
    assert curve[1] == pytest.approx(0.10 * 0.30 / 0.40) and curve[2] == pytest.approx(0.02 * 0.30 / 0.40)


def test_rank_curve_never_rises_with_rank():
    """Candidates come best-first: a fitted rate above the one of a better rank is noise."""
    sel = _rows({0: (40, 100), 1: (2, 100), 2: (9, 100)})
    curve = rank_curve(sel, sel, exponent=0.0, size=10)
    assert curve[0] == pytest.approx(0.40) and curve[1] == pytest.approx(0.02) and curve[2] == pytest.approx(0.02)
    assert all(a >= b for a, b in zip(curve, curve[1:]))


def test_ranks_past_the_reference_decay_by_the_power_law():
    sel = ref = _rows({0: (300, 1000), 1: (90, 1000), 2: (50, 1000), 3: (34, 1000)})
    flat = rank_curve(sel, ref, exponent=0.0, size=10)
    curve = rank_curve(sel, ref, exponent=1.5, size=10)
    assert flat[4:] == [pytest.approx(0.034)] * 6  # the old rule: rank 3's rate repeated
    assert curve[:4] == pytest.approx([0.30, 0.09, 0.05, 0.034])
    assert curve[4:] == pytest.approx([0.034 * (4 / (r + 1)) ** 1.5 for r in range(4, 10)])


def test_a_single_populated_rank_gets_its_whole_shape_from_the_exponent():
    # chains below transitions: goose@8 places almost only rank 0 there
    chain = _rows({0: (440, 1000), 1: (5, 21)})
    curve = rank_curve(chain, chain, exponent=1.0, size=4)
    level = 0.44  # rank 0's own rate; rank 1 (21 nodes) is too sparse for its own
    assert curve == pytest.approx([level, level / 2, level / 3, level / 4])
    assert rank_curve(chain.iloc[:0], chain.iloc[:0], exponent=1.0, size=4) == [0.0]


def test_tail_exponent_recovers_a_power_law():
    rng = np.random.default_rng(7)
    n = np.full(4, 20000.0)
    k = rng.binomial(n.astype(int), 0.3 * (np.arange(4) + 1.0) ** -1.4).astype(float)
    assert tail_exponent(k, n) == pytest.approx(1.4, abs=0.05)
    assert tail_exponent(k[:1], n[:1]) == 0.0  # one rank: no slope, the flat tail
    assert tail_exponent(np.array([50.0, 60.0]), np.array([100.0, 100.0])) == 0.0  # rising: noise, clipped
    assert extend_tail([0.3, 0.1], 2.0, size=4) == pytest.approx([0.3, 0.1, 0.1 * (2 / 3) ** 2, 0.1 * (2 / 4) ** 2])


@pytest.mark.parametrize("fit, held", [("mtbench-b8", "validation-mtbench-holdout40"),
                                       ("stdlib-wide-b8", "validation-stdlib-wide-bylength197")])
def test_the_fitted_tail_predicts_held_out_ranks_better_than_a_flat_one(fit, held):
    """goose@8's traces place root ranks 0-3 only; the held-out runs (goose at B = 60 among them)
    place 4-9 too. Their rates there, relative to rank 3, are far likelier under the fitted power
    law than under the old flat tail."""
    from goose_theory.regimefit import _annotate, _slot_rows
    from goose_theory.regimeinput import read_frames

    def root_transitions(path):
        frames = read_frames([str(ROOT / "traces" / "large" / f"{path}.parquet")])
        return _slot_rows(pd.concat([_annotate(f) for f, _ in frames], ignore_index=True))["root_u"]

    k_fit, n_fit = rates_by(root_transitions(fit), by="rank", size=10)
    assert n_fit[4:].sum() == 0 and n_fit[3] > 1000  # nothing to read past rank 3
    a = tail_exponent(k_fit, n_fit)
    k, n = rates_by(root_transitions(held), by="rank", size=10)
    assert n[4:].min() > 1000

    def loglik(p):
        return float(np.sum(k[4:] * np.log(p) + (n[4:] - k[4:]) * np.log1p(-p)))

    p3 = k[3] / n[3]
    power = p3 * (4 / (np.arange(4, 10) + 1.0)) ** a
    assert 1.2 < a < 2.0
    assert loglik(power) > loglik(np.full(6, p3)) + 50
