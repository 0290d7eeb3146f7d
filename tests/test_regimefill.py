"""Slot fill: requested against filled slots of a static topology, and the root's fill in
unmatched goose cycles, on synthetic rows drawn with a known fill rate."""
from __future__ import annotations

import pandas as pd
import pytest

from goose_theory.regimefill import fill_rates, root_fill, slot_fill
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


def test_fill_rates_combines_the_static_and_the_unmatched_goose_fill():
    frames = _frames(seed=3)
    frame, meta = frames[0]
    nodes = _annotate(frame)
    root, chain_static = root_fill(nodes), slot_fill(frames)[2]
    # goose's unmatched cycles give the root's and the spine's rate; a static shape drafted in the
    # traces gives the chain's
    assert fill_rates(frames, nodes) == (root, root, chain_static)
    # without a static shape among the methods the root's rate stands in for the chain too
    goose_only = nodes[nodes["method"] == "goose@4"]
    assert fill_rates(frames, goose_only) == (root_fill(goose_only),) * 3
    # no unmatched cycle: nothing to take from goose, so the static shapes' rates stand
    matched_only = nodes[nodes["regime"] == 1]
    assert fill_rates(frames, matched_only) == slot_fill(frames)


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
    # a spine slot in front: an unmatched cycle has no spine, so it takes no budget place (it had: 1.0)
    spined = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    est = filled_tau(spined, Acceptance.parse(0.0, [a * f, b * f]), (f, f, f), 1, samples=4000, seed=3)
    assert est == pytest.approx(1 + f * a + (1 - f) * f * b, abs=0.01)


def test_first_nodes_keeps_the_fill_order():
    from goose_theory.regimefill import first_nodes
    from goose_theory.topology import Topology

    t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0),
                             (3, "transition", 0)])
    head = first_nodes(t, 3)
    assert head.budget == 3 and head.spine_length == 2 and list(head.source).count(2) == 1


def _roots(rows):
    return pd.DataFrame(rows, columns=["benchmark", "prompt_id", "regime", "tau"])


def test_psi_estimate_against_a_direct_prompt_bootstrap():
    """Ratio of sums per (benchmark, prompt), resampled by prompt with the same generator draws;
    the same prompt id in two benchmarks is two clusters, and regime -1 cycles are left out."""
    import numpy as np

    from goose_theory.regimefill import psi_estimate

    rng = np.random.default_rng(7)
    rows = [(b, p, int(rng.integers(-1, 2)), int(rng.integers(1, 6))) for b in ("x", "y") for p in range(5)
            for _ in range(int(rng.integers(1, 9)))]
    clusters = sorted({(b, p) for b, p, _, _ in rows})
    num = np.array([sum(t for b, p, r, t in rows if (b, p) == c and r == 1) for c in clusters], float)
    den = np.array([sum(t for b, p, r, t in rows if (b, p) == c and r >= 0) for c in clusters], float)
    draws = np.random.default_rng(3).integers(0, len(clusters), size=(300, len(clusters)))
    ratios = [num[d].sum() / den[d].sum() for d in draws]
    est, (lo, hi) = psi_estimate(_roots(rows), n_boot=300, seed=3)
    assert est == pytest.approx(num.sum() / den.sum(), rel=1e-12)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(ratios, [2.5, 97.5])), rel=1e-12)
    assert lo < est < hi


def test_psi_estimate_with_one_prompt_or_none():
    """One prompt: no spread between prompts to resample, so the interval is the whole (0, 1)
    (finite: the regime file is strict JSON); no cycle of known regime: NaN throughout."""
    import json
    import math

    from goose_theory.regimefill import psi_estimate

    est, ci = psi_estimate(_roots([("x", 0, 1, 3), ("x", 0, 0, 1), ("x", 0, -1, 5)]))
    assert est == pytest.approx(3 / 4) and ci == (0.0, 1.0)
    json.dumps(ci, allow_nan=False)
    est, ci = psi_estimate(_roots([("x", 0, -1, 2), ("y", 1, -1, 1)]))
    assert math.isnan(est) and all(math.isnan(x) for x in ci)


def test_regime_files_in_a_trace_do_not_enter_the_static_fill():
    """A regime file drafts its unmatched, matched and confident trees in turn, so no one slot map
    fits its cycles: its rows are left out of the fill (they made the fit fail with a KeyError,
    fitting a held-out validation trace)."""
    from goose_theory.regimefit import fit_regimes
    from goose_theory.regimeinput import read_frames

    path = "traces/large/validation-stdlib-wide-bylength197.parquet"
    fit = fit_regimes(read_frames([path]), split=True)  # goose and two by-length regime files
    assert 0.5 < fit.fill[0] <= 1.0


def test_budget_gap_note_names_the_side_and_keeps_quiet_near_the_budget():
    from goose_theory.regimefill import budget_gap_note
    assert "from larger trees run high" in budget_gap_note([8], 4)
    assert budget_gap_note([8, 16], 12) is None  # 16 is within 1.5x of 12
    assert budget_gap_note([6], 9) is None and budget_gap_note([6], 10) is not None
    assert budget_gap_note([], 15) is None


def test_confident_methods_reads_goose_with_the_prior_as_goose():
    """goose+prior records its bypass like goose (the prior only fills its table), so its traces
    give the confident regime; a goose below the bypass length and the other methods do not."""
    from goose_theory.regimefill import confident_methods
    methods = [{"label": "goose+prior@15", "name": "goose+prior", "budget": 15},
               {"label": "goose@60", "name": "goose", "budget": 60},
               {"label": "goose+prior@4", "name": "goose+prior", "budget": 4},
               {"label": "iso:2+prior@15", "name": "iso:2+prior", "budget": 15}, {"label": "ar", "name": "ar", "budget": 0}]
    assert confident_methods([(pd.DataFrame(), {"config": {"methods": methods}})]) == ("goose+prior@15", "goose@60")


def test_prior_mismatch_note_names_the_methods_on_the_other_side():
    from goose_theory.regimefill import prior_mismatch_note
    assert prior_mismatch_note(["goose+prior@15", "iso:2+prior@15"], True) is None
    assert prior_mismatch_note(["goose@15", "ar"], False) is None
    note = prior_mismatch_note(["goose+prior@15", "iso:2@15"], False)
    assert note.startswith("fitted on traces recorded with the prior (goose+prior@15), validated without it")
    assert "(iso:2@15)" in prior_mismatch_note(["goose+prior@15", "iso:2@15"], True)


def test_prior_mismatch_note_reads_only_a_numeric_tail_as_the_budget():
    # a topology file named with an "@" keeps it in its label; only "@<digits>" is a budget
    from goose_theory.regimefill import prior_mismatch_note
    assert prior_mismatch_note(["topology:run@night+prior", "goose+prior@15"], True) is None
    assert prior_mismatch_note(["topology:run@night"], False) is None


def test_slot_fill_passes_over_a_node_off_its_topology_and_its_children():
    # bad-input sweep, 6 Dec: a transition of a rank the topology has no slot for, with a child,
    # was a KeyError traceback in fit-acceptance --regimes and goose loop (plain fit-acceptance took it)
    rows = [(0, 0, -1, "root", 0), (0, 1, 0, "transition", 0), (0, 2, 1, "transition", 0),
            (1, 0, -1, "root", 0), (1, 1, 0, "transition", 7), (1, 2, 1, "transition", 0)]
    frame = pd.DataFrame([{"method": "iso:1@2", "cycle": c, "node": n, "parent": p, "source": s, "rank": r}
                          for c, n, p, s, r in rows])
    meta = _frames(prompts=1, cycles=1)[0][1]
    root, _, chain = slot_fill([(frame, meta)])
    assert root == pytest.approx(1.0) and chain == pytest.approx(1.0)  # cycle 1's rank-7 subtree is in no slot
