"""app/fitted.py: the fitted model's text and the arguments it becomes; and every docstring
Example: of the explorer's pure modules (pytest's doctest collection covers the packages, not
app/, whose explorer.py draws a page when imported)."""
from __future__ import annotations

import doctest
import importlib

import pytest

from app import fitted
from app.compute import whatif
from goose_theory.acceptance import Acceptance
from goose_theory.optimize import build_topology


@pytest.mark.parametrize("module", ["app.fitted", "app.compute", "app.compute_io", "app.views", "app.charts",
                                    "app.sections.sidebar", "app.sections.traces", "app.sections.cost",
                                    "app.sections.whatif"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


ENTRY = {"acceptance": Acceptance.parse([0.3, 0.25, 0.1], [0.4, 0.1], p_t_spine=0.05, p_t_chain=[0.6, 0.2]).to_dict(),
         "budget": 12, "top_k": 4}


def test_arguments_rebuild_the_same_acceptance():
    args = fitted.as_arguments(ENTRY)
    assert Acceptance.parse(args["p_s"], args["p_t"], args["model"], p_t_spine=args["p_t_spine"],
                            p_t_chain=args["p_t_chain"]) == Acceptance.from_dict(ENTRY["acceptance"])
    hash(tuple(args.values()))  # the page's cached calls need hashable arguments


def test_whatif_with_the_arguments_is_the_library_tree():
    acc = Acceptance.from_dict(ENTRY["acceptance"])
    args = fitted.as_arguments(ENTRY)
    r = whatif(args.pop("p_s"), args.pop("p_t"), args.pop("model"), "optimal", budget=12, top_k=4,
               cycles=1000, **args)
    best = build_topology("optimal", acc, budget=12, top_k=4)
    assert r["exact"] == pytest.approx(best.predicted_tau, rel=1e-12)


def test_describe_names_every_parent():
    text = fitted.describe(ENTRY)
    assert text == ("p_s at spine depth d times the chance the matcher offered a d-th token given a (d-1)-th 0.300, "
                    "0.250, 0.100; p_t under the root 0.400, 0.100; p_t under a spine node 0.050; p_t under a "
                    "transition node 0.600, 0.200")


def test_long_lists_are_shortened():
    assert fitted.probabilities_text([0.5] * 7) == ", ".join(["0.500"] * 7)
    assert fitted.probabilities_text([0.5] * 8).endswith(", ..., 0.500 (8 values)")
