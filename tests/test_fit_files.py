"""The fit-acceptance report's files: write_report links only the charts it wrote, replaces no file
when one fails part way, gives groups whose labels cut to one file name a file each, and
check_outputs refuses a sibling file two groups would share."""
from __future__ import annotations

import os
import re

import pytest

from goose_runtime import charts
from goose_runtime.fit_files import check_outputs, topology_stems, write_report
from goose_runtime.fit_report import CHART_NAMES, chart_frames
from goose_theory.errors import OutputPathError
from goose_theory.fit import fit_counts
from goose_theory.fitanalysis import analyze
from goose_theory.fitcounts import count_files
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from tests.conftest import TREE, md_sections


def test_write_report_links_exactly_the_charts_it_wrote(report_analysis, tmp_path):
    a, _ = report_analysis
    files = write_report(a, tmp_path).topologies
    names = sorted(os.listdir(tmp_path))
    assert not [n for n in names if n.startswith(".tmp")]
    assert set(files) >= {"goose", "broken"} and all(os.path.isfile(p) for p in files.values())
    report = (tmp_path / "report.md").read_text()
    linked = re.findall(r"^- \[(.+?)\]", md_sections(report)["Charts"], flags=re.M)
    assert linked and sorted(linked) == sorted(n for n in names if n.endswith(".html"))
    # one chart per frame with data: a group with no rows leaves no empty chart behind
    assert set(linked) == {f"{name}.html" for name, frame in chart_frames(a).items() if not frame.empty}
    assert {"p_s_by_depth.html", "p_t_by_rank.html", "bound_check.html"} <= set(linked)
    assert tuple(chart_frames(a)) == CHART_NAMES  # the names a later run's stale check looks for
    for label, path in files.items():
        assert path.startswith(str(tmp_path)) and (label == a.overall.label or f"-> {path}" in report)


def test_write_report_replaces_no_file_when_one_fails_part_way(report_analysis, tmp_path, monkeypatch):
    # the report names the topology files and charts: a set half old, half new would mislead
    a, _ = report_analysis
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
    a = _analysis_of_methods(tmp_path, ("x", "x-regimes"))
    check_outputs(a, tmp_path / "out")  # without the regime siblings, no two names meet
    with pytest.raises(OutputPathError, match="two groups would both write .*topology-x-regimes.json"):
        check_outputs(a, tmp_path / "out", siblings=("-regimes",))
