"""Method parsing: canonical names, budgets, and one-line errors for bad input."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from goose_theory.topology import Topology, save_topology
from goose_runtime.goose import iso_topology
from goose_runtime.methods import MethodError, parse_method
from goose_runtime.trees import build_from_topology


def test_canonical_names_and_budgets():
    assert parse_method("ar").name == "ar"
    assert parse_method("PLD").name == "pld"
    tr = parse_method("tr")
    assert tr.topology.budget == 80 and tr.uses_adjacency and not tr.uses_matcher
    iso = parse_method("iso:3")
    assert iso.name == "iso:3" and iso.budget == 60 and iso.topology.budget == 60
    assert parse_method("mixed-iso:5", budget=16).topology.budget == 16
    g = parse_method("goose", budget=24)
    assert g.budget == 24 and g.uses_matcher and g.uses_adjacency


def test_topology_file(tmp_path):
    path = tmp_path / "spine6.json"
    nodes = [(-1, "root", 0)] + [(i, "spine", 0) for i in range(6)] + [(0, "transition", r) for r in range(3)]
    save_topology(Topology.from_nodes(nodes), path)
    m = parse_method(f"topology:{path}")
    assert m.name == "topology:spine6" and m.budget == 9 and m.topology.spine_length == 6
    assert parse_method("topology", topology_path=str(path), budget=4).budget == 4


@pytest.mark.parametrize("spec", ["beam", "iso", "iso:0", "iso:x", "goose:3", "", "topology"])
def test_bad_specs_raise_one_line(spec):
    with pytest.raises(MethodError) as info:
        parse_method(spec)
    assert "\n" not in str(info.value) and str(info.value)


def test_invalid_topology_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "goose-topology/1", "nodes": [{"parent": -1, "source": "root"},
                                                                       {"parent": 5, "source": "spine"}]}))
    with pytest.raises(MethodError, match="bad topology") as info:
        parse_method(f"topology:{bad}")
    assert "\n" not in str(info.value)
    with pytest.raises(MethodError, match="no such file"):
        parse_method(f"topology:{tmp_path / 'missing.json'}")
    pair = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)]).with_meta(
        regimes={"unmatched": {"nodes": [{"parent": -1, "source": "root"}, {"parent": 3, "source": "transition"}]}})
    save_topology(pair, tmp_path / "pair.json")
    with pytest.raises(MethodError, match="bad topology"):  # a malformed unmatched tree is refused too
        parse_method(f"topology:{tmp_path / 'pair.json'}")


def test_a_topology_past_the_verification_cap_is_refused_unless_cut(tmp_path):
    path = tmp_path / "wide.json"
    save_topology(iso_topology(1100, 1100), path)  # one level of 1100 transitions
    with pytest.raises(MethodError, match="topology wide has 1100 nodes, more than the 1024 a verification takes"):
        parse_method(f"topology:{path}")
    assert parse_method(f"topology:{path}", budget=1024).budget == 1024


def test_bad_budget():
    # goose_theory scores budget 0 (the root alone); the runtime refuses it and says what it would be
    with pytest.raises(MethodError, match=r"^budget must be a positive integer, got 0 \(a budget of 0 drafts nothing: "
                                          r"that is method 'ar'\)$"):
        parse_method("goose", budget=0)
    with pytest.raises(MethodError, match=r"^K in iso:K must be a positive integer, got '0'$"):  # no hint: K is no budget
        parse_method("iso:0")
    # "iso:" said "got None", and goose+prio suggested goose (walkthrough, 5 Dec)
    with pytest.raises(MethodError, match=r"^method 'mixed-iso:' needs its K, the branching factor: mixed-iso:3"):
        parse_method("mixed-iso:")
    with pytest.raises(MethodError, match=r"did you mean 'goose\+prior'\?$"):
        parse_method("goose+prio")


@pytest.mark.parametrize("spec", ["iso:+3", "iso: 3", "iso:\u0663", "iso:\u00b2", "iso:1_0", "iso:3.0", "mixed-iso:-2"])
def test_k_is_ascii_digits_only(spec):
    # int() read '+3', ' 3', '1_0' and the Arabic-Indic three as 3 (and '²' passes str.isdigit)
    with pytest.raises(MethodError, match=r"K in (mixed-)?iso:K must be a positive integer, got"):
        parse_method(spec)
    assert parse_method("iso:03").name == "iso:3"


def test_a_budget_text_is_ascii_digits_and_huge_ones_stay_one_short_line():
    assert parse_method("goose", budget="16").budget == 16
    with pytest.raises(MethodError, match="budget must be a positive integer, got '\\+16'"):
        parse_method("goose", budget="+16")
    with pytest.raises(MethodError, match="budget must be at most 1024") as info:
        parse_method("goose", budget="9" * 5000)  # int() refuses more than 4300 digits: a ValueError traceback
    assert len(str(info.value)) <= 200


def _regime_file(tmp_path, min_match=1):
    matched = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0)])
    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (1, "transition", 0)])
    # a bare 3-chain: no other tree of the file has a spine node at depth 2
    confident = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0)])
    path = tmp_path / "triple.json"
    save_topology(matched.with_meta(regimes={"unmatched": unmatched.to_dict(),
                                             "confident": {**confident.to_dict(), "min_match": min_match}}), path)
    return path


def test_regime_file_with_a_confident_tree(tmp_path):
    m = parse_method(f"topology:{_regime_file(tmp_path, 8)}")
    assert m.confident.spine_length == 3 and m.min_match == 8 and m.unmatched.spine_length == 0
    assert parse_method("goose").confident is None
    with pytest.raises(MethodError, match="min_match"):
        parse_method(f"topology:{_regime_file(tmp_path, 0)}")


def test_confident_tree_is_drafted_and_decoding_stays_lossless(tmp_path):
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.model import tiny_random_bundle

    bundle = tiny_random_bundle()
    prompt = [5, 6, 7, 8, 9, 10, 11] * 6  # repeats: every n-gram length agrees on what follows
    config = DecodeConfig(max_new_tokens=24)
    ar = Decoder(bundle, parse_method("ar"), config).decode(prompt)
    run = Decoder(bundle, parse_method(f"topology:{_regime_file(tmp_path)}"), config).decode(prompt)
    assert run.token_ids == ar.token_ids
    assert any(max(c.spine_pos) >= 2 for c in run.cycles)  # only the confident tree reaches depth 2


def _spare_file(tmp_path):
    # the file's own tree: a 3-node spine; regimes.matched: the same spine plus spare transition slots
    own = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0)])
    spare = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0),
                                 (0, "transition", 0), (0, "transition", 1), (1, "transition", 0)])
    path = tmp_path / "spare.json"
    save_topology(own.with_meta(regimes={"matched": spare.to_dict()}), path)
    return path


def test_matched_tree_with_spare_slots_fills_what_a_short_match_leaves(tmp_path):
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.matcher import Match
    from goose_runtime.model import tiny_random_bundle

    spec = parse_method(f"topology:{_spare_file(tmp_path)}")
    assert spec.budget == 3 and spec.matched.budget == 6
    dec = Decoder(tiny_random_bundle(), spec, DecodeConfig(max_new_tokens=8))
    dec.adjacency.update(np.array([-1, 7]), np.array([7, 9]), np.array([[20, 21], [22, 23]]),
                         np.array([[1.0, 0.5], [1.0, 0.5]], dtype=np.float32))

    class _Short:  # the matcher offers one token, not confident
        def match(self):
            return Match(tokens=(9,), ngram=3, consensus=1, lengths_agree=1)

    tree = dec._build([5, 7], _Short())
    # spine slot at depth 1 is filled, the ones past the match drop; the spare root slots take
    # their place, breadth-first, up to the file's budget of 3
    assert tree.token == [7, 9, 20, 21] and tree.n_nodes - 1 == 3
    own = build_from_topology(spec.topology, Match(tokens=(9,), ngram=3, consensus=1, lengths_agree=1),
                              dec.adjacency, 5, 7, budget=3)
    assert own.n_nodes - 1 == 1  # without spare slots the short match leaves two of three unused


def test_topology_method_is_what_parse_method_gives_for_the_file(tmp_path):
    from goose_runtime.methods import topology_method
    from goose_theory.topology import Topology, save_topology
    unmatched = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0)])
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)]).with_meta(
        regimes={"unmatched": unmatched.to_dict()})
    save_topology(topo, tmp_path / "two.json")
    assert topology_method(topo, "two") == parse_method(f"topology:{tmp_path / 'two.json'}")
    assert topology_method(topo, "two", budget=1).budget == 1


def test_a_topology_file_name_that_cannot_be_a_label_is_refused_before_decoding(tmp_path):
    # the name is the method's label in the summary table and the trace; a non-UTF-8 byte (a lone
    # surrogate in Python) made the trace writer fail after the whole decode
    topo = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0)])
    for raw in (b"t\xff.json", b"two\nlines.json"):
        path = tmp_path / os.fsdecode(raw)
        save_topology(topo, path)
        with pytest.raises(MethodError, match="its name .* is not printable UTF-8 text; rename the file"):
            parse_method(f"topology:{path}")
    save_topology(topo, tmp_path / "café.json")  # any printable name is fine
    assert parse_method(f"topology:{tmp_path / 'café.json'}").name == "topology:café"


def _by_length_file(tmp_path):
    # the file's own tree: a 2-node spine; a 1-token match drafts a spine node plus two root
    # transitions, a longer one a 2-node spine plus one transition under its end
    own = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
    one = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (0, "transition", 0), (0, "transition", 1)])
    two = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "transition", 0)])
    path = tmp_path / "bylen.json"
    save_topology(own.with_meta(regimes={"matched_by_length": [one.to_dict(), two.to_dict()]}), path)
    return path


def test_by_length_trees_are_drafted_for_the_offered_length(tmp_path):
    from goose_runtime.matcher import NO_MATCH, Match

    spec = parse_method(f"topology:{_by_length_file(tmp_path)}")
    assert [t.budget for t in spec.by_length] == [3, 3] and spec.budget == 2
    assert spec.tree_for(Match((9,), 3, 1, 1)) is spec.by_length[0]
    assert spec.tree_for(Match((9, 8), 3, 1, 1)) is spec.by_length[1]
    assert spec.tree_for(Match((9, 8, 7, 6), 3, 1, 1)) is spec.by_length[1]  # longer: the last tree
    assert spec.tree_for(NO_MATCH) is spec.topology  # no unmatched tree: the file's own
    bad = tmp_path / "bad.json"
    save_topology(spec.topology.with_meta(regimes={"matched_by_length": {"nodes": []}}), bad)
    with pytest.raises(MethodError, match="matched_by_length must be a list"):
        parse_method(f"topology:{bad}")


@pytest.mark.parametrize("make_file", [_spare_file, _by_length_file], ids=["spare", "by-length"])
def test_matched_trees_decode_losslessly(tmp_path, make_file):
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.model import tiny_random_bundle

    bundle = tiny_random_bundle()
    prompt = [5, 6, 7, 8, 9, 10, 11] * 3 + [5, 6, 12, 13]
    config = DecodeConfig(max_new_tokens=24)
    ar = Decoder(bundle, parse_method("ar"), config).decode(prompt)
    run = Decoder(bundle, parse_method(f"topology:{make_file(tmp_path)}"), config).decode(prompt)
    assert run.token_ids == ar.token_ids
    assert any(c.spine_avail >= 1 for c in run.cycles)  # matched cycles drafted the file's matched trees


def test_prior_suffix():
    from goose_runtime.runner import method_label, parse_labeled
    g = parse_method("goose+prior", budget=8)
    assert g.prior and g.kind == "goose" and g.budget == 8 and g.name == "goose+prior"
    assert method_label(g) == "goose+prior@8" and parse_labeled("goose+prior@8") == g
    assert parse_method("iso:3+prior").topology == parse_method("iso:3").topology
    assert not parse_method("goose").prior
    for spec in ("ar+prior", "pld+prior"):
        with pytest.raises(MethodError, match="drafts no adjacency candidates"):
            parse_method(spec)
    with pytest.raises(MethodError, match="already has"):
        parse_method("goose+prior+prior")


def test_store_suffix():
    from goose_runtime.runner import method_label, parse_labeled
    g = parse_method("goose+store", budget=2)
    assert g.store and not g.prior and g.kind == "goose" and g.name == "goose+store" and g.budget == 2
    assert method_label(g) == "goose+store@2" and parse_labeled("goose+store@2") == g
    both = parse_labeled("goose+prior+store@4")
    assert both.store and both.prior and both.budget == 4 and both.name == "goose+prior+store"
    assert parse_labeled("goose+store+prior@4") == both  # one method, one name, whatever the order
    assert parse_method("auto+store").store and not parse_method("auto").store
    for spec in ("ar+store", "pld+store", "tr+store", "iso:3+store"):
        with pytest.raises(MethodError, match="applies to goose and auto only"):
            parse_method(spec)
    with pytest.raises(MethodError, match="already has"):
        parse_method("goose+store+store")
