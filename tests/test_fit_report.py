"""The fit-acceptance report on a small synthetic fit: the markdown has its sections, names the
trace files, flags the group whose bound fails, and write_report links only charts it wrote."""
from __future__ import annotations

import os
import re

import pytest

from goose_runtime import charts
from goose_runtime.fit_report import (CHART_NAMES, chart_frames, group_rows, render_markdown, summary_text,
                                       topology_stems, write_report)
from goose_theory.errors import OutputPathError
from goose_theory.fit import fit_counts
from goose_theory.fitanalysis import analyze
from goose_theory.fitcounts import count_files
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from tests.conftest import TREE


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    """Two trace files, one group each: ``goose`` drawn from the model, ``broken`` with nothing
    accepted past depth 1, so its observed tau falls below the paper's bound."""
    d = tmp_path_factory.mktemp("report")
    good, broken = d / "good.parquet", d / "broken.parquet"
    write_synthetic(good, SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=12, cycles=40, method="goose"), seed=11)
    write_synthetic(broken, SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=12, cycles=40, method="broken",
                                          run_id="r2", max_accepted_depth=1), seed=12)
    counts = count_files([good, broken], group_by=["method"])
    return analyze(fit_counts(counts, n_boot=100, seed=0)), (str(good), str(broken))


def _sections(text: str) -> dict[str, str]:
    """``## `` sections of the report by title (the part before the first one under "")."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2]))}


def test_report_has_its_sections_and_names_every_trace_file(analysis):
    a, traces = analysis
    text = render_markdown(a, {}, [])
    assert text.startswith("# fit-acceptance report\n")
    sections = _sections(text)
    assert list(sections) == ["", "Groups", "Charts"]
    listed = re.findall(r"^- `(.+)`$", sections[""], flags=re.M)
    assert listed == list(traces)
    # the text summary sits in a code block in the head, with the estimates
    head = sections[""]
    assert head.count("```") == 2 and "p_s = " in head and "p_t = " in head
    groups = re.findall(r"^### (.+)$", sections["Groups"], flags=re.M)
    assert groups == [g.label for g in a.groups] and set(groups) == {"goose", "broken"}


def test_each_group_section_reports_its_checks_and_the_bound(analysis):
    a, _ = analysis
    groups = re.split(r"^### ", _sections(render_markdown(a, {}, []))["Groups"], flags=re.M)[1:]
    by_label = {g.split("\n", 1)[0]: g for g in groups}
    for label, body in by_label.items():
        for needle in ("p_s by spine depth: LRT", "p_t by rank: LRT", "goodness of fit", "paper's bound",
                       "Recommendation (budget"):
            assert needle in body, (label, needle)
    assert "-> **VIOLATED**" in by_label["broken"] and "-> holds" in by_label["goose"]
    assert "**VIOLATED**" not in by_label["goose"]


def test_markdown_tables_are_well_formed(analysis):
    a, _ = analysis
    lines = render_markdown(a, {}, []).splitlines()
    tables, current = [], []
    for line in lines + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    assert len(tables) >= 2 * 3  # per group: a recommendation, p_s by depth, p_t by rank, ...
    for table in tables:
        width = table[0].count("|")
        assert re.fullmatch(r"\|(---\|)+", table[1]) and all(row.count("|") == width for row in table), table


def test_topology_files_and_charts_are_named(analysis):
    a, _ = analysis
    files = {"goose": "/x/topology-goose.json"}
    text = render_markdown(a, files, ["/x/out/p_s_by_depth.html", "/x/out/bound_check.html"])
    assert "recommended for goose:" in text and "-> /x/topology-goose.json" in text
    charts = _sections(text)["Charts"]
    # links are relative to the report (it sits beside the charts)
    assert re.findall(r"^- \[(.+)\]\((.+)\)$", charts, flags=re.M) == [
        ("p_s_by_depth.html", "p_s_by_depth.html"), ("bound_check.html", "bound_check.html")]


def test_group_rows_mark_the_violated_bound(analysis):
    a, _ = analysis
    rows = {r["group"]: r for r in group_rows(a)}
    assert set(rows) == {"goose", "broken"}
    assert rows["broken"]["violated"] == "YES" and rows["goose"]["violated"] == "no"
    assert rows["broken"]["tau"] < rows["broken"]["bound"] and rows["goose"]["bound"] <= rows["goose"]["tau"]
    assert "BOUND VIOLATED in group broken" in summary_text(a)


def test_write_report_links_exactly_the_charts_it_wrote(analysis, tmp_path):
    a, _ = analysis
    files = write_report(a, tmp_path).topologies
    names = sorted(os.listdir(tmp_path))
    assert not [n for n in names if n.startswith(".tmp")]
    assert set(files) >= {"goose", "broken"} and all(os.path.isfile(p) for p in files.values())
    report = (tmp_path / "report.md").read_text()
    linked = re.findall(r"^- \[(.+?)\]", _sections(report)["Charts"], flags=re.M)
    assert linked and sorted(linked) == sorted(n for n in names if n.endswith(".html"))
    # one chart per frame with data: a group with no rows leaves no empty chart behind
    assert set(linked) == {f"{name}.html" for name, frame in chart_frames(a).items() if not frame.empty}
    assert {"p_s_by_depth.html", "p_t_by_rank.html", "bound_check.html"} <= set(linked)
    assert tuple(chart_frames(a)) == CHART_NAMES  # the names a later run's stale check looks for
    for label, path in files.items():
        assert path.startswith(str(tmp_path)) and (label == a.overall.label or f"-> {path}" in report)


def test_write_report_replaces_no_file_when_one_fails_part_way(analysis, tmp_path, monkeypatch):
    # the report names the topology files and charts: a set half old, half new would mislead
    a, _ = analysis
    first = write_report(a, tmp_path).topologies
    for name in os.listdir(tmp_path):  # marked, so that a file rewritten with equal text shows too
        (tmp_path / name).write_bytes(b"old")
    before = {n: b"old" for n in os.listdir(tmp_path)}
    calls = []
    def fail_second(chart, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        chart.save(path, format="html")
    monkeypatch.setattr(charts, "write_html", fail_second)
    with pytest.raises(OutputPathError) as err:  # one line that names the file (the CLIs print it)
        write_report(a, tmp_path)
    assert len(calls) == 2 and first
    second = [f"{name}.html" for name, frame in chart_frames(a).items() if not frame.empty][1]
    assert str(err.value) == f"{os.path.join(tmp_path, second)}: cannot be written (disk full)"
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == before  # no temp file left either


def _analysis_of_methods(tmp_path, methods):
    """A fit grouped by method of one small synthetic trace per method name."""
    paths = []
    for i, method in enumerate(methods):
        paths.append(tmp_path / f"{i}.parquet")
        write_synthetic(paths[-1], SyntheticSpec(0.6, [0.1, 0.05], (TREE,), prompts=6, cycles=20, method=method,
                                                 run_id=f"r{i}"), seed=i)
    return analyze(fit_counts(count_files(paths, group_by=["method"]), n_boot=20, seed=0))


def test_groups_whose_labels_cut_to_one_file_name_get_a_file_each(tmp_path):
    # "a b" and "a_b" both became topology-a_b.json: the second overwrote the first's tree
    a = _analysis_of_methods(tmp_path, ("a b", "a_b"))
    stems = topology_stems(a)
    assert stems["a b"] != stems["a_b"] and len(set(stems.values())) == len(stems)
    files = write_report(a, tmp_path / "out").topologies
    assert len(set(files.values())) == len(files) and all(os.path.isfile(p) for p in files.values())
    names = sorted(os.path.basename(files[label]) for label in ("a b", "a_b"))
    assert names[1] == "topology-a_b.json" and re.fullmatch(r"topology-a_b-[0-9a-f]{8}\.json", names[0])


def test_a_sibling_file_one_group_would_share_with_another_is_refused(tmp_path):
    # a group "x-regimes" writes topology-x-regimes.json, which is group x's regime file
    from goose_runtime.fit_report import check_outputs
    a = _analysis_of_methods(tmp_path, ("x", "x-regimes"))
    check_outputs(a, tmp_path / "out")  # without the regime siblings, no two names meet
    with pytest.raises(OutputPathError, match="two groups would both write .*topology-x-regimes.json"):
        check_outputs(a, tmp_path / "out", siblings=("-regimes",))


def test_summary_notes_cycles_whose_tree_breaks_the_topology_contract(tmp_path):
    # another writer's trace: the root's transition child relabelled a spine node, so the root has two
    # spine children; the fit counts them, the exact prediction cannot (it said "predicted nan",
    # "bound nan -> holds" with no word why: review, 3 Dec)
    import numpy as np
    import pyarrow as pa
    from goose_theory.synthetic import synthetic_columns
    from goose_theory.topology import Topology
    from goose_theory.traceio import write_trace

    tree = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0), (0, "transition", 0)])
    cols = {k: (v.to_pylist() if isinstance(v, pa.Array) else v)
            for k, v in synthetic_columns(SyntheticSpec(0.6, 0.1, (tree,), prompts=4, cycles=20), seed=5).items()}
    node = np.asarray(cols["node"])
    cols["source"] = ["spine" if n == 3 else s for n, s in zip(node, cols["source"])]
    write_trace(tmp_path / "two_spines.parquet", cols)
    text = summary_text(analyze(fit_counts(count_files([str(tmp_path / "two_spines.parquet")]), n_boot=50, seed=0)))
    assert ("note: cycles whose tree breaks the topology contract (e.g. two spine children of one node) in all "
            "(80 of 80): p_s and p_t count them, the goodness of fit and the bound leave them out") in text
    write_synthetic(tmp_path / "clean.parquet", SyntheticSpec(0.6, 0.1, (tree,), prompts=4, cycles=20), seed=5)
    clean = summary_text(analyze(fit_counts(count_files([str(tmp_path / "clean.parquet")]), n_boot=50, seed=0)))
    assert "topology contract" not in clean
