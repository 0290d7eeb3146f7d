"""Two-regime topology files in the runtime (tiny model): the unmatched tree is drafted exactly
when the matcher offers nothing, decoding stays lossless, and plain files run as before."""
from __future__ import annotations

import pytest

from goose_theory.topology import Topology, save_topology
from goose_runtime.decoder import DecodeConfig
from goose_runtime.methods import parse_method
from goose_runtime.model import tiny_random_bundle
from goose_runtime.prompts import Prompt
from goose_runtime.regimes import SUFFIX, run_with_regimes, unmatched_topology
from goose_runtime.runner import parse_labeled

MATCHED = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
UNMATCHED = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1), (1, "transition", 0)])


@pytest.fixture(scope="module")
def bundle():
    return tiny_random_bundle(seed=3)


def _files(tmp_path):
    pair = MATCHED.with_meta(regimes={"unmatched": UNMATCHED.to_dict()})
    save_topology(pair, tmp_path / "pair.json")
    save_topology(MATCHED, tmp_path / "plain.json")
    return str(tmp_path / "pair.json"), str(tmp_path / "plain.json")


def test_unmatched_topology_round_trips(tmp_path):
    pair, plain = _files(tmp_path)
    spec = parse_method(f"topology:{pair}")
    assert unmatched_topology(spec.topology).parent == UNMATCHED.parent
    assert unmatched_topology(parse_method(f"topology:{plain}").topology) is None


def test_regime_decoder_switches_trees_and_is_lossless(bundle, tmp_path):
    pair, plain = _files(tmp_path)
    # a repetitive prompt so the matcher offers a spine in some cycles and nothing in others
    prompts = [Prompt("p0", "abcdefghijklmnop" * 4, "stdlib"), Prompt("p1", "the cat sat on the mat. " * 3, "stdlib")]
    specs = [parse_labeled("ar"), parse_labeled(f"topology:{pair}"), parse_labeled(f"topology:{plain}")]
    res = run_with_regimes(bundle, specs, prompts, config=DecodeConfig(max_new_tokens=40, record=True))
    assert set(res) == {"ar", "topology:pair" + SUFFIX, "topology:plain"}
    for label, runs in res.items():
        for r, a in zip(runs, res["ar"]):
            assert r.token_ids == a.token_ids, label
    seen = set()
    for r in res["topology:pair" + SUFFIX]:
        for c in r.cycles:
            if c.spine_avail == 0:
                assert "spine" not in c.source and len(c.parent) - 1 <= UNMATCHED.budget
                seen.add("unmatched")
            else:
                assert c.source.count("spine") >= 1
                seen.add("matched")
    assert seen == {"matched", "unmatched"}
