"""Shared test helpers: random valid topologies for property tests, a trace copy with edited
metadata, small fixed trees for the fit tests, a full adjacency table and a draft-tree check for
the tree builders, a two-group fit analysis and its report's sections; gpu tests need a CUDA device;
`no_model` fails a test that loads a model, `tiny` puts the tiny random model in its place,
`keep_torch_threads` (every test) restores torch's thread count, and `quiet_host` makes the host
quiet for what caches measurements."""
from __future__ import annotations

import re

import numpy as np
import pytest

from goose_theory.topology import TRANSITION, Topology

V = 64  # vocabulary of the tree-builder tests' adjacency tables

# small fixed trees for the fit tests: spine and transition nodes (TREE), a long spine (DEEP)
TREE = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (2, "spine", 0),
                            (0, "transition", 0), (0, "transition", 1), (1, "transition", 0), (4, "transition", 0)])
DEEP = Topology.from_nodes([(-1, "root", 0)] + [(i, "spine", 0) for i in range(8)] + [(0, "transition", 0)])


def random_topology(rng: np.random.Generator, n_nodes: int, *, spine_prob: float = 0.4,
                    max_depth: int = 6, max_spine: int = 20, gap_prob: float = 0.0) -> Topology:
    """A random valid tree: each new node hangs on a random earlier node, as the spine child
    where allowed (with probability ``spine_prob``), else as the next transition rank, which
    skips one rank with probability ``gap_prob`` (the optimum's first fit keeps ranks 0 and 2
    without 1; 0 draws nothing more from ``rng``, so the trees of a seed stay as they were)."""
    parents, sources, ranks = [-1], ["root"], [0]
    depth, has_spine_child, next_rank, is_spine_end = [0], [False], [0], [True]
    for _ in range(n_nodes - 1):
        while True:
            p = int(rng.integers(0, len(parents)))
            spine_ok = is_spine_end[p] and not has_spine_child[p] and depth[p] < max_spine
            if spine_ok and rng.random() < spine_prob:
                parents.append(p); sources.append("spine"); ranks.append(0)
                has_spine_child[p] = True; is_spine_end.append(True)
                break
            if depth[p] < max_depth:
                if gap_prob and rng.random() < gap_prob:
                    next_rank[p] += 1
                parents.append(p); sources.append("transition"); ranks.append(next_rank[p])
                next_rank[p] += 1; is_spine_end.append(False)
                break
        depth.append(depth[p] + 1); has_spine_child.append(False); next_rank.append(0)
    return Topology.from_nodes(zip(parents, sources, ranks), max_depth=max_depth, max_spine=max_spine)


def full_table(seed: int = 0, k: int = 10):
    """Every unigram row filled with K distinct successors."""
    from goose_runtime.adjacency import AdjacencyTable  # here: theory-only runs need no runtime import

    rng = np.random.default_rng(seed)
    table = AdjacencyTable(V, top_k=k)
    toks = np.stack([rng.permutation(V)[:k] for _ in range(V)])
    table.update(np.full(V, -1), np.arange(V), toks, np.sort(rng.random((V, k)))[:, ::-1].astype(np.float32))
    return table


def check_tree(tree, max_depth=6):
    for i in range(1, tree.n_nodes):
        p = tree.parent[i]
        assert 0 <= p < i and tree.depth[i] == tree.depth[p] + 1
        sibs = [tree.token[c] for c in tree.children[p]]
        assert len(sibs) == len(set(sibs)), "siblings must be distinct tokens"
        if tree.source[i] == TRANSITION:
            assert tree.depth[i] <= max_depth


def thresholded_trace_copy(src: str, dst) -> None:
    """A copy of trace ``src`` whose metadata says its first method ran with ``--min-score 0.01``."""
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(src)
    meta = dict(table.schema.metadata)
    config = json.loads(meta[b"config"])
    config["methods"][0]["min_score"] = 0.01
    meta[b"config"] = json.dumps(config).encode()
    pq.write_table(table.replace_schema_metadata(meta), dst)


def pytest_collection_modifyitems(config, items):
    """Deselect (not skip) the ``gpu`` tests where torch sees no CUDA device; ``-m gpu`` runs only them."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu:
        return
    import torch  # only when gpu tests were collected: theory-only runs stay free of torch
    if torch.cuda.is_available():
        return
    config.hook.pytest_deselected(items=gpu)
    items[:] = [item for item in items if not item.get_closest_marker("gpu")]


@pytest.fixture()
def tiny(monkeypatch):
    """The tiny random model in place of every load_model (fast CLI tests); returns its bundle."""
    import goose_runtime.model as model_mod

    bundle = model_mod.tiny_random_bundle(seed=1)
    monkeypatch.setattr(model_mod, "load_model", lambda name="default", **kw: bundle)
    return bundle


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """Restores torch's thread count after every test: it is process-wide (``--threads``, record_traces),
    and a leaked 1 once ran every later real-model test on one thread. Theory-only runs, which never
    import torch, are left alone."""
    import sys

    torch = sys.modules.get("torch")
    n = torch.get_num_threads() if torch is not None else None
    yield
    if n is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)


@pytest.fixture()
def quiet_host(monkeypatch):
    """A quiet host, whatever the CI machine's load: what a test sees cached must not depend on it
    (a linear plan or latency profile measured under load is not cached); nothing measured earlier."""
    import goose_runtime.linear_plan as plan_mod
    import goose_runtime.profile as profile_mod

    monkeypatch.setattr(plan_mod, "host_busy", lambda: False)
    monkeypatch.setattr(plan_mod, "_UNCACHED", {})
    monkeypatch.setattr(profile_mod, "_UNCACHED", {})


@pytest.fixture()
def no_model(monkeypatch):
    """Any model load fails the test: bad input must be refused before it."""
    import goose_runtime.model as model_mod

    def refuse(*args, **kwargs):
        raise AssertionError("bad input must be refused before the model loads")
    monkeypatch.setattr(model_mod, "load_model", refuse)


@pytest.fixture(scope="module")
def report_analysis(tmp_path_factory):
    """The fit-acceptance report's tests (test_fit_report, test_fit_files): two trace files, one group each: ``goose`` drawn from the model, ``broken`` with nothing
    accepted past depth 1, so its observed tau falls below the paper's bound."""
    from goose_theory.fit import fit_counts
    from goose_theory.fitanalysis import analyze
    from goose_theory.fitcounts import count_files
    from goose_theory.synthetic import SyntheticSpec, write_synthetic

    d = tmp_path_factory.mktemp("report")
    good, broken = d / "good.parquet", d / "broken.parquet"
    write_synthetic(good, SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=12, cycles=40, method="goose"), seed=11)
    write_synthetic(broken, SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=12, cycles=40, method="broken",
                                          run_id="r2", max_accepted_depth=1), seed=12)
    counts = count_files([good, broken], group_by=["method"])
    return analyze(fit_counts(counts, n_boot=100, seed=0)), (str(good), str(broken))


def md_sections(text: str) -> dict[str, str]:
    """``## `` sections of the report by title (the part before the first one under "")."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2]))}


@pytest.fixture()
def topo_file(tmp_path):
    """The theory CLI tests' tree (tests.clirun.THEORY_NODES) as a topology file."""
    from goose_theory.topology import save_topology
    from tests.clirun import THEORY_NODES
    path = tmp_path / "tree.json"
    save_topology(Topology.from_nodes(THEORY_NODES), path)
    return str(path)


@pytest.fixture(scope="module")
def sharp():
    """The tiny random model for sampling tests (test_sampling*.py): its logits are nearly flat, so
    the noise would decide every token; its output layer scaled up gives the tempered distribution
    a clear head, and drafts get accepted."""
    import torch

    from goose_runtime.model import tiny_random_bundle

    bundle = tiny_random_bundle(seed=1)
    with torch.no_grad():
        bundle.model.get_output_embeddings().weight.mul_(60.0)
    return bundle
