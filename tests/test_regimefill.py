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


def test_filled_tau_against_the_fill_process():
    """Two root slots, budget 1: the first slot that exists is verified, so
    E[tau] = 1 + f a + (1 - f) f b for unfolded rates a, b (the fit folds f in)."""
    from goose_theory.acceptance import Acceptance
    from goose_theory.regimefill import filled_tau
    from goose_theory.topology import Topology

    t = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1)])
    f, a, b = 0.6, 0.5, 0.3
    est = filled_tau(t, Acceptance.parse(0.0, [a * f, b * f]), (f, f, f), 1, samples=4000, seed=3)
    assert est == pytest.approx(1 + f * a + (1 - f) * f * b, abs=0.01)
    full = filled_tau(t, Acceptance.parse(0.0, [a, b]), (1.0, 1.0, 1.0), 2, samples=3)
    assert full == pytest.approx(1 + a + b)


def test_first_nodes_keeps_the_fill_order():
    from goose_theory.regimefill import first_nodes
    from goose_theory.topology import Topology

    t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0),
                             (3, "transition", 0)])
    head = first_nodes(t, 3)
    assert head.budget == 3 and head.spine_length == 2 and list(head.source).count(2) == 1
