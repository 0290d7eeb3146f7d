"""fit-acceptance end to end: bad files, --skip-bad, --json keys, exported topologies, report."""
from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from goose_runtime.fit_cli import expand_paths, main
from goose_theory.cli_util import UsageError
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from goose_theory.topology import Topology, load_topology
from tests.conftest import TREE
from tests.fittraces import good_trace, rewrite

@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return good_trace(tmp_path_factory.mktemp("traces") / "good.parquet")


def _bad_files(good, tmp):
    data = good.read_bytes()
    (tmp / "truncated.parquet").write_bytes(data[: len(data) // 2])
    (tmp / "notes.parquet").write_text("this is not parquet\n")
    return {"missing column": rewrite(good, tmp / "nomatch.parquet", drop="match"),
            "version": rewrite(good, tmp / "v2.parquet", version="2"),
            "empty": rewrite(good, tmp / "empty.parquet", rows=0),
            "corrupt bytes": tmp / "truncated.parquet", "not parquet": tmp / "notes.parquet"}


@pytest.mark.parametrize("kind,needle", [("missing column", "missing required column"), ("version", "goose_trace_version"),
                                         ("empty", "empty"), ("corrupt bytes", "parquet"), ("not parquet", "parquet")])
def test_bad_file_exits_2_naming_it_and_writes_nothing(good, tmp_path, capsys, kind, needle):
    bad = _bad_files(good, tmp_path)[kind]
    out = tmp_path / "out"
    assert main([str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and needle in err[0]
    assert not out.exists()


def test_several_files_stop_unless_skip_bad(good, tmp_path, capsys):
    bad = _bad_files(good, tmp_path)
    args = [str(good), str(bad["version"]), str(bad["not parquet"]), "--bootstrap", "50"]
    assert main(args + ["--out", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert str(bad["version"]) in err and str(bad["not parquet"]) in err and "--skip-bad" in err
    assert not (tmp_path / "o1").exists()
    assert main(args + ["--skip-bad", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("skipped:") == 2
    assert json.loads(captured.out)["files"] == [str(good)]
    # one bad file among good ones: one line, which names it and says how to go on
    assert main([str(good), str(bad["version"]), "--bootstrap", "50"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {bad['version']}: ") and line.endswith("; pass --skip-bad to fit the other 1")


def test_json_keys_bound_flag_and_exported_topology(good, tmp_path, capsys):
    out = tmp_path / "fit"
    assert main([str(good), "--group-by", "method", "--out", str(out), "--json", "--bootstrap", "200"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("p_s", "p_t"):
        assert set(result[key]) >= {"estimate", "ci95", "n", "naive_ci95"} and len(result[key]["ci95"]) == 2
    assert set(result["ratio"]) >= {"estimate", "ci95"}
    groups = {g["label"]: g for g in result["groups"]}
    assert set(groups) == {"goose", "broken"}
    for g in groups.values():
        assert {"p_s", "p_t", "ratio", "observed_tau", "predicted_tau", "p_t_by_parent"} <= set(g)
        by_parent = g["p_t_by_parent"]
        assert set(by_parent) == {"root", "spine", "transition"}
        assert sum(p["n"] for p in by_parent.values()) == g["p_t"]["n"]
        assert {"estimate", "ci95", "n", "by_rank"} <= set(by_parent["root"]) and len(by_parent["root"]["ci95"]) == 2
        assert {"supported", "lr", "p_value"} <= set(g["checks"]["p_t_by_parent"])
    bounds = {b["label"]: b for b in result["bound"]}
    assert bounds["broken"]["violated"] and not bounds["goose"]["violated"]
    assert {"lower_bound", "observed_tau", "ci95", "violated"} <= set(bounds["goose"])
    rec = result["recommended"]
    assert rec["rule"] == "optimal" and rec["budget"] == TREE.budget and rec["comparison"]
    scaled = bool(groups["goose"]["checks"]["spine_availability"])  # then p_s(d) is p_s times a(d): say so
    assert rec["acceptance_note"].startswith("p_s(d) is the fitted p_s times a(d)" if scaled else "the selected model")
    topo = load_topology(groups["goose"]["file"])
    assert topo.budget == TREE.budget and topo.meta["rule"] == "optimal"
    assert topo.meta["provenance"]["traces"] == [os.path.abspath(good)]
    assert topo.meta["provenance"]["fitted"]["selected"] == groups["goose"]["checks"]["selected"]
    assert topo.meta["predicted_tau"] == pytest.approx(groups["goose"]["recommended"]["predicted_tau"])
    assert load_topology(rec["file"]).budget == TREE.budget
    names = sorted(os.listdir(out))
    assert "report.md" in names and "bound_check.html" in names and "p_s_by_depth.html" in names
    assert "p_t_by_parent.html" in names and "p_t by parent source" in (out / "report.md").read_text()
    assert not [n for n in names if n.startswith(".tmp-")]
    assert "VIOLATED" in (out / "report.md").read_text()


def test_directory_glob_budget_and_text_summary(good, tmp_path, capsys):
    assert main([str(good.parent), "--budget", "5", "--bootstrap", "50"]) == 0
    text = capsys.readouterr().out
    assert "p_s =" in text and "p_t =" in text and "budget 5" in text
    assert main([os.path.join(str(good.parent), "go*.parquet"), "--json", "--bootstrap", "50"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == [str(good)]


def test_a_directory_means_its_own_files_not_its_subfolders(good, tmp_path):
    """As goose loop --traces DIR: traces/ keeps +prior traces in traces/prior/, not to be mixed in."""
    top, sub = tmp_path / "traces", tmp_path / "traces" / "prior"
    sub.mkdir(parents=True)
    shutil.copy(good, top / "a.parquet")
    shutil.copy(good, sub / "b.parquet")
    assert expand_paths([str(top)]) == [str(top / "a.parquet")]
    assert expand_paths([str(top / "**" / "*.parquet")]) == [str(top / "a.parquet"), str(sub / "b.parquet")]
    with pytest.raises(UsageError, match="holds no"):
        expand_paths([str(sub.parent.parent)])
    # one file under two spellings is one file (it was counted twice, its intervals too narrow)
    assert expand_paths([str(top / "a.parquet"), str(sub / ".." / "a.parquet")]) == [str(top / "a.parquet")]


def test_a_file_or_folder_whose_name_holds_glob_characters_is_itself(good, tmp_path):
    # 'br[1].parquet' was read as a glob (matching 'br1.parquet') and refused: "no files match"
    odd = tmp_path / "runs[1]"
    odd.mkdir()
    shutil.copy(good, odd / "br[1].parquet")
    assert expand_paths([str(odd / "br[1].parquet")]) == [str(odd / "br[1].parquet")]
    assert expand_paths([str(odd)]) == [str(odd / "br[1].parquet")]
    assert expand_paths([str(tmp_path / "runs[[]1]" / "*.parquet")]) == [str(odd / "br[1].parquet")]  # a glob still globs


@pytest.mark.parametrize("args,needle", [(["--group-by", "colour"], "colour"), (["--budget", "-1"], "budget"),
                                         (["--budget", "1000000"], "--budget must be at most 10000, got 1000000"),
                                         (["--bootstrap", "0"], "bootstrap"), (["--group-by", ""], "--group-by is empty"),
                                         (["--seed", "-1"], "--seed: -1 must be"), (["", "--json"], "path is empty ('')"),
                                         (["--bootstrap", "100000000000"], "--bootstrap: 100000000000 is not in 1.."),
                                         (["--out", "no-such-fit.json"], "no-such-fit.json is named like a file, but "
                                                                         "--out is a folder")])
def test_bad_options_exit_2(good, capsys, args, needle):
    assert main([str(good), *args]) == 2
    assert needle in capsys.readouterr().err


def test_glob_matching_nothing_exits_2(tmp_path, capsys):
    assert main([str(tmp_path / "nothing*.parquet")]) == 2
    assert "no files match" in capsys.readouterr().err


def test_latency_file_makes_the_budget_cost_aware(good, tmp_path, capsys):
    from goose_theory.latency import LatencyProfile, save_latency
    prof = tmp_path / "lat.json"
    save_latency(LatencyProfile(sizes=(1, 8), seconds=(0.02, 0.03)), prof)
    assert main([str(good), "--latency", str(prof), "--json", "--bootstrap", "50"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommended"]
    assert rec["budget_source"] == "cost-aware" and 0 <= rec["budget"] <= 7 and len(rec["cost_table"]) == 8
    # --budget is the most the cost-aware choice may take (as in goose optimize --latency)
    assert main([str(good), "--latency", str(prof), "--budget", "2", "--json", "--bootstrap", "50"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommended"]
    assert rec["budget"] <= 2 and [r["budget"] for r in rec["cost_table"]] == [0, 1, 2]
    save_latency(LatencyProfile(sizes=(5, 8), seconds=(0.02, 0.03)), tmp_path / "lat5.json")
    assert main([str(good), "--latency", str(tmp_path / "lat5.json"), "--budget", "2", "--out", str(tmp_path / "o")]) == 2
    assert "--budget 2 is below every tree" in capsys.readouterr().err and not (tmp_path / "o").exists()
    (tmp_path / "bad.json").write_text("{not json")
    assert main([str(good), "--latency", str(tmp_path / "bad.json"), "--out", str(tmp_path / "o")]) == 2
    assert "bad.json" in capsys.readouterr().err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("blocked", ["report.md", "p_s_by_depth.html", "topology-all-regimes.json"])
def test_a_blocked_output_file_exits_2_before_anything_is_written(tmp_path, capsys, blocked):
    """A folder where one of the report's files goes is refused up front: no topology file is left
    behind by a report that stopped half way."""
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "mtbench-b8.parquet")
    out = tmp_path / "fit"
    (out / blocked).mkdir(parents=True)
    assert main([traces, "--budget", "4", "--out", str(out), "--regimes", "--bootstrap", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and blocked in err and "is a directory" in err
    assert os.listdir(out) == [blocked]


def test_each_file_footer_is_read_once(good, tmp_path, capsys, monkeypatch):
    other = tmp_path / "other.parquet"  # other cycles: a rewrite of good's would now be refused as a copy
    write_synthetic(other, [SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=4, cycles=20, run_id="r3")], seed=12)
    reads: list[str] = []
    real = pq.ParquetFile

    def counting(source, *args, **kwargs):
        if kwargs.get("metadata") is None:  # a ParquetFile without a parsed footer reads it
            reads.append(str(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", counting)
    assert main([str(good), str(other), "--bootstrap", "50", "--json"]) == 0
    assert sorted(reads) == sorted([str(good), str(other)])
    assert json.loads(capsys.readouterr().out)["files"] == [str(good), str(other)]


def test_bad_rows_found_while_counting_exit_2_or_skip(good, tmp_path, capsys):
    import numpy as np
    table = pq.read_table(good)
    bad = tmp_path / "shuffled.parquet"
    pq.write_table(table.take(np.r_[1, 0, 2:table.num_rows]), bad)  # a valid trace file, rows out of order
    out = tmp_path / "out"
    assert main([str(good), str(bad), "--out", str(out), "--bootstrap", "50"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "root first" in err[0] and not out.exists()
    assert main([str(good), str(bad), "--skip-bad", "--bootstrap", "50", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(f"skipped: {bad}: ") and captured.err.count("\n") == 1
    assert json.loads(captured.out)["files"] == [str(good)]


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.set_column(t.schema.get_field_index("accepted"), "accepted",
                            pa.array(["true" if v else "false" for v in t.column("accepted").to_pylist()])),
     "column accepted is string, expected bool"),
    (lambda t: t.set_column(t.schema.get_field_index("rank"), "rank",
                            pa.array([-5] * t.num_rows, pa.int16())), "column rank has negative values"),
    (lambda t: t.set_column(t.schema.get_field_index("accepted"), "accepted",
                            pa.array([True] * t.num_rows)), "column accepted marks a node that did not match"),
])
def test_values_the_schema_cannot_check_are_refused(good, tmp_path, capsys, edit, message):
    """Such files used to fit with exit 0: 'true' strings made every node accepted (tau 23 for 2.6)."""
    table = pq.read_table(good)
    bad = tmp_path / "bad.parquet"
    pq.write_table(edit(table).replace_schema_metadata(table.schema.metadata), bad)
    assert main([str(bad), "--bootstrap", "5"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_traces_of_roots_only_are_refused(good, tmp_path, capsys):
    # ar runs draft nothing: the fit was all NaN, and a budget-0 tree was "recommended" and written
    table = pq.read_table(good)
    frame = table.to_pandas()
    roots = tmp_path / "roots.parquet"  # as ar records them: the root alone, one token a cycle
    pq.write_table(pa.Table.from_pandas(frame[frame["node"] == 0].assign(tau=1, budget=0), schema=table.schema,
                                        preserve_index=False), roots)
    out = tmp_path / "fit"
    assert main([str(roots), "--bootstrap", "20", "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: the traces reach no drafted node (roots only: ar runs?), so p_s and p_t cannot be estimated"
    assert not out.exists()


def test_one_trace_under_two_names_counts_once(good, tmp_path, capsys):
    copy = tmp_path / "copy.parquet"
    shutil.copy(good, copy)
    assert main([str(good), str(copy), "--bootstrap", "20"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {copy}: the same trace as {good} (an identical parquet footer)")
    assert main([str(good), str(copy), "--bootstrap", "20", "--skip-bad", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main([str(good), "--bootstrap", "20", "--json"]) == 0
    assert alone["files"] == [str(good)] and alone["p_s"] == json.loads(capsys.readouterr().out)["p_s"]


def test_a_group_of_roots_only_gets_no_topology(good, tmp_path, capsys):
    # beside drafted traces an ar group was fitted as NaN and "recommended" a budget-0 tree, written to a file
    table = pq.read_table(good)
    frame = table.to_pandas()
    roots = tmp_path / "ar.parquet"
    pq.write_table(pa.Table.from_pandas(frame[frame["node"] == 0].assign(tau=1, method="ar", budget=0), schema=table.schema,
                                        preserve_index=False), roots)
    out = tmp_path / "fit"
    assert main([str(good), str(roots), "--group-by", "method", "--bootstrap", "20", "--out", str(out), "--json"]) == 0
    groups = {g["label"]: g for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups["ar"]["file"] is None and groups["goose"]["file"] == str(out / "topology-goose.json")
    assert groups["goose"]["recommended"]["file"] == groups["goose"]["file"]  # as the pooled recommended has it
    assert not (out / "topology-ar.json").exists()


def test_degenerate_rates_are_named_in_the_summary(tmp_path, capsys):
    # traces without a spine: p_s unknown, the recommendation assumes none (said, not silent)
    flat = Topology.from_nodes([(-1, "root", 0), (0, "transition", 0), (0, "transition", 1), (1, "transition", 0)])
    write_synthetic(tmp_path / "flat.parquet", [SyntheticSpec(0.6, 0.1, (flat,), prompts=12, cycles=20)], seed=3)
    assert main([str(tmp_path / "flat.parquet")]) == 0
    out = capsys.readouterr().out
    assert "p_s/p_t = nan" in out and "no spine node was reached in all" in out
    # p_t exactly 0 under p_s > 0: the ratio is unbounded, not undefined
    write_synthetic(tmp_path / "sure.parquet", [SyntheticSpec(1.0, 0.0, (TREE,), prompts=12, cycles=20)], seed=3)
    assert main([str(tmp_path / "sure.parquet")]) == 0
    out = capsys.readouterr().out
    assert "p_s/p_t = inf" in out and "no spine node" not in out and "no transition node" not in out
    # a spine alone (pld): p_t unknown, said too
    chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
    write_synthetic(tmp_path / "chain.parquet", [SyntheticSpec(0.6, 0.1, (chain,), prompts=12, cycles=20)], seed=3)
    assert main([str(tmp_path / "chain.parquet")]) == 0
    assert "no transition node was reached in all: p_t is unknown there" in capsys.readouterr().out


def test_out_names_an_earlier_runs_files_it_left(good, tmp_path, capsys):
    # a plain run into a folder of an earlier --regimes run left its regime file there, unmentioned
    out = tmp_path / "fit"
    out.mkdir()
    (out / "topology-gone-regimes.json").write_text("{}")
    assert main([str(good), "--out", str(out), "--bootstrap", "50"]) == 0
    err = capsys.readouterr().err
    assert f"note: {out} also holds files this run did not write (an earlier run's): topology-gone-regimes.json" in err
    (out / "topology-gone-regimes.json").unlink()
    assert main([str(good), "--out", str(out), "--bootstrap", "50"]) == 0  # its own files from last time: replaced
    assert "also holds" not in capsys.readouterr().err
