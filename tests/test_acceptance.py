"""Acceptance parameters: parsing, validation with messages that name the bad value."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from goose_theory.acceptance import Acceptance, AcceptanceError


def test_lists_and_repetition():
    a = Acceptance.parse("0.6, 0.5,0.4", "0.05,0.03")
    assert a.p_s == (0.6, 0.5, 0.4) and a.p_t == (0.05, 0.03)
    assert [a.spine_q(d) for d in (1, 3, 9)] == [0.6, 0.4, 0.4]
    assert [a.transition_q(r) for r in (0, 1, 7)] == [0.05, 0.03, 0.03]
    assert a.to_dict() == {"p_s": [0.6, 0.5, 0.4], "p_t": [0.05, 0.03], "model": "exclusive"}


@pytest.mark.parametrize("p_s, p_t, model, message", [
    ("1.2", "0.1", "exclusive", r"p_s: 1\.2 is not a probability"),
    ("nan", "0.1", "exclusive", r"p_s: nan is not a probability"),
    ("0.5", "-0.1", "exclusive", r"p_t: -0\.1 is not a probability"),
    ("0.5", "abc", "exclusive", r"p_t: 'abc' is not a number"),
    ("0.5", "", "exclusive", r"p_t: '' is not a number"),
    ("0.5", [], "exclusive", r"p_t: empty list"),
    ("0.5", "0.1", "bursty", r"unknown acceptance model 'bursty'"),
    (True, "0.1", "exclusive", r"p_s: True is not a probability"),
])
def test_bad_values_are_named(p_s, p_t, model, message):
    with pytest.raises(AcceptanceError, match=message):
        Acceptance.parse(p_s, p_t, model)


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=5))
def test_parser_accepts_exactly_probabilities(values):
    text = ",".join(repr(v) for v in values)
    ok = all(math.isfinite(v) and 0 <= v <= 1 for v in values)
    if ok:
        assert Acceptance.parse(text, 0.1).p_s == tuple(values)
    else:
        with pytest.raises(AcceptanceError):
            Acceptance.parse(text, 0.1)


def test_parent_overrides_round_trip():
    a = Acceptance.parse(0.9, "0.4,0.1", p_t_spine="0.05", p_t_chain="0.6,0.1")
    assert a.by_parent and a.transition_q(0, 0) == 0.4 and a.transition_q(0, 1) == 0.05
    assert a.transition_q(5, 2) == 0.1
    assert a.p_t_matrix.tolist() == [[0.4, 0.1], [0.05, 0.05], [0.6, 0.1]]
    assert Acceptance.from_dict(a.to_dict()) == a
    assert a.to_dict()["p_t_spine"] == 0.05 and "p_t_chain" in a.to_dict()
    plain = Acceptance.parse(0.9, 0.1)
    assert not plain.by_parent and "p_t_spine" not in plain.to_dict()
    assert a.with_model("independent").p_t_chain == (0.6, 0.1)


def test_parent_override_validated():
    with pytest.raises(AcceptanceError, match=r"p_t_chain: 1\.5 is not a probability"):
        Acceptance.parse(0.5, 0.1, p_t_chain="1.5")


@pytest.mark.parametrize("p_s", [10**400, [0.5, 10**400], (-10**400,)], ids=["scalar", "list", "negative"])
def test_an_integer_too_large_for_a_float_is_named(p_s):
    # a topology file's acceptance as JSON: float(10**400) raised OverflowError, a traceback
    with pytest.raises(AcceptanceError, match=r"^p_s: an integer too large for a float is not a probability in \[0, 1\]$"):
        Acceptance.from_dict({"p_s": p_s, "p_t": 0.1})


@pytest.mark.parametrize("p_t", [[True], [0.1, "0.2"], [[0.1]], [None]])
def test_a_list_holds_numbers_only(p_t):
    # float() took JSON's true as 1.0 and "0.2" as 0.2
    with pytest.raises(AcceptanceError, match=r"^p_t: .* is not a list of numbers$"):
        Acceptance.from_dict({"p_s": 0.5, "p_t": p_t})


def test_numpy_values_still_parse():
    import numpy as np
    a = Acceptance.parse(np.array([0.6, 0.5]), np.float32(0.25), p_t_chain=np.array(0.5))
    assert a.p_s == (0.6, 0.5) and a.p_t == (0.25,) and a.p_t_chain == (0.5,)


def test_with_model_reuses_one_twin_per_model():
    """The per-tree fallback asks for the independent twin once per infeasible tree: one instance,
    equal (and hashing equal) to a freshly parsed one; the frozen fields are untouched."""
    acc = Acceptance.parse(0.7, [0.4, 0.1], "exclusive", p_t_chain=0.5)
    twin = acc.with_model("independent")
    assert twin is acc.with_model("independent") and acc.with_model("exclusive") is acc
    fresh = Acceptance.parse(0.7, [0.4, 0.1], "independent", p_t_chain=0.5)
    assert twin == fresh and hash(twin) == hash(fresh) and twin.independent
    assert acc == Acceptance.parse(0.7, [0.4, 0.1], "exclusive", p_t_chain=0.5)
    np.testing.assert_array_equal(twin.p_t_matrix, fresh.p_t_matrix)
