"""Slot fill: requested against filled slots of a static topology, and the root's fill in
unmatched goose cycles, on synthetic rows drawn with a known fill rate."""
from __future__ import annotations

import pandas as pd
import pytest

from goose_theory.regimefill import root_fill, slot_fill
from goose_theory.regimefit import _annotate

from test_regimefit import FILL, _frames


def test_slot_fill_of_the_static_shape():
    frames = _frames(seed=2)
    root, spine, chain = slot_fill(frames)
    assert root == pytest.approx(FILL, abs=0.03)
    assert spine == root  # no spine parents in a static shape: the root's rate stands in
    assert chain == pytest.approx(1.0)  # the chain slot is always filled below a filled root slot


def test_slot_fill_counts_exactly_on_a_tiny_trace():
    rows = [  # iso:1@2 requests root -> t0 -> t0; cycle 0 fills both, cycle 1 only the first, cycle 2 none
        (0, 0, -1, "root", 0), (0, 1, 0, "transition", 0), (0, 2, 1, "transition", 0),
        (1, 0, -1, "root", 0), (1, 1, 0, "transition", 0),
        (2, 0, -1, "root", 0)]
    frame = pd.DataFrame([{"method": "iso:1@2", "cycle": c, "node": n, "parent": p, "source": s, "rank": r}
                          for c, n, p, s, r in rows])
    meta = _frames(prompts=1, cycles=1)[0][1]
    root, _, chain = slot_fill([(frame, meta)])
    assert root == pytest.approx(2 / 3) and chain == pytest.approx(1 / 2)


def test_root_fill_from_unmatched_goose_cycles():
    frame, _ = _frames(seed=3)[0]
    nodes = _annotate(frame)
    assert root_fill(nodes) == pytest.approx(FILL, abs=0.03)
    assert root_fill(nodes[nodes["regime"] == 1]) is None  # no unmatched cycle: unknown
