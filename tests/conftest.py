"""Shared test helpers: random valid topologies for property tests, a trace copy with edited
metadata; gpu tests need a CUDA device."""
from __future__ import annotations

import numpy as np

from goose_theory.topology import Topology


def random_topology(rng: np.random.Generator, n_nodes: int, *, spine_prob: float = 0.4,
                    max_depth: int = 6, max_spine: int = 20) -> Topology:
    """A random valid tree: each new node hangs on a random earlier node, as the spine child
    where allowed (with probability ``spine_prob``), else as the next transition rank."""
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
                parents.append(p); sources.append("transition"); ranks.append(next_rank[p])
                next_rank[p] += 1; is_spine_end.append(False)
                break
        depth.append(depth[p] + 1); has_spine_child.append(False); next_rank.append(0)
    return Topology.from_nodes(zip(parents, sources, ranks), max_depth=max_depth, max_spine=max_spine)


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
