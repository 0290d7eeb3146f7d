"""Synthetic traces: real v1 schema, exclusive-model draws that match the exact yield, seeds."""
from __future__ import annotations

import numpy as np
import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology
from goose_theory.traceio import REQUIRED_COLUMNS, open_trace, trace_metadata
from goose_theory.synthetic import SyntheticSpec, synthetic_columns, synthetic_table, write_synthetic
from goose_theory.yields import ExclusiveModelError, exact_yield

TREE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0),
                            (0, "transition", 0), (0, "transition", 1), (1, "transition", 0), (4, "transition", 0)])
CHAIN = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])


def _cycles(table):
    df = table.to_pandas()
    df["cyc"] = (df["node"] == 0).cumsum()
    return df


def test_schema_roundtrip_and_metadata(tmp_path):
    path = tmp_path / "s.parquet"
    write_synthetic(path, SyntheticSpec(0.5, 0.1, (TREE, CHAIN), prompts=3, cycles=4), seed=1)
    pf = open_trace(path)
    assert set(REQUIRED_COLUMNS) <= set(pf.schema_arrow.names)
    meta = trace_metadata(pf)
    assert meta["synthetic"] is True and meta["seed"] == 1 and meta["truth"][0]["p_s"] == 0.5
    nodes = pf.read(columns=["node"]).column("node").to_numpy()
    assert (nodes == 0).sum() == 3 * 4  # one root per cycle


def test_rows_are_consistent_exclusive_walks():
    table = synthetic_table(SyntheticSpec([0.6, 0.7], [0.2, 0.1], (TREE, CHAIN), prompts=5, cycles=40), seed=2)
    df = _cycles(table)
    for _, cyc in df.groupby("cyc"):
        acc = cyc["accepted"].to_numpy()
        par = cyc["parent"].to_numpy()
        assert acc[0] and cyc["match"].iloc[0]
        assert np.array_equal(cyc["reached"].to_numpy()[1:], acc[par[1:]])
        assert np.array_equal(acc[1:], cyc["match"].to_numpy()[1:] & acc[par[1:]])
        # exclusive: at most one matching child per node
        kids = cyc[cyc["parent"] >= 0].groupby("parent")["match"].sum()
        assert kids.max() <= 1
        assert cyc["tau"].iloc[0] == acc.sum()


def test_mean_tau_matches_exact_yield():
    acc = Acceptance.parse([0.6, 0.7], [0.2, 0.1])
    table = synthetic_table(SyntheticSpec(acc.p_s, acc.p_t, (TREE,), prompts=50, cycles=400), seed=3)
    df = _cycles(table)
    tau = df.groupby("cyc")["accepted"].sum()
    res = exact_yield(TREE, acc)
    assert abs(tau.mean() - res.expected_tau) < 4 * res.std / np.sqrt(len(tau))


def test_seed_reproducible_and_distinct():
    spec = SyntheticSpec(0.5, 0.1, (TREE,), prompts=4, cycles=10, prompt_sd=0.5)
    a = synthetic_columns(spec, seed=7)
    b = synthetic_columns(spec, seed=7)
    c = synthetic_columns(spec, seed=8)
    assert np.array_equal(a["match"], b["match"]) and not np.array_equal(a["match"], c["match"])


def test_planted_cap_limits_accepted_depth():
    spec = SyntheticSpec(0.9, 0.05, (TREE,), prompts=4, cycles=50, max_accepted_depth=1)
    df = _cycles(synthetic_table(spec, seed=4))
    assert df.loc[df["accepted"], "depth"].max() == 1
    assert df.loc[df["depth"] == 2, "match"].any()  # matches below still recorded


def test_infeasible_exclusive_parameters_rejected():
    with pytest.raises(ExclusiveModelError):
        synthetic_columns(SyntheticSpec(0.9, 0.5, (TREE,), prompts=1, cycles=1), seed=0)


def test_groups_concatenate_with_labels():
    specs = [SyntheticSpec(0.5, 0.1, (CHAIN,), prompts=2, cycles=3, method="a"),
             SyntheticSpec(0.5, 0.1, (TREE,), prompts=2, cycles=3, method="b", run_id="r1")]
    table = synthetic_table(specs, seed=0)
    assert table.num_rows == 2 * 3 * CHAIN.n_nodes + 2 * 3 * TREE.n_nodes
    assert sorted(set(table.column("method").to_pylist())) == ["a", "b"]


def test_per_parent_p_t_drives_the_draws():
    """Transition children draw from p_t, p_t_spine or p_t_chain by their parent's source: the
    match rates of reached nodes follow, and mean tau matches the exact yield of that model."""
    spec = SyntheticSpec([0.6, 0.7], 0.15, (TREE,), prompts=50, cycles=400, p_t_spine=0.05, p_t_chain=0.6)
    acc = spec.acceptance
    assert acc.by_parent and acc.transition_q(0, 1) == 0.05 and acc.transition_q(0, 2) == 0.6
    df = _cycles(synthetic_table(spec, seed=4))
    row_of_parent = df.index.to_numpy() - df["node"].to_numpy() + df["parent"].clip(0).to_numpy()
    df["ps"] = df["source"].to_numpy()[row_of_parent]
    reached_t = df[(df["source"] == "transition") & df["reached"]]
    for source, truth in (("spine", 0.05), ("transition", 0.6)):
        rate = reached_t[reached_t["ps"] == source]["match"]
        assert abs(rate.mean() - truth) < 4 * np.sqrt(truth * (1 - truth) / len(rate)), source
    root_r0 = reached_t[(reached_t["ps"] == "root") & (reached_t["rank"] == 0)]["match"]
    assert abs(root_r0.mean() - 0.15) < 4 * np.sqrt(0.15 * 0.85 / len(root_r0))
    tau = df.groupby("cyc")["accepted"].sum()
    res = exact_yield(TREE, acc)
    assert abs(tau.mean() - res.expected_tau) < 4 * res.std / np.sqrt(len(tau))
    assert res.expected_tau != exact_yield(TREE, Acceptance.parse(acc.p_s, acc.p_t)).expected_tau
