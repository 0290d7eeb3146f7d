"""Regime files: the spare-slot matched tree (regimes.matched) round-trips through a file, and the
writer puts the pair beside the single tree."""
from __future__ import annotations

import json

import pytest

from goose_theory.regimefile import matched_topology, save_regime_topologies, unmatched_topology
from goose_theory.topology import Topology, TopologyError, load_topology

BASE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
SPARE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (1, "transition", 0)])
UNMATCHED = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1)])  # no spine there


def test_matched_tree_round_trips_and_the_writer_pairs_the_files(tmp_path):
    pair = BASE.with_meta(regimes={"matched": SPARE.to_dict(), "unmatched": UNMATCHED.to_dict()})
    path = save_regime_topologies(BASE, pair, str(tmp_path / "topology-x.json"))
    assert path.endswith("topology-x-regimes.json")
    loaded = load_topology(path)
    assert loaded.budget == 2 and matched_topology(loaded).parent == SPARE.parent
    assert matched_topology(load_topology(tmp_path / "topology-x.json")) is None
    assert unmatched_topology(loaded).parent == UNMATCHED.parent


def test_a_malformed_matched_tree_is_one_topology_error():
    bad = {**SPARE.to_dict(), "nodes": [{"parent": -1, "source": "root", "rank": 0}, {"parent": 5, "source": "spine", "rank": 0}]}
    with pytest.raises(TopologyError):
        matched_topology(BASE.with_meta(regimes={"matched": bad}))


@pytest.mark.parametrize("regimes", ["x", {"matched": 5}, {"confident": "abc"}, {"unmatched": [1, 2]}])
def test_a_regimes_entry_of_the_wrong_type_is_one_topology_error(regimes):
    from goose_theory.regimefile import confident_topology
    topo = BASE.with_meta(regimes=regimes)
    with pytest.raises(TopologyError, match="regimes"):
        matched_topology(topo), confident_topology(topo), unmatched_topology(topo)


@pytest.mark.parametrize("regimes, message", [
    ({"unmatched": {}}, "regimes.unmatched is empty"),
    ({"matched_by_length": []}, "regimes.matched_by_length is empty"),
    ({"unmatchd": {"nodes": [{"source": "root"}]}}, "unknown entry 'unmatchd'"),
    ({"unmatched": {"nodes": [{"source": "root"}, {"parent": 5, "source": "spine", "rank": 0}]}},
     "regimes.unmatched: node 1: parent 5 is not an earlier node"),  # which tree, not the file's own nodes
    ({"confident": {"nodes": [{"source": "root"}, {"parent": 5, "source": "spine", "rank": 0}], "min_match": 8}},
     "regimes.confident: node 1: parent 5"),
    ({"matched_by_length": [{"nodes": [{"source": "root"}], "budget": 3}]},
     r"regimes.matched_by_length\[0\]: 'budget' is 3"),
    # the confident tree skipped the checks the other trees get (found by fuzzing the CLIs)
    ({"confident": {"schema": "zzz", "nodes": [{"source": "root"}]}}, "regimes.confident: schema 'zzz' is not"),
    ({"confident": {"nodes": [{"source": "root"}], "regimes": {"unmatched": {"nodes": [{"source": "root"}]}}}},
     "regimes.confident holds regimes of its own"),
    ({}, "regimes is empty"),  # the CLI audit: these three loaded without a word
    ({"unmatched": {"schema": "zzz", "nodes": [{"source": "root"}]}}, "regimes.unmatched: schema 'zzz' is not"),
    ({"matched_by_length": [{"nodes": [{"source": "root"}], "regimes": {"unmatched": {"nodes": [{"source": "root"}]}}}]},
     r"regimes.matched_by_length\[0\] holds regimes of its own"),
    # fuzz review, 7 Dec: loaded, priced and drafted (the runtime found no spine token to put there)
    ({"unmatched": {"nodes": [{"source": "root"}, {"parent": 0, "source": "spine"}]}},
     "regimes.unmatched holds spine nodes, which an unmatched cycle cannot draft"),
])
def test_every_reader_checks_a_regime_files_trees(tmp_path, regimes, message):
    """A malformed entry was read as absent (the file's own tree drafted instead) and yield never
    looked at them; load_topology now checks them, so every command refuses the file alike."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]).to_dict(),
                                "regimes": regimes}))
    with pytest.raises(TopologyError, match=message):
        load_topology(path)
