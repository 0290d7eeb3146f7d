"""DecodeConfig: every range checked once, by field name; frozen; and the adjacency score each
method harvests."""
from __future__ import annotations

import dataclasses

import pytest

from goose_runtime.config import ConfigError, DecodeConfig, harvest_score
from goose_runtime.methods import parse_method


@pytest.mark.parametrize("field, bad, good", [
    ("max_new_tokens", 0, 1), ("max_new_tokens", 2.5, 3), ("top_k", 0, 1), ("ngram_sizes", (), (3,)),
    ("ngram_sizes", (4, 0), (4, 1)), ("ngram_sizes", [5, 4], (5, 4)), ("ngram_sizes", (128,), (127,)), ("max_spine", 0, 1), ("max_depth", -1, 1),
    ("adjacency_slots", 0, 1), ("ema_alpha", 0.0, 1.0), ("ema_alpha", 1.5, 0.01), ("rho", -0.1, 0.0),
    ("rho", 1.01, 1.0), ("rho", float("nan"), 0.5), ("bypass_len", 0, 1), ("score", "softmax", "prob"),
    ("min_score", 1.0, 0.99), ("min_score", -0.01, 0.0), ("branch_power", 0.0, 0.5),
    ("branch_power", float("inf"), 3.0), ("branch_power", True, 1.0), ("keep_history", 1, True),
])
def test_config_rejects_each_bad_field_by_name(field, bad, good):
    with pytest.raises(ConfigError, match=rf"^{field} must .*, got ") as info:
        DecodeConfig(**{field: bad})
    assert info.value.field == field and isinstance(info.value, ValueError) and len(str(info.value).splitlines()) == 1
    assert getattr(DecodeConfig(**{field: good}), field) == good  # the edge of the range is allowed


def test_config_is_frozen_and_replace_checks_again():
    cfg = DecodeConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.min_score = 0.5
    assert dataclasses.replace(cfg, min_score=0.5).min_score == 0.5
    with pytest.raises(ConfigError, match="min_score"):
        dataclasses.replace(cfg, min_score=2.0)


@pytest.mark.parametrize("method, min_score, score, expected", [
    ("auto", 0.0, "logit", "prob"),        # auto ranks candidates by probability
    ("goose", 0.0, "logit", "logit"),      # goose uses only the order ...
    ("goose", 0.01, "logit", "prob"),      # ... unless min_score cuts by probability
    ("pld", 0.0, "prob", "prob"),          # the config's own choice otherwise
    ("tr", 0.01, "logit", "logit"),        # min_score is goose's alone
    ("ar", 0.0, "logit", "logit"),
])
def test_harvest_score_is_prob_where_a_method_needs_probabilities(method, min_score, score, expected):
    assert harvest_score(parse_method(method), DecodeConfig(min_score=min_score, score=score)) == expected
