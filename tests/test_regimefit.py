"""Regime fit on synthetic node rows drawn from known per-regime rates: psi, p_s, p_t by regime
and parent, slot fill of a static topology, and the nearest-budget method choice."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from goose_theory.regimefill import method_budgets, nearest_methods, psi_estimate
from goose_theory.regimefit import _annotate, fit_regimes
from goose_theory.regimeinput import read_frames
from tests.test_regimeinput import synthetic_trace

P_S, PT_ROOT_M, PT_ROOT_U, PT_CHAIN, FILL, SHARE = 0.8, 0.1, 0.3, 0.4, 0.7, 0.25


def _cycle(rng, matched: bool, static: bool):
    """One cycle's nodes: (parent, source, rank, match); exclusive draws at each node."""
    nodes = [(-1, "root", 0, True)]
    if static:  # iso-like static shape: root -> t0 -> t0, root slot filled with prob FILL
        if rng.random() < FILL:
            m1 = rng.random() < PT_ROOT_U
            nodes += [(0, "transition", 0, m1), (1, "transition", 0, m1 and rng.random() < PT_CHAIN)]
        return nodes, 1 + sum(1 for n in nodes[1:] if n[3] and nodes[n[0]][3])
    if matched:
        s1 = rng.random() < P_S
        t1 = (not s1) and rng.random() < PT_ROOT_M / (1 - P_S)
        s2 = s1 and rng.random() < P_S
        nodes += [(0, "spine", 0, s1), (1, "spine", 0, s2), (0, "transition", 0, t1)]
        tau = 1 + s1 + s2 + t1
    elif rng.random() < FILL:  # unmatched: the root slot is filled with prob FILL, as for iso
        t1 = rng.random() < PT_ROOT_U
        t2 = t1 and rng.random() < PT_CHAIN
        nodes += [(0, "transition", 0, t1), (1, "transition", 0, t2)]
        tau = 1 + t1 + t2
    else:
        tau = 1
    return nodes, tau


def _frames(seed: int = 0, prompts: int = 80, cycles: int = 60):
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(prompts):
        for method, static in (("goose@4", False), ("iso:1@2", True)):
            for c in range(cycles):
                matched = not static and rng.random() < SHARE
                nodes, tau = _cycle(rng, matched, static)
                depth = [0]
                for i, (par, src, rank, match) in enumerate(nodes):
                    if i:
                        depth.append(depth[par] + 1)
                    reached = par < 0 or (nodes[par][3] if par > 0 else True)
                    rows.append({"benchmark": "b", "method": method, "prompt_id": str(p), "cycle": c, "node": i,
                                 "parent": par, "source": src, "rank": rank, "depth": depth[i], "match": bool(match),
                                 "reached": bool(reached), "spine_avail": None if static else (20 if matched else 0),
                                 "tau": tau})
    frame = pd.DataFrame(rows)
    iso = {"schema": "goose-topology/1", "nodes": [{"parent": -1, "source": "root", "rank": 0},
                                                   {"parent": 0, "source": "transition", "rank": 0},
                                                   {"parent": 1, "source": "transition", "rank": 0}]}
    meta = {"config": {"methods": [{"label": "goose@4", "name": "goose", "budget": 4, "topology": None},
                                   {"label": "iso:1@2", "name": "iso:1", "budget": 2, "topology": iso},
                                   {"label": "ar", "name": "ar", "budget": 0, "topology": None}]}}
    return [(frame, meta)]


def test_recovers_the_per_regime_rates_and_fill():
    fit = fit_regimes(_frames())
    assert fit.fill[0] == pytest.approx(FILL, abs=0.04)
    assert fit.matched.spine_q(1) == pytest.approx(P_S, abs=0.05)  # a(1) = 1 when matched
    # the root's fill folded in: 0.1 * 0.7 = 0.07 (SE ~0.005); without it, or with another parent's fill, ~0.10
    assert fit.matched.transition_q(0, 0) == pytest.approx(PT_ROOT_M * FILL, abs=0.015)
    assert fit.unmatched.spine_q(1) == 0.0
    assert fit.unmatched.transition_q(0, 0) == pytest.approx(PT_ROOT_U * fit.fill[0], abs=0.03)
    assert fit.unmatched.transition_q(0, 2) == pytest.approx(PT_CHAIN * fit.fill[2], abs=0.05)
    assert fit.psi_ci95[0] <= fit.psi <= fit.psi_ci95[1]


def test_psi_is_the_token_share_of_matched_cycles():
    frame, _ = _frames(seed=1, prompts=5, cycles=30)[0]
    roots = _annotate(frame).query("node == 0")
    known = roots[roots["regime"] >= 0]
    expected = known.loc[known["regime"] == 1, "tau"].sum() / known["tau"].sum()
    assert psi_estimate(roots)[0] == pytest.approx(expected)


def test_method_choice_by_budget():
    frames = _frames(prompts=2, cycles=3)
    assert method_budgets(frames) == {"goose@4": 4, "iso:1@2": 2}
    assert nearest_methods(frames, 5) == ("goose@4",)
    assert nearest_methods(frames, 1) == ("iso:1@2",)
    with pytest.raises(ValueError):
        fit_regimes(frames, methods=("tr",))


def test_traces_without_a_matcher_are_refused_in_their_own_words():
    # iso records no spine_avail, so no cycle has a known regime: psi was NaN and the error an invariant's
    frame, meta = _frames(prompts=2, cycles=3)[0]
    with pytest.raises(ValueError, match="needs traces of a method with a context matcher"):
        fit_regimes([(frame[frame["method"] == "iso:1@2"], meta)])


P_CONF, P_OTHER, CONF_SHARE = 0.95, 0.5, 0.6


def _split_frames(seed: int = 0, prompts: int = 60, cycles: int = 40):
    """goose@8 cycles: unmatched, confident matched (p_s 0.95, recorded as bypass) and other matched
    (p_s 0.5); 3-node spines; plus pld, a matcher method that records no confidence."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(prompts):
        for method in ("goose@8", "pld"):
            for c in range(cycles):
                matched = rng.random() < 0.4
                conf = matched and method == "goose@8" and rng.random() < CONF_SHARE
                q = P_CONF if conf else (P_OTHER if method == "goose@8" else 0.99)
                nodes, ok = [(-1, "root", 0, True)], True
                for d in range(3 if matched else 0):
                    hit = ok and rng.random() < q
                    nodes.append((d, "spine", 0, hit)); ok = hit
                tau = 1 + sum(n[3] for n in nodes[1:])
                for i, (par, src, rank, match) in enumerate(nodes):
                    rows.append({"benchmark": "b", "method": method, "prompt_id": str(p), "cycle": c, "node": i,
                                 "parent": par, "source": src, "rank": rank, "depth": i, "match": bool(match),
                                 "reached": par < 0 or bool(nodes[par][3]), "spine_avail": 20 if matched else 0,
                                 "tau": tau, "bypass": bool(conf)})
    meta = {"config": {"methods": [{"label": "goose@8", "name": "goose", "budget": 8, "topology": None},
                                   {"label": "pld", "name": "pld", "budget": None, "topology": None}]}}
    return [(pd.DataFrame(rows), meta)]


def test_split_fit_separates_confident_matches():
    frames = _split_frames()
    fit = fit_regimes(frames, split=True)
    assert fit.confident is not None
    assert fit.confident.spine_q(1) == pytest.approx(P_CONF, abs=0.03)
    assert fit.matched.spine_q(1) == pytest.approx(P_OTHER, abs=0.05)  # pld's unlabelled 0.99 left out
    roots = _annotate(frames[0][0], ("goose@8",)).query("node == 0 and conf >= 0")
    share = roots.loc[roots["conf"] == 1, "tau"].sum() / roots["tau"].sum()
    assert fit.psi_confident == pytest.approx(fit.psi * share)
    assert 0 < fit.psi_confident < fit.psi
    assert fit.to_dict()["psi_confident"] == fit.psi_confident
    plain = fit_regimes(frames)
    assert plain.confident is None and plain.matched.spine_q(1) > fit.matched.spine_q(1)


def test_split_needs_a_goose_that_records_bypass():
    frames = _frames(prompts=4, cycles=20)  # goose@4: below the bypass length, so no labels
    fit = fit_regimes(frames, split=True)
    assert fit.confident is None and "confident" not in fit.to_dict()


def test_spine_models_from_the_offered_lengths():
    """Matched cycles offer 20 tokens in _frames: a(d) = 1 up to 20; p_s given existence is the
    drawn P_S; the split fit adds the confident regime's model."""
    fit = fit_regimes(_frames())
    matched, confident = fit.spines
    assert confident is None and matched.avail[:20] == (1.0,) * 20
    assert matched.p_s[0] == pytest.approx(P_S, abs=0.05)
    assert matched.effective()[0] == pytest.approx(fit.matched.spine_q(1))
    assert fit.to_dict()["spines"][0]["avail"] == list(matched.avail)
    split = fit_regimes(_split_frames(), split=True)
    assert split.spines[1] is not None and split.spines[1].p_s[0] == pytest.approx(P_CONF, abs=0.03)


def test_null_reached_rows_take_the_parent_rows_accepted(tmp_path):
    """A null reached (not recorded on that row) is derived as the counts derive it, not read as
    "not reached"."""
    frame, _ = read_frames([str(synthetic_trace(tmp_path))])[0]
    ref = _annotate(frame)["reached"].to_numpy()
    holes = frame.assign(reached=frame["reached"].astype(object).where(frame.index % 3 != 1, None))
    assert holes["reached"].isna().sum() > 3
    assert np.array_equal(_annotate(holes)["reached"].to_numpy(), ref)


def test_rows_split_over_two_files_fit_as_in_one(tmp_path):
    """``start`` (a cycle's root row) counted from 0 in each file, so the root fill, which counts
    distinct starts per method, lost the cycles whose starts collided across files: humaneval-b8
    and mtbench-b8 as two files gave root fill 0.5597, the same rows in one file 0.5809."""
    files = [f"traces/{name}-b8.parquet" for name in ("humaneval", "mtbench")]
    tables = [pq.read_table(f) for f in files]
    one = tmp_path / "both.parquet"  # the same rows, the first file's metadata (the same config)
    pq.write_table(pa.concat_tables([tables[0], tables[1].replace_schema_metadata(tables[0].schema.metadata)]), one)
    for split in (False, True):
        two_fit = fit_regimes(read_frames(files), methods=("goose@8",), split=split)
        one_fit = fit_regimes(read_frames([str(one)]), methods=("goose@8",), split=split)
        assert two_fit.to_dict() == one_fit.to_dict()
    assert two_fit.fill[0] == pytest.approx(0.5809, abs=1e-4)


def test_a_synthetic_trace_split_by_prompt_fits_as_one():
    """The same on synthetic rows split in two frames by prompt (one config)."""
    frame, meta = _frames(prompts=20, cycles=30)[0]
    first = frame["prompt_id"].astype(int) < 10
    halves = [(frame[first].reset_index(drop=True), meta), (frame[~first].reset_index(drop=True), meta)]
    assert fit_regimes(halves).to_dict() == fit_regimes([(frame, meta)]).to_dict()


def test_a_spine_offer_past_the_recorded_range_is_clipped():
    """A spine_avail of 2**40 (any integer width reads) made np.bincount allocate 8 TiB (a
    MemoryError traceback; 1.4 GB at 2**26). a(d) for d <= MAX_SPINE reads only the cycles that
    offered >= d, so clipping at MAX_SPINE leaves the fit as with the recorded 20."""
    frame, meta = _frames(prompts=10, cycles=30)[0]
    root = frame.index[(frame["node"] == 0) & (frame["spine_avail"] == 20)][3]
    cycle = range(root, root + 4)  # a matched cycle of _frames: the root, two spine nodes, a transition
    assert frame.loc[cycle, "node"].tolist() == [0, 1, 2, 3] and frame.loc[root + 4, "node"] == 0
    huge = frame.assign(spine_avail=frame["spine_avail"].astype(object))
    huge.loc[cycle, "spine_avail"] = 2**40
    assert fit_regimes([(huge, meta)]).to_dict() == fit_regimes([(frame, meta)]).to_dict()


def test_tau_null_throughout_is_named_as_tau():
    """A null tau (not recorded) everywhere left the token sums empty, and the refusal blamed
    spine_avail, which every goose cycle recorded."""
    frame, meta = _frames(prompts=4, cycles=20)[0]
    with pytest.raises(ValueError, match=r"^column tau is null \(not recorded\) on every cycle whose regime") as caught:
        fit_regimes([(frame.assign(tau=None), meta)])
    assert "spine_avail" not in str(caught.value)


@pytest.mark.parametrize("paths, bench, methods", [
    (["traces/prior/stdlib-b8.parquet"], "stdlib", ("goose+prior@8", "iso:2+prior@8")),
    (["traces/prior/mtbench-b8.parquet"], "mtbench", ()),
    (["traces/humaneval.parquet", "traces/humaneval-b8.parquet"], "humaneval", ("tr",)),
    (["traces/stdlib.parquet", "traces/stdlib-b8.parquet"], "stdlib", ("goose@16",))])
def test_both_fits_at_once_are_the_two_fits(paths, bench, methods):
    # fit_regimes_both shares the annotation, psi and slot fill (the bootstrap fits both on every draw)
    from goose_theory.regimefit import fit_regimes_both
    from goose_theory.regimeinput import read_frames
    frames = read_frames(paths, benchmark=bench)
    plain, split = fit_regimes_both(frames, methods=methods)
    assert plain == fit_regimes(frames, methods=methods) and split == fit_regimes(frames, methods=methods, split=True)
    assert repr(plain.to_dict()) == repr(fit_regimes(frames, methods=methods).to_dict())  # to the last digit
    assert split.confident is not None and split.psi_confident > 0  # the split path is the one compared


def test_without_confident_cycles_the_split_fit_is_the_plain_one():
    # the export and the bootstrap price regime files with the split fit alone: where no cycle says it
    # was confident (goose's bypass not recorded), it must be the plain fit, not a fit of other rows
    from goose_theory.regimefit import fit_regimes_both
    from goose_theory.regimeinput import read_frames
    frames = [(f.drop(columns="bypass"), m) for f, m in read_frames(["traces/prior/stdlib-b8.parquet"])]
    plain, split = fit_regimes_both(frames)
    assert split.confident is None and repr(split.to_dict()) == repr(plain.to_dict())
