"""fit-acceptance --regimes end to end: the two-regime files it exports (and the runtime runs), their
budget under --latency, and the options, traces and fit errors it refuses in one line."""
from __future__ import annotations

import json
import os

import pytest

from goose_runtime.fit_cli import main
from tests.fittraces import good_trace, rewrite


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return good_trace(tmp_path_factory.mktemp("traces") / "good.parquet")


def test_regimes_exports_a_pair_the_runtime_runs(tmp_path, capsys):
    from goose_runtime.methods import parse_method
    from goose_theory.topology import load_topology
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces")
    files = [os.path.join(traces, f) for f in ("mtbench.parquet", "mtbench-b8.parquet")]
    out = tmp_path / "fit"
    assert main([*files, "--group-by", "benchmark", "--budget", "4", "--out", str(out), "--regimes",
                 "--bootstrap", "50", "--regime-draws", "3", "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    single, pair = out / "topology-mtbench.json", out / "topology-mtbench-regimes.json"
    [export] = [e for e in result["regime_exports"] if e["group"] == "mtbench"]
    assert export["single"]["file"] == str(single) and export["regime_file"]["file"] == str(pair)
    assert export["single"]["predicted_tau"] == pytest.approx(load_topology(single).meta["predicted_tau"])
    assert export["regime_file"]["predicted_tau"] == pytest.approx(load_topology(pair).meta["predicted_tau"])
    for key, path in (("single", single), ("regime_file", pair)):  # each file's own bootstrap interval (3 draws)
        lo, hi = export[key]["predicted_ci95"]
        assert load_topology(path).meta["predicted_ci95"] == [lo, hi] and 1 <= lo <= hi
    # the recommended (single-regime optimal) tree is not what the file holds now, so no file is named for it
    [group] = [g for g in result["groups"] if g["label"] == "mtbench"]
    assert group["file"] is None
    assert captured.err.startswith("mtbench: predicted-tau intervals from 3 bootstrap draws") and captured.err.count("\n") == 1
    assert "few for a 95% interval, its ends rest on a draw or two: use 100)" in captured.err
    assert load_topology(single).meta["rule"] == "regime-optimal"
    spec = parse_method(f"topology:{pair}")
    assert spec.unmatched is not None and spec.topology.budget <= 4
    assert load_topology(pair).meta["predicted_tau"] > 1.0
    # as text, the two predictions of one group come with which one a measurement is held against
    assert main([*files, "--group-by", "benchmark", "--budget", "4", "--out", str(tmp_path / "fit2"), "--regimes",
                 "--bootstrap", "50", "--regime-draws", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("exported (--regimes) for mtbench at budget 4"))
    assert lines[at - 1].startswith("--regimes: the exports below fit the cycles with and without a context match")
    assert " [" not in lines[at] and "95% intervals: the fitted prompts" not in (tmp_path / "fit2" / "report.md").read_text()
    # with draws, each prediction carries its interval on the line and in the report, which says what it holds
    report = (out / "report.md").read_text()
    for key, words in (("single", "one tree"), ("regime_file", "regime file")):
        tau, (lo, hi) = export[key]["predicted_tau"], export[key]["predicted_ci95"]
        assert f"{words}, predicted tau {tau:.3f} [{lo:.2f}, {hi:.2f}] -> " in report
    assert "95% intervals: the fitted prompts resampled, the two-regime fit redone" in report


def test_regimes_with_latency_export_where_the_regime_files_rate_peaks(tmp_path, capsys):
    from goose_theory.latency import LatencyProfile, save_latency
    from goose_theory.topology import load_topology
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "prior", "mtbench-b8.parquet")
    prof = tmp_path / "lat.json"  # a step up after 3 rows, as on the Xeon host: budget 2 costs one step
    save_latency(LatencyProfile(sizes=(1, 3, 4, 11), seconds=(0.033, 0.034, 0.045, 0.052)), prof)
    out = tmp_path / "fit"
    assert main([traces, "--group-by", "benchmark", "--latency", str(prof), "--out", str(out), "--regimes",
                 "--bootstrap", "50", "--regime-draws", "0", "--json"]) == 0
    captured = capsys.readouterr()
    [line] = [x for x in captured.err.splitlines() if x.startswith("mtbench: regime file's predicted tokens/s")]
    rates = {int(b): float(r) for b, r in (item.split(": ") for item in line.split("by budget: ")[1].split("; ")[0].split(", "))}
    assert sorted(rates) == list(range(1, 11))  # every budget the profile covers, 10 at most
    best = max(rates, key=rates.get)
    [export] = json.loads(captured.out)["regime_exports"]
    assert export["budget"] == best == load_topology(out / "topology-mtbench-regimes.json").budget
    assert f"exported at {best} (the single-regime fit chose" in line


@pytest.mark.parametrize("args,needle", [(["--regimes"], "--regimes needs --out"),
                                         (["--regimes", "--group-by", "method", "--out", "o"], "--regimes needs"),
                                         (["--regime-draws", "-1"], "--regime-draws: -1 is not in 0..10000")])
def test_regimes_bad_options_exit_2(good, capsys, args, needle):
    assert main([str(good), *args]) == 2
    assert needle in capsys.readouterr().err


def test_regimes_on_traces_it_cannot_fit_exits_2_and_writes_nothing(good, tmp_path, capsys):
    # traces recorded before spine_avail existed fit as usual, but not into regimes
    old = rewrite(good, tmp_path / "old.parquet", drop="spine_avail")
    assert main([str(old), "--bootstrap", "50"]) == 0
    capsys.readouterr()
    out = tmp_path / "o"
    assert main([str(old), "--out", str(out), "--regimes", "--bootstrap", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--regimes" in err and not out.exists()


def test_a_bootstrap_draw_the_fit_refuses_is_one_line_naming_the_set(tmp_path, capsys, monkeypatch):
    import goose_theory.regimeinterval

    def refuse(*args, **kwargs):
        raise ValueError("the traces hold none of the methods goose@16\nsecond line")
    monkeypatch.setattr(goose_theory.regimeinterval, "with_intervals", refuse)
    trace = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "prior", "mtbench-b8.parquet")
    out = tmp_path / "fit"
    assert main([trace, "--group-by", "benchmark", "--regimes", "--bootstrap", "10", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "error: --regimes: mtbench: bootstrap interval: the traces hold none of the methods goose@16\n"
    assert not out.exists()


def test_regime_exports_turns_a_fit_error_into_one_usage_line(good, tmp_path, monkeypatch):
    """The one wrapper fit-acceptance --regimes and goose loop share: ValueError -> UsageError of
    one line, the caller's context (naming the set) first."""
    import goose_theory.regimeexport
    from goose_runtime.fit_cli import regime_exports
    from goose_theory.cli_util import UsageError

    old = rewrite(good, tmp_path / "old.parquet", drop="spine_avail")
    with pytest.raises(UsageError) as caught:
        regime_exports([str(old)], bench=None, budget=4, context="two-regime fit (x)")
    msg = str(caught.value)
    assert msg.startswith("two-regime fit (x): ") and "spine_avail" in msg and "\n" not in msg

    def boom(*args, **kwargs):
        raise ValueError("first line\nsecond line")
    monkeypatch.setattr(goose_theory.regimeexport, "regime_topologies", boom)
    with pytest.raises(UsageError, match=r"^--regimes: all: first line$"):
        regime_exports([str(good)], bench=None, budget=4, context="--regimes: all")


def test_budget_zero_with_latency_still_exports_the_regime_files(tmp_path, capsys):
    # --budget caps the cost table at [0], where the regime budget rule has nothing to choose
    # (it needs a budget >= 1): export at 0, as without --latency
    from goose_theory.latency import LatencyProfile, save_latency
    from goose_theory.topology import load_topology
    prof = tmp_path / "lat.json"
    save_latency(LatencyProfile(sizes=(1, 8), seconds=(0.02, 0.03)), prof)
    trace = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "stdlib-b8.parquet")
    out = tmp_path / "fit"
    assert main([trace, "--budget", "0", "--latency", str(prof), "--regimes", "--bootstrap", "10", "--regime-draws", "2",
                 "--out", str(out)]) == 0
    files = sorted(out.glob("topology*-regimes.json"))
    assert files and all(load_topology(f).budget == 0 for f in files)


@pytest.mark.parametrize("trace, budget", [("humaneval-b8.parquet", 40), ("prior/mtbench-b8.parquet", 20)])
def test_regimes_export_where_the_optimum_leaves_rank_gaps(tmp_path, trace, budget):
    """These two failed with "node 21: node 0 already has a transition child of rank 2" until
    5 Dec: the optimum may keep ranks 0 and 2 without 1, and the spare-slot growth proposed rank 2
    again (tests/test__spare_kernels.py has the kernel's case). The README's own --regimes example
    at the traces' budget 80, and goose loop under a GPU profile, hit it."""
    from goose_runtime.methods import parse_method
    from goose_theory.topology import load_topology

    path = os.path.join(os.path.dirname(__file__), os.pardir, "traces", trace)
    out = tmp_path / "fit"
    assert main([path, "--budget", str(budget), "--regimes", "--bootstrap", "10", "--regime-draws", "0",
                 "--out", str(out)]) == 0
    pair = out / "topology-all-regimes.json"
    assert load_topology(pair).budget == budget and parse_method(f"topology:{pair}").unmatched is not None
