"""Shared pieces of the explorer's AppTest tests (tests/test_app*.py): the page under test, its
fixtures (imported by name into each test module), readers of what the page shows, the library's
own numbers for a What-if view, and the uploads the tabs take."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.sections.common import TAB_KEY
from goose_theory.acceptance import Acceptance
from goose_theory.bound import paper_lower_bound
from goose_theory.optimize import build_topology
from goose_theory.simulate import simulate
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from goose_theory.yields import exact_yield

REGIME_EXPORT = "bench/results/shuffled_2026-11-30/mtbench_fit15_prior/topology-mtbench-shuffled-regimes.json"
APP = str(Path(__file__).resolve().parent.parent / "app" / "explorer.py")
BY_PARENT = {"p_t_spine": 0.02, "p_t_chain": 0.4}  # the traces' shape: low under spine, high in chains
TIMEOUT = 120  # the first run imports numba kernels; later runs take well under a second


@pytest.fixture(autouse=True)
def unfrozen_heap():
    """The page freezes long-lived objects (``app/sections/common.freeze_long_lived``); this test
    process is no page server, so they go back to the collector after each test (frozen objects
    are invisible to ``gc.get_referrers``, which hypothesis, for one, relies on)."""
    yield
    gc.unfreeze()


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not app.exception
    return app


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """file name -> bytes of every download button the page offers (AppTest keeps no contents)."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    served: dict[str, bytes] = {}
    load = MemoryMediaFileStorage.load_and_get_id

    def spy(self, path_or_data, mimetype, kind, filename=None):
        if filename:
            served[filename] = path_or_data
        return load(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", spy)
    return served


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def deltas(app: AppTest) -> dict[str, str]:
    return {m.label: m.proto.delta for m in app.metric}


def errors(app: AppTest) -> list[str]:
    return [e.value for e in app.error]


def open_tab(app: AppTest, label: str) -> AppTest:
    """Click a tab: only the open tab runs, so a test opens the one it reads."""
    app.session_state[TAB_KEY] = label
    return app.run()


def expected(p_s, p_t, model="exclusive", rule="optimal", budget=60, seed=0, p_t_spine=None, p_t_chain=None,
             **shape):
    acc = Acceptance.parse(p_s, p_t, model, p_t_spine=p_t_spine, p_t_chain=p_t_chain)
    topo = build_topology(rule, acc, budget=budget, **shape).topology
    sim = simulate(topo, acc, cycles=200_000, seed=seed)
    return topo, exact_yield(topo, acc).expected_tau, paper_lower_bound(topo, acc).lower_bound, sim


def assert_whatif_numbers(app: AppTest, topo_exact_bound_sim) -> None:
    topo, exact, bound, sim = topo_exact_bound_sim
    shown = metrics(app)
    assert shown["exact E[tau]"] == f"{exact:.4f}"
    assert shown["paper's lower bound"] == f"{bound:.4f}"
    assert shown["Monte Carlo mean"] == f"{sim.mean:.4f}"
    assert deltas(app)["Monte Carlo mean"] == f"95% CI {sim.ci95[0]:.4f} .. {sim.ci95[1]:.4f}"
    assert shown["tree"] == f"{topo.budget} nodes"


PROFILE = {"schema": "goose-latency/1", "device": "test", "model": "m", "dtype": "float32",
           "sizes": [1, 8, 32, 128], "seconds": [0.020, 0.021, 0.026, 0.060], "draft_s": 0.0005}


def upload_profile(at: AppTest, data: bytes, name: str = "p.json") -> None:
    open_tab(at, "Cost")
    at.selectbox(key="latency_choice").set_value("upload a profile").run()
    at.file_uploader(key="latency_upload").set_value((name, data, "application/json")).run()


def upload_traces(at: AppTest, files: list[tuple[str, bytes]]) -> None:
    open_tab(at, "Traces")
    at.radio(key="trace_source").set_value("upload parquet files").run()
    at.file_uploader(key="trace_upload").set_value([(n, d, "application/octet-stream") for n, d in files]).run()


@pytest.fixture(scope="module")
def trace_bytes(tmp_path_factory) -> bytes:
    tree = build_topology("optimal", Acceptance.parse(0.55, 0.07), budget=10).topology
    path = tmp_path_factory.mktemp("app-traces") / "t.parquet"
    write_synthetic(path, SyntheticSpec(0.55, 0.07, (tree,), prompts=10, cycles=50), seed=5)
    return path.read_bytes()
