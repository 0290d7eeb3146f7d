"""The fit-acceptance report on a small synthetic fit: the markdown has its sections, names the
trace files and flags the group whose bound fails (its files: tests/test_fit_files.py)."""
from __future__ import annotations

import os
import re

from goose_runtime.fit_report import group_rows, render_markdown, summary_text
from goose_theory.fit import fit_counts
from goose_theory.fitanalysis import analyze
from goose_theory.fitcounts import count_files
from goose_theory.synthetic import SyntheticSpec, write_synthetic
from tests.conftest import TREE, md_sections


def test_report_has_its_sections_and_names_every_trace_file(report_analysis):
    a, traces = report_analysis
    text = render_markdown(a, {}, [])
    assert text.startswith("# fit-acceptance report\n")
    sections = md_sections(text)
    assert list(sections) == ["", "Groups", "Charts"]
    listed = re.findall(r"^- `(.+)`$", sections[""], flags=re.M)
    assert listed == list(traces)
    # the text summary sits in a code block in the head, with the estimates
    head = sections[""]
    assert head.count("```") == 2 and "p_s = " in head and "p_t = " in head
    groups = re.findall(r"^### (.+)$", sections["Groups"], flags=re.M)
    assert groups == [g.label for g in a.groups] and set(groups) == {"goose", "broken"}


def test_a_group_of_roots_only_is_said_to_get_no_recommendation(tmp_path):
    # an ar group beside drafted ones: its row showed nan, and nothing said why it had no topology (walkthrough)
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_synthetic(tmp_path / "goose.parquet", [SyntheticSpec(0.7, 0.1, (TREE,), prompts=6, cycles=10)], seed=1)
    table = pq.read_table(tmp_path / "goose.parquet")
    frame: pd.DataFrame = table.to_pandas()
    roots = frame[frame["node"] == 0].assign(tau=1, method="ar", budget=0)
    pq.write_table(pa.Table.from_pandas(roots, schema=table.schema, preserve_index=False), tmp_path / "ar.parquet")
    counts = count_files([tmp_path / "goose.parquet", tmp_path / "ar.parquet"], group_by=("method",))
    a = analyze(fit_counts(counts, n_boot=20, seed=0))
    assert [g.recommendation is None for g in a.groups] == [True, False]  # ar, then the synthetic method
    assert ("note: no recommendation and no topology file for ar: the traces reach no drafted node there "
            "(roots only: ar runs?)") in summary_text(a, {"goose": "fit/topology-goose.json"})
    assert "note: no recommendation for ar:" in summary_text(a)
    assert "No recommendation: the traces reach no drafted node in this group" in render_markdown(a, {}, [])


def test_each_group_section_reports_its_checks_and_the_bound(report_analysis):
    a, _ = report_analysis
    groups = re.split(r"^### ", md_sections(render_markdown(a, {}, []))["Groups"], flags=re.M)[1:]
    by_label = {g.split("\n", 1)[0]: g for g in groups}
    for label, body in by_label.items():
        for needle in ("p_s by spine depth: LRT", "p_t by rank: LRT", "goodness of fit", "paper's bound",
                       "Recommendation (budget"):
            assert needle in body, (label, needle)
    assert "-> **VIOLATED**" in by_label["broken"] and "-> holds" in by_label["goose"]
    assert "**VIOLATED**" not in by_label["goose"]


def test_markdown_tables_are_well_formed(report_analysis):
    a, _ = report_analysis
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


def test_topology_files_and_charts_are_named(report_analysis):
    a, _ = report_analysis
    files = {"goose": "/x/topology-goose.json"}
    text = render_markdown(a, files, ["/x/out/p_s_by_depth.html", "/x/out/bound_check.html"])
    assert "recommended for goose:" in text and "-> /x/topology-goose.json" in text
    charts = md_sections(text)["Charts"]
    # links are relative to the report (it sits beside the charts)
    assert re.findall(r"^- \[(.+)\]\((.+)\)$", charts, flags=re.M) == [
        ("p_s_by_depth.html", "p_s_by_depth.html"), ("bound_check.html", "bound_check.html")]


def test_group_rows_mark_the_violated_bound(report_analysis):
    a, _ = report_analysis
    rows = {r["group"]: r for r in group_rows(a)}
    assert set(rows) == {"goose", "broken"}
    assert rows["broken"]["violated"] == "YES" and rows["goose"]["violated"] == "no"
    assert rows["broken"]["tau"] < rows["broken"]["bound"] and rows["goose"]["bound"] <= rows["goose"]["tau"]
    assert "BOUND VIOLATED in group broken" in summary_text(a)


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


def test_summary_says_when_the_bootstrap_has_too_few_draws(tmp_path):
    # 2 draws made "p_s = 0.9471 [0.9122, 0.9458]", labelled 95% and missing the estimate (walkthrough, 5 Dec)
    write_synthetic(tmp_path / "t.parquet", SyntheticSpec(0.6, 0.1, (TREE,), prompts=4, cycles=20), seed=5)
    counts = count_files([str(tmp_path / "t.parquet")])
    few, enough = (summary_text(analyze(fit_counts(counts, n_boot=n, seed=0))) for n in (2, 200))
    assert "(2 draws, seed 0): too few draws for a 95% interval, use at least 200" in few
    assert "too few draws" not in enough
    flags = [analyze(fit_counts(counts, n_boot=n, seed=0)).to_json()["bootstrap_too_few"] for n in (2, 200)]
    assert flags == [True, False]  # --json carries it too (walkthrough)


def test_summary_says_which_given_budgets_the_latency_profile_could_not_price(tmp_path):
    # fit-acceptance --budget 200 with a profile measured up to 64 tokens chose among 0..63 unremarked
    # (goose optimize --latency said so: walkthrough, 5 Dec)
    from goose_theory.latency import LatencyProfile
    write_synthetic(tmp_path / "t.parquet", SyntheticSpec(0.6, 0.1, (TREE,), prompts=4, cycles=20), seed=5)
    fit = fit_counts(count_files([str(tmp_path / "t.parquet")]), n_boot=50, seed=0)
    profile = LatencyProfile(sizes=(1, 8), seconds=(0.02, 0.03))
    text = {b: summary_text(analyze(fit, budget=b, latency=profile)) for b in (7, 8, 30)}
    assert "not priced" not in text[7]
    assert "note: the latency profile measures trees of at most 8 tokens, so budget 8 was not priced" in text[8]
    assert "so budgets 8..30 were not priced" in text[30]
    # the recorded budget (no --budget) too: a profile of one token chose budget 0 unremarked (walkthrough)
    one = summary_text(analyze(fit, latency=LatencyProfile(sizes=(1,), seconds=(0.02,))))
    assert f"measures trees of at most 1 token, so budgets 1..{fit.overall.budget} were not priced" in one


def test_summary_names_groups_with_matched_nodes_left_unaccepted(report_analysis):
    # greedy verification accepts a reached node that matches; the planted violation (a walk that
    # stops at depth 1) leaves such nodes, and 64 corrupt bytes in a match column left 216, unremarked
    # (walkthrough, 5 Dec)
    import pandas as pd
    a, traces = report_analysis
    stray = a.unaccepted_matches
    rows = pd.read_parquet(traces[1])  # the broken group's file; counted here from the rows themselves
    rows["cycle_key"] = rows["prompt_id"] + "/" + rows["cycle"].astype(str)
    accepted = rows.set_index(["cycle_key", "node"])["accepted"]
    parent_accepted = accepted.reindex(list(zip(rows["cycle_key"], rows["parent"]))).to_numpy()
    expected = int((rows["match"] & (rows["parent"] >= 0) & (parent_accepted == True) & ~rows["accepted"]).sum())  # noqa: E712
    assert stray == {"broken": expected} and expected > 0
    assert f"note: reached nodes that matched but were not accepted in broken ({stray['broken']}):" in summary_text(a)
    assert a.to_json()["unaccepted_matches"] == stray


def test_summary_explains_a_bound_above_the_prediction():
    # pld's row read "predicted 1.575, bound 1.639" with nothing saying the two use different models (walkthrough)
    import os
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "stdlib.parquet")
    a = analyze(fit_counts(count_files([traces], group_by=["method"]), n_boot=50, seed=0))
    over = [g.label for g in a.groups if g.bound.lower_bound > g.gof.predicted]
    assert over  # a real case from the shipped traces
    text = summary_text(a)
    assert f"note: bound above predicted in {', '.join(over)}: the bound takes the scalar model" in text
    clean = analyze(fit_counts(count_files([traces]), n_boot=50, seed=0))
    assert clean.overall.bound.lower_bound <= clean.overall.gof.predicted and "bound above" not in summary_text(clean)


def test_summary_and_report_name_the_rules_too_wide_for_the_traces():
    # the traces hold 4 adjacency ranks: isotropic:5 fell out of the comparison silently (walkthrough)
    import os
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "stdlib-b8.parquet")
    four = analyze(fit_counts(count_files([traces]), n_boot=50, seed=0))
    assert "note: isotropic:5 left out: K is above the 4 ranks the traces record" in summary_text(four)
    assert "isotropic:5 left out: K is above the 4 ranks" in render_markdown(four, {}, [])


def test_summary_names_the_pooled_file_beside_the_groups(capsys, tmp_path):
    # grouped, --out writes topology-all.json too, and the summary named only the groups' files
    from goose_runtime.fit_cli import main
    shipped = os.path.join(os.path.dirname(__file__), os.pardir, "traces")
    traces = [os.path.join(shipped, f"{b}-b8.parquet") for b in ("mtbench", "stdlib")]
    assert main([*traces, "--group-by", "benchmark", "--out", str(tmp_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("recommended for")]
    assert [line.split(":")[0] for line in lines] == ["recommended for mtbench", "recommended for stdlib",
                                                      "recommended for all (every trace pooled)"]
    assert lines[-1].endswith(f"-> {tmp_path / 'topology-all.json'}")


def test_summary_says_the_recommendation_is_one_regime_where_a_spine_is_offered_in_some_cycles(report_analysis):
    # practitioner review, 6 Dec: "predicted tau 2.420" with no word that --regimes (1.9-2.0) is the one to trust
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "stdlib-b8.parquet")
    real = analyze(fit_counts(count_files([traces]), n_boot=50, seed=0))
    a1 = real.overall.checks.availability[0]
    assert 0 < a1 < 1
    assert f"note: p_s is conditional on the matcher offering a spine token, which it did in a(1) = {a1:.3f}" \
        in summary_text(real)
    synthetic, _ = report_analysis  # a spine offered in every cycle: nothing to say
    assert synthetic.overall.checks.availability[0] == 1.0 and "one regime" not in summary_text(synthetic)


def test_summary_prints_the_cost_aware_scan_behind_a_latency_choice():
    # practitioner review, 6 Dec: "optimal at budget 15 (cost-aware)" with no tokens/s behind it
    from goose_theory.cli_util import load_latency_option
    traces = os.path.join(os.path.dirname(__file__), os.pardir, "traces", "stdlib-b8.parquet")
    latency = load_latency_option(os.path.join(os.path.dirname(__file__), os.pardir, "app", "latency",
                                               "cpu-amd-epyc-2threads-fp32_2026-12-02.json"))
    priced = analyze(fit_counts(count_files([traces]), n_boot=50, seed=0), latency=latency)
    rec = priced.overall.recommendation
    text = summary_text(priced)
    assert "cost-aware scan of the pooled fit's optimal tree (--latency):" in text
    chosen = next(line for line in text.splitlines() if line.rstrip().endswith("*"))
    assert chosen.split()[0] == str(rec.budget) and "speedup_vs_ar" in text
    assert "cost-aware scan" not in summary_text(analyze(fit_counts(count_files([traces]), n_boot=50, seed=0)))
