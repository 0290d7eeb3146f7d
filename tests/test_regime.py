"""Two-regime prediction: the harmonic mix against a Monte Carlo renewal process, the unmatched
regime against brute-force pruning, and the optimisers' dominance (the single tree's search:
test_regimesingle.py); and
the files that carry their trees (goose_theory/regimeexport.py), exported and read back."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goose_theory.acceptance import Acceptance
from goose_theory.regime import best_pair, harmonic_tau, regime_tau, seconds_per_token
from goose_theory.regimeexport import export_topologies
from goose_theory.regimesingle import best_single
from goose_theory.regimefile import save_regime_topologies, unmatched_topology
from goose_theory.topology import Topology, load_topology
from goose_theory.yields import exact_yield

from conftest import random_topology

# ranks past the list repeat its last value, so the lists end in 0 to keep random trees feasible
M = Acceptance.parse([0.7, 0.85], [0.15, 0.03, 0.01, 0.0], p_t_spine=[0.1, 0.03, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])
U = Acceptance.parse(0.0, [0.35, 0.08, 0.02, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])


def _pruned(t: Topology) -> Topology:
    """The tree without spine nodes and their subtrees (what the runtime builds with no match)."""
    keep, new = [True], {0: 0}
    nodes = [(-1, "root", 0)]
    names = ("root", "spine", "transition")
    for v in range(1, len(t.parent)):
        ok = keep[t.parent[v]] and t.source[v] != 1
        keep.append(ok)
        if ok:
            new[v] = len(nodes)
            nodes.append((new[t.parent[v]], names[t.source[v]], t.rank[v]))
    return Topology.from_nodes(nodes, max_depth=t.max_depth, max_spine=t.max_spine)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 14))
def test_unmatched_regime_is_the_pruned_tree(seed, n):
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    pred = regime_tau(t, M, U, 0.3)
    assert pred.tau_unmatched == pytest.approx(exact_yield(_pruned(t), U).expected_tau, rel=1e-12)
    assert pred.nodes_unmatched == len(_pruned(t).parent) - 1
    assert pred.tau_matched == pytest.approx(exact_yield(t, M).expected_tau, rel=1e-12)


def test_harmonic_mix_matches_a_renewal_simulation():
    """Text made of long matched / unmatched stretches; cycles draw tau from the exact pmf of the
    tree in the stretch they start in: tokens / cycles converges to the harmonic mix."""
    t = best_pair(M, U, 0.4, budget=6).matched
    pm, pu = exact_yield(t, M).pmf, exact_yield(t, U).pmf
    rng = np.random.default_rng(5)
    seg = rng.integers(200, 400, size=600)
    matched = np.arange(seg.size) % 3 == 0
    tokens = cycles = 0
    produced_matched = 0
    for length, is_m in zip(seg, matched):
        pmf = pm if is_m else pu
        pos = 0
        while pos < length:
            k = int(rng.choice(pmf.size, p=pmf / pmf.sum()))
            pos += k; cycles += 1
            produced_matched += k if is_m else 0
        tokens += pos
    psi = produced_matched / tokens
    expected = harmonic_tau(exact_yield(t, M).expected_tau, exact_yield(t, U).expected_tau, psi)
    assert tokens / cycles == pytest.approx(expected, rel=0.02)


def test_harmonic_mix_of_taus_at_least_one_is_at_least_one():
    # fit-acceptance --budget 0 --regimes wrote predicted_tau 0.9999999999999991 (the weights round),
    # which every topology loader refuses
    # the confident tree itself was priced a rounding below 1
    assert harmonic_tau(1.0000000000000007, 1.0, 0.5745, tau_confident=0.9999999999999981, psi_confident=0.518) == 1.0
    for psi, psi_c in ((0.3, 0.1), (0.5745, 0.518), (0.7, 0.0), (1.0, 0.2), (0.1, 0.1)):
        assert harmonic_tau(1.0, 1.0, psi, tau_confident=1.0, psi_confident=psi_c) >= 1.0
    assert harmonic_tau(0.5, 0.5, 0.5) == pytest.approx(0.5)  # not hidden: only rounding is clamped


def test_fit_regimes_at_budget_zero_writes_files_that_load(tmp_path):
    # the fuzzer's case: the confident tree was priced 0.9999999999999981, the mix written as
    # predicted_tau 0.9999999999999991, and no loader accepted topology-all-regimes.json
    from pathlib import Path

    from goose_runtime.fit_cli import main as fit_main
    from goose_theory.topology import load_topology

    trace = Path(__file__).resolve().parents[1] / "traces" / "stdlib-b8.parquet"
    out = tmp_path / "fit"
    assert fit_main([str(trace), "--budget", "0", "--regimes", "--bootstrap", "10", "--regime-draws", "2",
                     "--out", str(out)]) == 0
    files = sorted(out.glob("topology*.json"))
    assert any("regimes" in f.name for f in files)
    for f in files:
        tree = load_topology(f)
        assert tree.budget == 0 and tree.meta["predicted_tau"] >= 1.0


def test_harmonic_rejects_bad_psi():
    with pytest.raises(ValueError):
        harmonic_tau(2.0, 1.0, 1.5)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.3, 0.95), st.floats(0.05, 0.4), st.floats(0.0, 1.0), st.integers(1, 12))
def test_pair_dominates_single_and_single_dominates_its_candidates(p_s, p_t, psi, budget):
    m = Acceptance.parse([p_s, 0.9], [p_t / 2, 0.05], p_t_chain=[0.4, 0.1])
    u = Acceptance.parse(0.0, [p_t, 0.05], p_t_chain=[0.4, 0.1])
    spine = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(budget)])
    single = best_single(m, u, psi, budget=budget, extra=(spine,))
    assert single.prediction.tau >= regime_tau(spine, m, u, psi).tau - 1e-12
    pair = best_pair(m, u, psi, budget=budget)
    assert pair.prediction.tau >= single.prediction.tau - 1e-9


def test_seconds_per_token_with_a_flat_cycle_time():
    pred = regime_tau(best_pair(M, U, 0.5, budget=5).matched, M, U, 0.5)
    assert seconds_per_token(pred, lambda n: 0.02) == pytest.approx(0.02 / pred.tau)
    # three regimes: the confident share is priced at its own tree (it had taken the matched tree's tau)
    chain = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(6)])
    pred = regime_tau(best_pair(M, U, 0.5, budget=5).matched, M, U, 0.5, confident=Acceptance.parse(0.95, 0.0),
                      psi_confident=0.3, confident_topology=chain)
    assert pred.tau_confident > pred.tau_matched
    assert seconds_per_token(pred, lambda n: 0.02) == pytest.approx(0.02 / pred.tau)


def test_export_writes_predictions_and_the_unmatched_tree():
    class Fit:
        matched, unmatched, psi = M, U, 0.4

        @staticmethod
        def to_dict():  # what a file needs for validate to price it (topometa checks it on load)
            return {"psi": 0.4, "matched": M.to_dict(), "unmatched": U.to_dict()}

    single, pair = export_topologies(Fit, 6, provenance={"traces": ["x.parquet"]})
    assert single.budget == pair.budget == 6
    assert single.meta["predicted_tau"] <= pair.meta["predicted_tau"] + 1e-9
    unmatched = Topology.from_nodes([(n["parent"], n["source"], n["rank"]) for n in pair.meta["regimes"]["unmatched"]["nodes"]])
    assert unmatched.spine_length == 0 and unmatched.budget == 6
    # each file records its own tree's two-regime tau (the single tree's unmatched regime is its pruned self)
    assert single.meta["predicted_tau"] == pytest.approx(regime_tau(single, M, U, 0.4).tau, rel=1e-12)
    assert pair.meta["predicted_tau"] == pytest.approx(regime_tau(pair, M, U, 0.4, unmatched).tau, rel=1e-12)
    assert pair.meta["provenance"]["traces"] == ["x.parquet"]


def test_unmatched_topology_round_trips_through_a_file(tmp_path):
    from goose_theory.topology import load_topology, save_topology
    matched = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (1, "transition", 0)])
    save_topology(matched.with_meta(regimes={"unmatched": unmatched.to_dict()}), tmp_path / "pair.json")
    save_topology(matched, tmp_path / "plain.json")
    assert unmatched_topology(load_topology(tmp_path / "pair.json")).parent == unmatched.parent
    assert unmatched_topology(load_topology(tmp_path / "plain.json")) is None


C = Acceptance.parse([0.95, 0.95], [0.02, 0.01, 0.0], p_t_spine=[0.01, 0.0], p_t_chain=[0.4, 0.1, 0.02, 0.0])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 12), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_three_regimes_mix_harmonically(seed, n, psi, share):
    t = random_topology(np.random.default_rng(seed), n, max_depth=4)
    pc = psi * share
    pred = regime_tau(t, M, U, psi, confident=C, psi_confident=pc)
    tm, tu, tc = (exact_yield(t, a).expected_tau for a in (M, U, C))
    assert pred.tau == pytest.approx(1.0 / ((psi - pc) / tm + pc / tc + (1 - psi) / tu), rel=1e-12)
    assert pred.tau_confident == pytest.approx(tc) and pred.psi_confident == pc
    assert regime_tau(t, M, U, psi, confident=C, psi_confident=0.0).tau == pytest.approx(regime_tau(t, M, U, psi).tau)


def test_confident_regime_gets_its_own_tree_and_never_loses():
    two = best_pair(M, U, 0.5, budget=8)
    three = best_pair(M, U, 0.5, budget=8, confident=C, psi_confident=0.3)
    assert three.confident is not None and three.confident.spine_length == 8  # p_s 0.95: a bare chain
    # the same trees with the confident cycles drafted by the matched tree can only do worse
    same = regime_tau(three.matched, M, U, 0.5, three.unmatched, confident=C, psi_confident=0.3)
    assert three.prediction.tau >= same.tau - 1e-12
    assert two.confident is None


def test_unmatched_tree_with_spare_slots_when_slots_go_unfilled():
    from goose_theory.regime import FILL_SAMPLES
    from goose_theory.regimefill import filled_tau

    exact = best_pair(M, U, 0.4, budget=6)  # every slot filled: spare slots cannot help
    assert exact.unmatched.budget == 6
    assert best_pair(M, U, 0.4, budget=6, fill=(1.0, 1.0, 1.0)).unmatched.budget == 6
    fill = (0.2, 0.2, 0.5)  # most requested slots stay empty: the 2 x B tree fills the budget
    spare = best_pair(M, U, 0.4, budget=6, fill=fill)
    assert spare.unmatched.budget == 12
    # priced as the runtime fills them (same Monte Carlo draws), the spare tree is clearly better
    with_spares = filled_tau(spare.unmatched, U, fill, 6, samples=FILL_SAMPLES)
    assert with_spares == pytest.approx(spare.prediction.tau_unmatched)
    assert with_spares > filled_tau(exact.unmatched, U, fill, 6, samples=FILL_SAMPLES) + 0.05


def test_export_with_a_split_fit_writes_the_confident_tree(tmp_path):
    from goose_theory.regimefile import MIN_MATCH, confident_topology
    from goose_theory.topology import load_topology, save_topology

    class Fit:
        matched, unmatched, psi, confident, psi_confident, fill = M, U, 0.4, None, 0.0, (1.0, 1.0, 1.0)

        @staticmethod
        def to_dict():  # what a file needs for validate to price it (topometa checks it on load)
            return {"psi": 0.4, "matched": M.to_dict(), "unmatched": U.to_dict()}

    class Split(Fit):
        confident, psi_confident = C, 0.3

    single, pair = export_topologies(Fit, 6, provenance={}, split=Split)
    save_topology(pair, tmp_path / "t.json")
    tree, n = confident_topology(load_topology(tmp_path / "t.json"))
    assert n == MIN_MATCH and tree.budget == 6 and pair.meta["rule"] == "regime-triple"
    assert pair.meta["regime_prediction"]["psi_confident"] == 0.3
    assert confident_topology(single) is None
    _, plain = export_topologies(Fit, 6, provenance={}, split=Fit)  # no confident regime: the old pair
    assert plain.meta["rule"] == "regime-pair" and "confident" not in plain.meta["regimes"]


@pytest.mark.parametrize("bad", [0, -1, "8", True, 2.5])
def test_confident_topology_rejects_a_bad_min_match(bad):
    from goose_theory.regimefile import confident_topology
    from goose_theory.topology import TopologyError
    t = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    with pytest.raises(TopologyError, match="min_match"):
        confident_topology(t.with_meta(regimes={"confident": {**t.to_dict(), "min_match": bad}}))


def _two_regime_fit(spine):
    """A stand-in RegimeFit of the matched regime C and unmatched U, psi 0.5, with ``spine``."""
    class Fit:
        matched, unmatched, psi, confident, psi_confident, fill = C, U, 0.5, None, 0.0, (1.0, 1.0, 1.0)
        spines = (spine, None)

        @staticmethod
        def to_dict():
            return {"psi": 0.5}
    return Fit


def test_spare_matched_slots_for_short_matches(monkeypatch):
    """Matches of 2 tokens: the exact-budget matched tree (a long spine) leaves slots empty; the
    pair's spare tree fills them, is priced no lower by the same pricing, and is exported as
    regimes.matched beside the exact-budget tree (whose budget the runtime verifies) when the
    file does not draft by match length."""
    from goose_theory import regime
    from goose_theory.regimefile import matched_topology
    from goose_theory.regimespare import SpineModel, spare_tau

    monkeypatch.setattr(regime, "BY_LENGTH", False)
    spine = SpineModel(p_s=(0.95,), avail=(1.0, 1.0, 0.0), end=(0.6, 0.05, 0.0))
    pair = best_pair(C, U, 0.5, budget=6, spines=(spine, None))
    assert pair.matched.budget == 6 and pair.matched_spare is not None and pair.matched_spare.budget > 6
    assert pair.prediction.tau_matched == pytest.approx(spare_tau(pair.matched_spare, C, spine, (1.0, 1.0, 1.0), 6)[0])
    assert pair.prediction.tau_matched > spare_tau(pair.matched, C, spine, (1.0, 1.0, 1.0), 6)[0]

    fit = _two_regime_fit(spine)
    _, with_spare = export_topologies(fit, 6, provenance={}, split=fit, spare=True)
    _, without = export_topologies(fit, 6, provenance={}, split=fit, spare=False)
    assert with_spare.budget == without.budget == 6
    assert matched_topology(with_spare).budget == pair.matched_spare.budget and matched_topology(without) is None


def test_by_length_matched_trees_price_the_matched_regime_and_are_exported():
    """With BY_LENGTH (the default) the pair prices its matched regime by one tree per offered
    length, at least as high as its one spare tree, and the file carries them as
    regimes.matched_by_length in place of regimes.matched."""
    from goose_theory.regimefile import matched_by_length, matched_topology
    from goose_theory.regimelength import length_tau
    from goose_theory.regimespare import SpineModel, spare_tau

    spine = SpineModel(p_s=(0.95, 0.8), avail=(1.0, 0.5, 0.7, 0.0), end=(0.6, 0.05, 0.0))
    pair = best_pair(C, U, 0.5, budget=6, spines=(spine, None))
    assert len(pair.by_length) == 6 and all(t.spine_length <= L for L, t in enumerate(pair.by_length, start=1))
    tm, _ = length_tau(pair.by_length, C, spine, (1.0, 1.0, 1.0), budget=6)
    assert pair.prediction.tau_matched == pytest.approx(tm)
    assert tm >= spare_tau(pair.matched_spare or pair.matched, C, spine, (1.0, 1.0, 1.0), 6)[0] - 1e-12

    fit = _two_regime_fit(spine)
    _, two = export_topologies(fit, 6, provenance={}, split=fit)
    assert [t.parent for t in matched_by_length(two)] == [t.parent for t in pair.by_length]
    assert matched_topology(two) is None and two.budget == 6


def test_an_unmatched_tree_never_holds_a_spine_node_even_where_the_ranks_run_out(tmp_path):
    """Review, 7 Dec: with two usable ranks the optimum filled OVERFILL x budget with spine slots
    (worth 0 at p_s = 0), and the regime file it wrote was refused by every reader."""
    m, u = Acceptance.parse([0.8] * 20, [0.1]), Acceptance.parse(0.0, [0.9, 0.2])
    fit = SimpleNamespace(matched=m, unmatched=u, psi=0.4,
                          to_dict=lambda: {"psi": 0.4, "matched": m.to_dict(), "unmatched": u.to_dict()})
    single, pair = export_topologies(fit, 80, provenance={})
    path = save_regime_topologies(single, pair, str(tmp_path / "t.json"))
    assert unmatched_topology(load_topology(path)).spine_length == 0
