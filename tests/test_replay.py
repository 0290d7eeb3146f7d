"""The trace replay: exact on what it does not draw (a spine-only topology reproduces a real decode
cycle for cycle, and so does goose drafting spines only), the fitted rates where it draws,
reproducible, and fixed topologies and goose only."""
from __future__ import annotations

import math

import numpy as np
import pytest

from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.matcher import Match
from goose_runtime.methods import MethodSpec, parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.replay import _EverySlot, regime_of, replay, replay_prompt, walk
from goose_runtime.tracing import write_run_trace
from goose_runtime.trees import build_from_topology
from goose_theory.replayinput import RegimeRates, TraceText, trace_texts
from goose_theory.topology import Topology, save_topology

NO_TRANSITIONS = {"matched": RegimeRates(()), "unmatched": RegimeRates(())}


def _repeating(seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    base = [int(x) for x in rng.integers(3, 500, 25)]
    return [base * 3, base * 2 + [int(x) for x in rng.integers(3, 500, 5)] + base[:12],
            [int(x) for x in rng.integers(3, 500, 40)]]


@pytest.mark.parametrize("cap", [60, 40])
def test_a_spine_only_topology_replays_its_real_decode_cycle_for_cycle(tmp_path, cap):
    # nothing is drawn for a bare spine: the matcher and the text decide every cycle, so the replay
    # must give the decoder's cycles and its accepted and emitted tokens exactly (the cap included)
    bundle = tiny_random_bundle(seed=3)
    path = tmp_path / "spine5.json"
    save_topology(Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(5)]), path)
    spec = parse_method(f"topology:{path}")
    results = [Decoder(bundle, spec, DecodeConfig(max_new_tokens=cap)).decode(p, prompt_id=f"p{i}", benchmark="b")
               for i, p in enumerate(_repeating(0))]
    write_run_trace(tmp_path / "t.parquet", results, run_id="r", model="tiny", device="cpu", dtype="float32",
                    config={"decode": {"max_new_tokens": cap}})
    texts = trace_texts([str(tmp_path / "t.parquet")])
    cut = 0
    for i, (prompt, real) in enumerate(zip(_repeating(0), results)):
        text = texts[("b", f"p{i}")]
        # the last cycle's bonus is no tree node, so a text may stop one token short of the output
        assert text.tokens[:len(real.token_ids)] == tuple(real.token_ids)[:len(text.tokens)]
        assert len(text.tokens) >= len(real.token_ids) - 1
        got = replay_prompt(spec, prompt, text, NO_TRANSITIONS, max_new_tokens=cap, rng=None)
        assert got.cycles == len(real.cycles)
        assert got.emitted == sum(c.tau for c in real.cycles) == len(real.token_ids)
        assert got.accepted == sum(sum(c.accepted) for c in real.cycles)
        cut += got.accepted > got.emitted
    assert cut  # the cap cut a last cycle at both caps
    assert max(r.mean_tau for r in results) > 1.2  # the spine really was accepted


def test_goose_without_branches_replays_its_real_decode_cycle_for_cycle(tmp_path):
    # goose with a score threshold no candidate passes drafts spines only, sized by its EMA tiers and
    # bypass; the replay (whose placeholders the threshold drops too) must follow the same EMA
    bundle, cap = tiny_random_bundle(seed=3), 60
    spec, options = parse_method("goose", budget=12), dict(min_score=0.999)
    results = [Decoder(bundle, spec, DecodeConfig(max_new_tokens=cap, **options)).decode(p, prompt_id=f"p{i}",
                                                                                       benchmark="b")
               for i, p in enumerate(_repeating(1))]
    assert all(s == "root" or s == "spine" for r in results for c in r.cycles for s in c.source)
    write_run_trace(tmp_path / "t.parquet", results, run_id="r", model="tiny", device="cpu", dtype="float32",
                    config={"decode": {"max_new_tokens": cap}})
    texts = trace_texts([str(tmp_path / "t.parquet")])
    spines = set()
    for i, (prompt, real) in enumerate(zip(_repeating(1), results)):
        got = replay_prompt(spec, prompt, texts[("b", f"p{i}")], NO_TRANSITIONS, max_new_tokens=cap, rng=None,
                            goose=options)
        assert (got.cycles, got.emitted) == (len(real.cycles), len(real.token_ids))
        assert got.accepted == sum(sum(c.accepted) for c in real.cycles)
        spines |= {c.source.count("spine") for c in real.cycles if not c.bypass}
    assert len(spines - {0}) >= 2  # the EMA moved the spine between tiers


def _tree(nodes, match_tokens=()):
    return build_from_topology(Topology.from_nodes(nodes), Match(tuple(match_tokens), 3, 1, 1) if match_tokens
                               else Match(), _EverySlot(), -1, 1)


def test_transitions_are_drawn_at_the_rate_of_where_the_walk_stands():
    rng, n = np.random.default_rng(0), 20000
    branches = _tree([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1), (1, "transition", 0)])
    rates = RegimeRates(root=(0.3, 0.2), chain=(0.5,))
    got = np.bincount([walk(branches, [5], 0, rates, rng, open_end=True) for _ in range(n)], minlength=3) / n
    # one accepted w.p. 0.3 * 0.5 (rank 0, then its child fails) + 0.2 (rank 1, no child); two w.p. 0.3 * 0.5
    want = np.array([0.5, 0.15 + 0.2, 0.15])
    assert np.all(np.abs(got - want) < 4 * np.sqrt(want * (1 - want) / n))
    # a spine that equals the text is taken; beside a failed spine child the spine-node rates apply,
    # at the end of the drafted spine the end rates
    spine = _tree([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (1, "transition", 0), (2, "transition", 0)],
                  match_tokens=(7, 8))
    sure = RegimeRates(root=(0.0,), spine=(1.0,), end=(0.0,))
    assert walk(spine, [7, 9], 0, sure, rng, open_end=False) == 2          # 7, then the transition
    assert walk(spine, [7, 8, 9], 0, sure, rng, open_end=False) == 2       # 7, 8; the end rate is 0
    assert walk(spine, [7, 8, 9], 0, RegimeRates((0.0,), (0.0,), (), (1.0,)), rng, open_end=False) == 3


def test_past_the_recorded_text_the_spine_is_drawn_with_the_fitted_p_s():
    spine = _tree([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)], match_tokens=(7, 8))
    rng = np.random.default_rng(1)
    assert walk(spine, [7], 0, RegimeRates((), p_s=(1.0,)), rng, open_end=True) == 2
    assert walk(spine, [7], 0, RegimeRates((), p_s=(1.0,)), rng, open_end=False) == 1  # the text ended
    assert walk(spine, [7], 0, RegimeRates((), p_s=(0.0,)), rng, open_end=True) == 1


def test_regimes_follow_the_tree_the_file_drafts():
    one = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    spec = MethodSpec("topology:t", "topology", 1, one, confident=one.with_meta(), min_match=2)
    assert regime_of(spec, Match(), spec.tree_for(Match())) == "unmatched"
    assert regime_of(spec, Match((1, 2), 3, 1, 2), spec.tree_for(Match((1, 2), 3, 1, 2))) == "confident"
    assert regime_of(spec, Match((1, 2), 3, 1, 1), spec.tree_for(Match((1, 2), 3, 1, 1))) == "matched"


def test_replay_is_reproducible_and_takes_only_fixed_topologies():
    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (2, "transition", 0)])
    spec = MethodSpec("topology:t", "topology", 3, tree)
    prompt = [1, 2, 3, 4, 5, 6] * 3
    items = [(prompt, TraceText("b", "p", tuple(prompt * 4), False))]
    rates = {"matched": RegimeRates((0.4,), chain=(0.5,), p_s=(0.9,)), "unmatched": RegimeRates((0.4,), chain=(0.5,))}
    a, b = (replay(spec, items, rates, max_new_tokens=40, seeds=3) for _ in range(2))
    assert a == b and len(a.emitted_by_seed) == 3 and math.isclose(sum(a.regimes[k]["cycle_share"] for k in a.regimes), 1)
    assert a.emitted_tau == pytest.approx(40 * 3 / sum(40 / t for t in a.emitted_by_seed))
    assert a.accepted_tau >= a.emitted_tau > 1
    with pytest.raises(ValueError, match="only fixed topologies and goose"):
        replay(parse_method("tr"), items, rates, max_new_tokens=8)
    with pytest.raises(ValueError, match="no recorded texts"):
        replay(spec, [], rates, max_new_tokens=8)


@pytest.mark.slow  # the real model's tokenizer encodes the stdlib prompts of the shipped traces
def test_pick_by_replay_takes_the_variant_with_the_highest_replayed_tau():
    from goose_runtime.methods import topology_method
    from goose_runtime.model import load_model
    from goose_runtime.replayfit import MIN_GAIN, pick_by_replay, replay_prediction
    from goose_theory.regimeexport import regime_topologies
    from goose_theory.regimefile import matched_by_length
    traces = ["traces/stdlib-b8.parquet"]
    _, pair, _, _ = regime_topologies(traces, benchmark="stdlib", budget=12, provenance={"traces": traces})
    bundle, config = load_model("default"), DecodeConfig(max_new_tokens=64)
    best, rows = pick_by_replay(bundle, pair, "stdlib", config=config, name="p")
    assert rows[0]["spine_scale"] == 1.0 and rows[0]["matched"] == "by-length" and len(rows) >= 2  # the file
    assert {r["matched"] for r in rows[1:]} == {"one", "by-length"}  # one-tree and by-length variants
    assert rows[0]["replayed_tau"] == replay_prediction(bundle, topology_method(pair, "p"), "stdlib",
                                                        config=config).emitted_tau
    top = max(range(len(rows)), key=lambda i: rows[i]["replayed_tau"])
    chosen = top if rows[top]["replayed_tau"] > rows[0]["replayed_tau"] * (1 + MIN_GAIN) else 0
    assert best.meta["replay_choice"] == chosen and best.meta["replay_pick"] == rows
    assert best.meta.get("spine_scale", 1.0) == rows[chosen]["spine_scale"]
    assert (matched_by_length(best) is not None) == (rows[chosen]["matched"] == "by-length")
    assert pick_by_replay(bundle, pair.with_meta(provenance={}), "stdlib", config=config, name="p") is None


def test_the_text_cue_scales_each_rank_and_keeps_the_children_exclusive():
    rng, n = np.random.default_rng(2), 20000
    tree = _tree([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1)])
    rates = RegimeRates(root=(0.3, 0.2))
    seen = []

    def scale(kind, at):
        seen.append((kind, at))
        return (2.0, 0.5)
    got = np.mean([walk(tree, [5], 0, rates, rng, open_end=True, scale=scale, unmatched=True) for _ in range(n)])
    assert abs(got - (0.6 + 0.1)) < 4 * np.sqrt(0.7 * 0.3 / n) and seen[0] == ("root_u", 0)
    # scaled past 1 in all: cut back to a distribution (rank 0: 0.9 / 1.0, rank 1: 0.1 / 1.0)
    got = np.mean([walk(tree, [5], 0, rates, rng, open_end=True, scale=lambda k, a: (3.0, 0.5)) for _ in range(n)])
    assert got == pytest.approx(1.0)


def test_replay_inputs_are_read_once_per_trace_state(tmp_path, monkeypatch):
    import os

    from goose_runtime import replayfit

    calls = []
    monkeypatch.setattr(replayfit, "replay_items", lambda bundle, files, bench, prompt_ids=None: calls.append(bench)
                        or [([1], TraceText(bench, "p", (2,), True))])
    monkeypatch.setattr(replayfit, "fitted_cue", lambda files, items: {"cue": len(calls)})
    monkeypatch.setattr(replayfit, "_INPUTS", {})
    trace, bundle = tmp_path / "t.parquet", object()
    trace.write_bytes(b"x")
    first = replayfit.replay_inputs(bundle, [str(trace)], "b")
    assert replayfit.replay_inputs(bundle, [str(trace)], "b") == first and calls == ["b"]
    replayfit.replay_inputs(bundle, [str(trace)], "b", prompt_ids={"p"})  # another key
    os.utime(trace, (1, 1))  # the trace changed on disk: read again
    assert replayfit.replay_inputs(bundle, [str(trace)], "b")[1] == {"cue": 3} and len(calls) == 3
    assert len(replayfit._INPUTS) == 2  # the oldest entry went
