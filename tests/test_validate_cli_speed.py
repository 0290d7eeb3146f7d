"""The notes under validate's and loop's table when a set's figures cannot be read (one prompt, too
few tokens, or a speedup above tau: a change of load during the run)."""
from __future__ import annotations

import dataclasses

from goose_runtime.validate import ValidationRow
from goose_runtime.validate_cli import speed_notes

NAN = float("nan")
AR = ValidationRow("stdlib", "ar", 0, NAN, NAN, 1.0, NAN, NAN, NAN, 37.6, 1.0, True, 5, 640)
GOOSE = ValidationRow("stdlib", "goose@9", 9, NAN, NAN, 2.8, NAN, NAN, NAN, 90.0, 2.4, True, 5, 229)


def test_a_steady_run_gets_no_note():
    assert speed_notes([AR, GOOSE]) == []


def test_a_short_set_is_named_by_its_ar_tokens():
    short = dataclasses.replace(AR, benchmark="mtbench", cycles=16)
    notes = speed_notes([AR, GOOSE, short, dataclasses.replace(GOOSE, benchmark="mtbench")])
    assert notes == ["mtbench: 16 tokens per method: too few for a steady speedup (the benches use 5 prompts "
                     "of 128 tokens)"]


def test_a_speedup_above_tau_is_called_noise():
    # walkthrough, 6 Dec: goose loop under load printed goose@9 at tau 2.29 and 11.22x ar, without a word
    loaded = dataclasses.replace(GOOSE, measured_tau=2.286, speedup_vs_ar=11.22)
    regime = dataclasses.replace(GOOSE, method="topology:t", speedup_vs_ar=2.9)  # within 10% of its tau 2.8
    notes = speed_notes([AR, loaded, regime])
    assert len(notes) == 1 and notes[0].startswith("stdlib: speedup above tau in goose@9: the machine's load changed")


def test_one_prompt_says_why_the_interval_columns_are_blank():
    one = [dataclasses.replace(AR, prompts=1, cycles=300), dataclasses.replace(GOOSE, prompts=1)]
    assert speed_notes(one) == ["stdlib: 1 prompt: the intervals, the noise band and the comparison's interval need "
                                "the spread over two or more prompts, so they are blank"]
