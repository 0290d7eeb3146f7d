"""Render a fit-acceptance :class:`~goose_theory.fitanalysis.Analysis`: a readable summary, a
markdown report, altair charts as HTML and the recommended ``goose-topology/1`` files.

The files are written as one set (temp files, renamed into place only once all are written);
callers validate all input first, so bad input never leaves a half-written report.
"""
from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

from goose_theory.cli_util import format_table, to_jsonable
from goose_theory.errors import OutputPathError
from goose_theory.fileio import output_file_problem, write_files_together, write_text
from goose_theory.fitanalysis import Analysis, GroupAnalysis
from goose_theory.regimefile import regime_pair_path, with_fit_provenance
from goose_theory.topology import Topology, json_text


FEW_PROMPTS = 10


def _ci(ci: tuple[float, float] | list[float], digits: int = 3) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def group_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """One summary row per group (used by the text summary and the report)."""
    rows = []
    for g in analysis.groups:
        f = g.fit
        rows.append({"group": g.label, "prompts": f.prompts, "cycles": f.cycles,
                     "p_s": f.p_s.estimate, "p_s ci95": _ci(f.p_s.ci95), "p_t": f.p_t.estimate,
                     "p_t ci95": _ci(f.p_t.ci95, 4), "ratio": f.ratio.estimate,
                     "tau": f.observed_tau.estimate, "tau ci95": _ci(f.observed_tau.ci95),
                     "predicted": g.gof.predicted, "bound": g.bound.lower_bound,
                     "violated": "YES" if g.bound.violated else "no"})
    return rows


def chart_frames(analysis: Analysis) -> dict[str, pd.DataFrame]:
    """Tidy frames behind the charts (one row per group and bin)."""
    def curves(attr: str) -> pd.DataFrame:
        parts = [getattr(g.fit, attr).reset_index().assign(group=g.label) for g in analysis.groups]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    bound = pd.DataFrame([{"group": g.label, "observed_tau": g.bound.observed_tau, "lo": g.bound.ci95[0],
                           "hi": g.bound.ci95[1], "lower_bound": g.bound.lower_bound,
                           "violated": g.bound.violated} for g in analysis.groups])
    calib = pd.concat([g.calibration for g in analysis.groups], ignore_index=True)
    parents = [p.by_rank.reset_index().assign(group=f"{g.label} / {p.source}")
               for g in analysis.groups for p in g.fit.p_t_by_parent if len(p.by_rank)]
    return {"p_s_by_depth": curves("spine_by_depth"), "p_t_by_rank": curves("transition_by_rank"),
            "p_t_by_parent": pd.concat(parents, ignore_index=True) if parents else pd.DataFrame(),
            "p_t_by_depth": curves("transition_by_depth"), "predicted_vs_observed": calib, "bound_check": bound}


CHART_NAMES = ("p_s_by_depth", "p_t_by_rank", "p_t_by_parent", "p_t_by_depth", "predicted_vs_observed", "bound_check")


def _chart_writer(name: str, frame: pd.DataFrame) -> Callable[[str], None]:
    """Writes report chart ``name`` (one of :data:`CHART_NAMES`, drawn by ``charts.<name>_chart``)
    of ``frame`` as HTML to the path it is given. The charts module is imported here, not at the
    top: altair costs 0.3-0.5 s to import (bench/bench_fit_cli.py), and only a run with ``--out`` draws charts."""
    from . import charts

    return functools.partial(charts.write_html, getattr(charts, f"{name}_chart")(frame))


def summary_text(analysis: Analysis, files: dict[str, str] | None = None) -> str:
    """The readable (non-JSON) summary printed by the CLI."""
    o = analysis.overall.fit
    lines = [f"{o.prompts} prompts, {o.cycles} cycles from {len(analysis.fit.counts.files)} file(s); "
             f"95% intervals: cluster bootstrap over prompts ({analysis.fit.n_boot} draws, seed {analysis.fit.seed})",
             f"p_s = {o.p_s.estimate:.4f} {_ci(o.p_s.ci95, 4)}  naive {_ci(o.p_s.naive_ci95, 4)}  n = {o.p_s.n}",
             f"p_t = {o.p_t.estimate:.4f} {_ci(o.p_t.ci95, 4)}  naive {_ci(o.p_t.naive_ci95, 4)}  n = {o.p_t.n}",
             f"p_s/p_t = {o.ratio.estimate:.2f} {_ci(o.ratio.ci95, 2)}",
             *_parent_lines(analysis), "",
             format_table(group_rows(analysis)), ""]
    few = [f"{g.label} ({g.fit.prompts})" for g in analysis.groups if 0 < g.fit.prompts < FEW_PROMPTS]
    if few:
        lines.append(f"note: fewer than {FEW_PROMPTS} prompts in {', '.join(few)}: a cluster bootstrap over so few "
                     f"prompts understates the uncertainty; record more prompts before trusting these intervals")
    off = [f"{g.label} ({g.gof.skipped_cycles} of {g.fit.cycles})" for g in analysis.groups if g.gof.skipped_cycles]
    if off:  # no recorder of this toolkit writes such trees: another writer's traces
        lines.append(f"note: cycles whose tree breaks the topology contract (e.g. two spine children of one node) in "
                     f"{', '.join(off)}: p_s and p_t count them, the goodness of fit and the bound leave them out")
    blind = [g.label for g in analysis.groups if g.recommendation is not None and g.fit.p_s.n == 0]
    if blind:  # the optimiser needs a number; 0 drafts no spine, the only choice the data supports
        lines.append(f"note: no spine node was reached in {', '.join(blind)}: p_s is unknown there, and its "
                     f"recommendation assumes 0 (no spine)")
    for b in analysis.violations:
        lines.append(f"BOUND VIOLATED in group {b.label}: bound {b.lower_bound:.3f} > observed tau "
                     f"{b.observed_tau:.3f} {_ci(b.ci95)}")
    for g in analysis.groups:
        rec = g.recommendation
        if rec is None:
            continue
        where = f" -> {files[g.label]}" if files and g.label in files else ""
        lines.append(f"recommended for {g.label}: {rec.best.rule} at budget {rec.budget} ({rec.budget_source}), "
                     f"predicted tau {rec.best.predicted_tau:.3f}{where}")
    rec = analysis.overall.recommendation
    if rec is not None:
        lines += ["", f"rules compared at budget {rec.budget} under the fit of all traces pooled:",
                  format_table(rec.rows, ["rule", "budget", "predicted_tau", "spine_length", "gain_vs_paper"])]
    return "\n".join(lines)


def _parent_lines(analysis: Analysis) -> list[str]:
    """p_t by the parent's source, per group, and whether the fit uses it."""
    lines = []
    for g in analysis.groups:
        parts = [f"{p.source} {p.p_t.estimate:.4f} {_ci(p.p_t.ci95, 4)} n={p.p_t.n}"
                 for p in g.fit.p_t_by_parent if p.p_t.n]
        if not parts:
            continue
        test = g.checks.parent
        verdict = "" if test is None else (f"; LRT {test.lr:.1f} on {test.df} df, p = {test.p_value:.3g} -> "
                                           + ("by parent" if test.supported else "pooled"))
        lines.append(f"p_t by parent [{g.label}]: " + ", ".join(parts) + verdict)
    return lines


def _group_section(g: GroupAnalysis) -> list[str]:
    c = g.checks
    out = [f"### {g.label}", "",
           f"- p_s by spine depth: LRT {c.spine_depth.lr:.1f} on {c.spine_depth.df} df, p = {c.spine_depth.p_value:.3g}; "
           f"AIC constant {c.spine_depth.aic_constant:.1f} vs curve {c.spine_depth.aic_curve:.1f} -> "
           f"{'depth-dependent' if c.spine_depth.supported else 'constant'}",
           f"- p_t by rank: LRT {c.transition_rank.lr:.1f} on {c.transition_rank.df} df, p = {c.transition_rank.p_value:.3g}; "
           f"-> {'rank-dependent' if c.transition_rank.supported else 'constant'}",
           *([f"- p_t by parent source: LRT {c.parent.lr:.1f} on {c.parent.df} df, p = {c.parent.p_value:.3g}; "
              f"AIC pooled {c.parent.aic_pooled:.1f} vs by parent {c.parent.aic_by_parent:.1f} -> "
              f"{'by parent (p_t under root, p_t_spine, p_t_chain)' if c.parent.supported else 'pooled'}"]
             if c.parent is not None else []),
           f"- over-dispersion across prompts: p_s rho = {c.spine_dispersion.rho:.3g} (p = {c.spine_dispersion.p_value:.3g}), "
           f"p_t rho = {c.transition_dispersion.rho:.3g} (p = {c.transition_dispersion.p_value:.3g})",
           "- spine offers (spine_avail): " + (
               f"a(1) = {c.availability[0]:.3f}, a(2..5) = {', '.join(f'{a:.2f}' for a in c.availability[1:5])}; "
               "the recommendation scales p_s(d) by a(d)" if c.availability else
               "not recorded; the recommendation assumes a spine token is always offered"),
           f"- goodness of fit ({g.gof.model} model): observed tau {g.gof.observed:.3f} {_ci(g.gof.observed_ci95)}, "
           f"predicted {g.gof.predicted:.3f} (scalar model {g.gof.predicted_scalar:.3f}), "
           f"relative error {g.gof.relative_error:+.1%}, naive z {g.gof.z:.2f}",
           f"- paper's bound at fitted p_s, p_t: {g.bound.lower_bound:.3f} (model E[tau] {g.bound.exact:.3f}) vs "
           f"observed {g.bound.observed_tau:.3f} {_ci(g.bound.ci95)} -> "
           f"{'**VIOLATED**' if g.bound.violated else 'holds'}", ""]
    if g.recommendation is not None:
        out += [f"Recommendation (budget {g.recommendation.budget}, {g.recommendation.budget_source}):", "",
                _md_table(pd.DataFrame(g.recommendation.rows)), ""]
    frames = [("p_s by spine depth", g.fit.spine_by_depth), ("p_t by rank", g.fit.transition_by_rank),
              *((f"p_t by rank under a {p.source} parent", p.by_rank) for p in g.fit.p_t_by_parent)]
    for title, frame in frames:
        out += [f"{title}:", "", _md_table(frame.reset_index()), ""]
    return out


def _md_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(no data)"
    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def render_markdown(analysis: Analysis, files: dict[str, str], chart_files: list[str]) -> str:
    """The report: estimates, per-group checks, bound check, recommendations, chart links."""
    lines = ["# fit-acceptance report", "", "Traces:", "", *[f"- `{f}`" for f in analysis.fit.counts.files], "",
             "Estimates use reached nodes (parent accepted). 95% intervals: cluster bootstrap over prompts "
             "(benchmark, prompt_id), one unit however many runs decoded it; the naive Wilson interval "
             "treats nodes as independent.", "",
             "```", summary_text(analysis, files), "```", "", "## Groups", ""]
    for g in analysis.groups:
        lines += _group_section(g)
    lines += ["## Charts", "", *[f"- [{os.path.basename(c)}]({os.path.basename(c)})" for c in chart_files], ""]
    return "\n".join(lines)


def _provenance(analysis: Analysis, g: GroupAnalysis) -> dict[str, Any]:
    f = g.fit
    return to_jsonable({"tool": "fit-acceptance", "traces": [os.path.abspath(p) for p in analysis.fit.counts.files],
            "group": g.label, "group_key": f.key, "cycles": f.cycles, "prompts": f.prompts,
            "fitted": {"p_s": f.p_s.to_dict(), "p_t": f.p_t.to_dict(), "ratio": f.ratio.to_dict(),
                       "selected": g.checks.selected.to_dict()},
            "bootstrap": analysis.fit.n_boot, "seed": analysis.fit.seed,
            "budget_source": g.recommendation.budget_source if g.recommendation else None})  # NaN -> null


def check_outputs(analysis: Analysis, out_dir: str | os.PathLike, *, siblings: tuple[str, ...] = ()) -> None:
    """Refuse, before anything is written, a file :func:`write_report` would write that cannot be
    (a folder or a device where a file goes): else the report would stop half written. Also checks
    each topology file's ``siblings`` (suffixes such as ``-regimes``, the regime files written beside
    it). Raises :class:`OutputPathError` naming the file."""
    out_dir = os.fspath(out_dir)
    stems = list(topology_stems(analysis).values())
    names = [f"{stem}{suffix}.json" for stem in stems for suffix in ("", *siblings)]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice:  # a group labelled "X-regimes" beside a group X: one file would replace the other
        raise OutputPathError(f"two groups would both write {os.path.join(out_dir, twice)}; rename a prompt set or method")
    names += [f"{name}.html" for name, frame in chart_frames(analysis).items() if not frame.empty]
    for path in [os.path.join(out_dir, n) for n in (*names, "report.md")]:
        problem = output_file_problem(path)
        if problem:
            raise OutputPathError(f"output file {path} {problem}")


def topology_stems(analysis: Analysis) -> dict[str, str]:
    """Group label -> the file stem of its topology, for the groups with a recommendation (the
    overall one only where no group has its label). Labels are cut to file-name characters, so
    two ("a b", "a_b") may meet: the later one gets its label's short hash, not the other's file.

    Example: sets "a b" and "a_b" -> ``topology-a_b.json`` and ``topology-a_b-<8 hex>.json``.
    """
    stems: dict[str, str] = {}
    for g in (*analysis.groups, analysis.overall):
        if g.recommendation is None or g.label in stems:
            continue
        stem = g.file_stem
        if stem in stems.values():
            stem += "-" + hashlib.sha1(g.label.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        stems[g.label] = stem
    return stems


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote: each group's topology file (label -> path) and, for the
    groups given two-regime exports, what their two files hold (:func:`regime_export`)."""
    topologies: dict[str, str]
    exports: list[dict[str, Any]]
    paths: tuple[str, ...] = ()  # every file written: topologies, regime files, charts, report.md

    @property
    def recommended(self) -> dict[str, str]:
        """The topology files that hold the recommended tree (not a two-regime export)."""
        exported = {e["group"] for e in self.exports}
        return {k: v for k, v in self.topologies.items() if k not in exported}


def write_report(analysis: Analysis, out_dir: str | os.PathLike, *,
                 regimes: dict[str, tuple] | None = None) -> ReportFiles:
    """Write topology-<group>.json, the HTML charts and report.md into ``out_dir`` as one set
    (:func:`~goose_theory.fileio.write_files_together`: a failure part-way replaces none of them).
    ``regimes``: group label -> the two-regime export (single, pair, ...) of ``fit-acceptance
    --regimes`` and ``goose loop``; such a group's file holds ``single`` instead of the recommended
    tree, its regime file (``pair``) goes beside it, and the report names both in a section of its
    own. Callers check the paths first (:func:`check_outputs`)."""
    out_dir, regimes = os.fspath(out_dir), regimes or {}
    writers, topologies, exports = {}, {}, []
    stems = topology_stems(analysis)
    for g in (*analysis.groups, analysis.overall):  # the overall file only where no group wrote its label
        if g.label not in stems or g.label in topologies:
            continue
        path = topologies[g.label] = os.path.join(out_dir, stems[g.label] + ".json")
        if g.label not in regimes:
            writers[path] = _topology_writer(g.recommendation.best.topology.with_meta(provenance=_provenance(analysis, g)))
            continue
        single, pair = with_fit_provenance(*regimes[g.label][:2], _provenance(analysis, g))
        pair_path = regime_pair_path(path)
        writers[path], writers[pair_path] = _topology_writer(single), _topology_writer(pair)
        exports.append(regime_export(g.label, single, pair, path, pair_path))
    chart_files = []
    for name, frame in chart_frames(analysis).items():
        if not frame.empty:
            chart_files.append(os.path.join(out_dir, f"{name}.html"))
            writers[chart_files[-1]] = _chart_writer(name, frame)
    recommended = ReportFiles(topologies, exports).recommended
    report = render_markdown(analysis, recommended, chart_files) + _regime_section(analysis, exports)
    writers[os.path.join(out_dir, "report.md")] = functools.partial(write_text, text=report)
    write_files_together(writers)
    return ReportFiles(topologies, exports, tuple(writers))


def stale_outputs(out_dir: str, written: ReportFiles) -> list[str]:
    """Topology files and charts in ``out_dir`` that this run did not write: an earlier run's (a
    ``--regimes`` file beside a plain run's tree, a group this fit no longer has), which a reader
    of the folder would take for this run's.

    Example:
        >>> import tempfile; d = tempfile.mkdtemp(); open(os.path.join(d, "topology-old.json"), "w").close()
        >>> stale_outputs(d, ReportFiles({}, [], (os.path.join(d, "report.md"),)))
        ['topology-old.json']
    """
    ours = {os.path.basename(p) for p in written.paths}
    names = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    return [n for n in names if n not in ours and (n.startswith("topology-") and n.endswith(".json")
                                                   or n in {f"{name}.html" for name in CHART_NAMES})]


def stale_note(out_dir: str, stale: list[str]) -> str:
    """The one line that names :func:`stale_outputs` (four names at most)."""
    more = f" and {len(stale) - 4} more" if len(stale) > 4 else ""
    return f"note: {out_dir} also holds files this run did not write (an earlier run's): {', '.join(stale[:4])}{more}"


def _topology_writer(topology: Topology) -> Callable[[str], None]:
    """A writer of ``topology``'s JSON to a given (temp) path, for :func:`write_files_together`."""
    return functools.partial(write_text, text=json_text(topology.to_dict()))


def regime_export(group: str, single, pair, single_path: str, pair_path: str) -> dict[str, Any]:
    """What a group's two regime exports hold (``fit-acceptance --regimes``, ``goose loop``): the
    trees as exported, and the files they were saved to."""
    return {"group": group, "budget": single.budget,
            **{key: {"file": path, "rule": t.meta.get("rule"), "predicted_tau": t.meta.get("predicted_tau")}
               for key, path, t in (("single", single_path, single), ("regime_file", pair_path, pair))}}


def export_line(e: dict[str, Any]) -> str:
    return (f"{e['group']} at budget {e['budget']}: one tree, predicted tau {e['single']['predicted_tau']:.3f} -> "
            f"{e['single']['file']}; regime file, predicted tau {e['regime_file']['predicted_tau']:.3f} -> "
            f"{e['regime_file']['file']}")


def _regime_section(analysis: Analysis, exports: list[dict[str, Any]]) -> str:
    """The report's section on the groups whose files hold two-regime exports ('' without any)."""
    if not exports:
        return ""
    section = ["## Exported topologies (two-regime fit, `docs/two-regime.md`)", "",
               "The recommendation above assumes the matcher offers a spine in every cycle. These exports fit "
               "the cycles with and without a match apart; theirs are the predictions to hold against measured tau."
               + (" With a latency profile each file's budget is where its own predicted tau per cycle second "
                  "peaks (`goose_theory/regimebudget.py`), which may differ from the budget above."
                  if any(g.recommendation and g.recommendation.cost_table for g in analysis.groups) else ""), "",
               *[f"- {export_line(e)}" for e in exports], ""]
    return "\n" + "\n".join(section)
