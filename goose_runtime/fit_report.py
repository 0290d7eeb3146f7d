"""Render a fit-acceptance :class:`~goose_theory.fitanalysis.Analysis`: a readable summary, a
markdown report and altair charts. :mod:`goose_runtime.fit_files` writes them, with the
recommended ``goose-topology/1`` files, as one set.
"""
from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable

import pandas as pd

from goose_theory.cli_util import format_table, latency_table_lines, unpriced_note
from goose_theory.fitanalysis import FEW_DRAWS, Analysis, GroupAnalysis


FEW_PROMPTS = 10


def _ci(ci: tuple[float, float] | list[float], digits: int = 3) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


# what the comparison's intervals hold, and what they leave out (fitinterval's module docstring)
INTERVAL_NOTE = ("95% intervals: the fit's prompts resampled, each tree priced under every draw, the gain paired; "
                 "sampling error only: the trees were chosen on the same data, and the one-regime model's own error "
                 "is not in them")
COMPARISON_COLUMNS = ("rule", "budget", "predicted_tau", "predicted ci95", "spine_length", "gain_vs_paper", "gain ci95")


def comparison_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recommendation's rows with their intervals as text (blank where none was computed).

    Example:
        >>> comparison_rows([{"rule": "paper", "predicted_tau": 2.0, "predicted_ci95": [1.9, 2.1],
        ...                   "gain_vs_paper_ci95": [0.0, 0.0]}])[0]["predicted ci95"]
        '[1.900, 2.100]'
    """
    def text(ci: Any, digits: int) -> str:
        return _ci(ci, digits) if has_interval(ci) else ""
    return [{**r, "predicted ci95": text(r.get("predicted_ci95"), 3), "gain ci95": text(r.get("gain_vs_paper_ci95"), 4)}
            for r in rows]


def has_interval(ci: Any) -> bool:
    """An interval was computed (None: not asked for; NaN: one prompt, nothing to resample)."""
    return ci is not None and all(math.isfinite(x) for x in ci)


def tau_text(tau: float, ci: Any = None) -> str:
    """A predicted tau, with its interval where one was computed (a regime export's ``predicted_ci95``).

    Example:
        >>> tau_text(2.0, [1.81, 2.254]), tau_text(2.0, None)
        ('2.000 [1.81, 2.25]', '2.000')
    """
    return f"{tau:.3f}" + (f" {_ci(ci, 2)}" if has_interval(ci) else "")


def _interval_text(row: dict[str, Any]) -> str:
    ci = row.get("predicted_ci95")
    return f" {_ci(ci)} (95%, the fit's prompts resampled)" if has_interval(ci) else ""


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


def chart_writer(name: str, frame: pd.DataFrame) -> Callable[[str], None]:
    """Writes report chart ``name`` (one of :data:`CHART_NAMES`, drawn by ``charts.<name>_chart``)
    of ``frame`` as HTML to the path it is given. The charts module is imported here, not at the
    top: altair costs 0.3-0.5 s to import (bench/bench_fit_cli.py), and only a run with ``--out`` draws charts."""
    from . import charts

    return functools.partial(charts.write_html, getattr(charts, f"{name}_chart")(frame))


def summary_text(analysis: Analysis, files: dict[str, str] | None = None) -> str:
    """The readable (non-JSON) summary printed by the CLI."""
    o = analysis.overall.fit
    lines = [f"{o.prompts} prompts, {o.cycles} cycles from {len(analysis.fit.counts.files)} file(s); "
             f"95% intervals: cluster bootstrap over prompts ({analysis.fit.n_boot} draws, seed {analysis.fit.seed})"
             + (f": too few draws for a 95% interval, use at least {FEW_DRAWS}" if analysis.fit.n_boot < FEW_DRAWS else ""),
             f"p_s = {o.p_s.estimate:.4f} {_ci(o.p_s.ci95, 4)}  naive {_ci(o.p_s.naive_ci95, 4)}  n = {o.p_s.n}",
             f"p_t = {o.p_t.estimate:.4f} {_ci(o.p_t.ci95, 4)}  naive {_ci(o.p_t.naive_ci95, 4)}  n = {o.p_t.n}",
             f"p_s/p_t = {o.ratio.estimate:.2f} {_ci(o.ratio.ci95, 2)}",
             *_parent_lines(analysis), "",
             format_table(group_rows(analysis)), "",
             *_data_notes(analysis)]
    for b in analysis.violations:
        lines.append(f"BOUND VIOLATED in group {b.label}: bound {b.lower_bound:.3f} > observed tau "
                     f"{b.observed_tau:.3f} {_ci(b.ci95)}")
    lines += _recommendation_lines(analysis, files)
    rec = analysis.overall.recommendation
    if rec is not None:
        lines += ["", f"rules compared at budget {rec.budget} under the fit of all traces pooled"
                  + (f" ({INTERVAL_NOTE})" if has_interval(rec.rows[0].get("predicted_ci95")) else "") + ":",
                  format_table(comparison_rows(rec.rows), list(COMPARISON_COLUMNS))]
        if rec.left_out:  # as goose compare says of --top-k
            lines.append(f"note: {', '.join(rec.left_out)} left out: K is above the {rec.top_k} ranks the traces record")
        if rec.cost_table:  # as goose optimize --latency prints it (practitioner review: the choice came unexplained)
            lines += ["", f"cost-aware scan of the pooled fit's {rec.best.rule} tree (--latency):",
                      *latency_table_lines(rec.cost_table, chosen=rec.budget)]
    return "\n".join(lines)


def _data_notes(analysis: Analysis) -> list[str]:
    """Notes on what the traces can and cannot support: few prompts, the bound's scalar model, trees off
    the topology contract, matches left unaccepted, rates never reached."""
    lines = []
    few = [f"{g.label} ({g.fit.prompts})" for g in analysis.groups if 0 < g.fit.prompts < FEW_PROMPTS]
    if few:
        lines.append(f"note: fewer than {FEW_PROMPTS} prompts in {', '.join(few)}: a cluster bootstrap over so few "
                     f"prompts understates the uncertainty; record more prompts before trusting these intervals")
    over = [g.label for g in analysis.groups if g.bound.lower_bound > g.gof.predicted + 1e-9]
    if over:  # pld on the shipped traces: bound 1.639 under the scalar model, predicted 1.575 by depth
        lines.append(f"note: bound above predicted in {', '.join(over)}: the bound takes the scalar model (one p_s, "
                     f"one p_t, as the paper states it), predicted the fitted model (by depth or rank where the "
                     f"checks select it); the two models differ there")
    off = [f"{g.label} ({g.gof.skipped_cycles} of {g.fit.cycles})" for g in analysis.groups if g.gof.skipped_cycles]
    if off:  # no recorder of this toolkit writes such trees: another writer's traces
        lines.append(f"note: cycles whose tree breaks the topology contract (e.g. two spine children of one node) in "
                     f"{', '.join(off)}: p_s and p_t count them, the goodness of fit and the bound leave them out")
    stray = analysis.unaccepted_matches
    if stray:  # greedy verification never leaves one; the bound check is what a verifier that stops early fails
        lines.append(f"note: reached nodes that matched but were not accepted in "
                     f"{', '.join(f'{label} ({n})' for label, n in stray.items())}: greedy verification accepts "
                     f"them; a verifier that stops early or a corrupt match column leaves them (p_s and p_t count "
                     f"them as matched)")
    # the optimiser needs a number where no node of a kind was reached (no spine: tr; no transition: pld);
    # 0 is the only choice the data supports
    for rate, kind, meaning in (("p_s", "spine", "no spine"), ("p_t", "transition", "its transition slots add nothing")):
        unknown = [g.label for g in analysis.groups if g.recommendation is not None and getattr(g.fit, rate).n == 0]
        if unknown:
            lines.append(f"note: no {kind} node was reached in {', '.join(unknown)}: {rate} is unknown there, and its "
                         f"recommendation assumes 0 ({meaning})")
    return lines


def _recommendation_lines(analysis: Analysis, files: dict[str, str] | None) -> list[str]:
    """One line per group's recommended tree (and the file it went to), and the groups without one."""
    lines = []
    pooled = analysis.overall
    # grouped, the pooled fit's file is written too (topology-all.json): name it, as every group's
    shown = [*analysis.groups, *(() if any(g is pooled for g in analysis.groups) else (pooled,) if files else ())]
    for g in shown:
        rec = g.recommendation
        if rec is None:
            continue
        where = f" -> {files[g.label]}" if files and g.label in files else ""
        lines.append(f"recommended for {g.label}{' (every trace pooled)' if g is pooled and len(shown) > 1 else ''}: "
                     f"{rec.best.rule} at budget {rec.budget} ({rec.budget_source}), "
                     f"predicted tau {rec.best.predicted_tau:.3f}{_interval_text(rec.rows[0])}{where}")
    if bare := [g.label for g in shown if g.recommendation is None]:  # ar groups: said, not silently skipped
        lines.append(f"note: no recommendation{' and no topology file' if files else ''} for {', '.join(bare)}: "
                     "the traces reach no drafted node there (roots only: ar runs?)")
    unpriced = next((g.recommendation.unpriced for g in analysis.groups
                     if g.recommendation is not None and g.recommendation.unpriced), None)
    if unpriced:  # one profile for every group
        lines.append(f"note: the latency profile {unpriced_note(*unpriced)}")
    return lines + _one_regime_note(pooled)


def _one_regime_note(pooled) -> list[str]:
    """Why the recommendation's predicted tau runs high where the matcher offers a spine in only some cycles
    (practitioner review, 6 Dec: 2.42 printed where goose@16 measured 1.97, with no word on it)."""
    avail = pooled.checks.availability
    if pooled.recommendation is None or not avail or not 0.0 < avail[0] < 1.0:  # a(1) = 0: no spine to fold in
        return []
    return [f"note: p_s is conditional on the matcher offering a spine token, which it did in a(1) = {avail[0]:.3f} of "
            "cycles; the recommendation folds a(d) into p_s as one regime, which on goose's traces predicted 22-70% "
            "above the tau the runtime then measured (docs/two-regime.md, section 1): --regimes fits matched and "
            "unmatched cycles apart, as goose loop does, and its predictions are the ones to hold against a measurement"]


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
        rec = g.recommendation
        table = pd.DataFrame(comparison_rows(rec.rows), columns=list(COMPARISON_COLUMNS))
        out += [f"Recommendation (budget {rec.budget}, {rec.budget_source}):", "", _md_table(table), "",
                *([f"{INTERVAL_NOTE[0].upper()}{INTERVAL_NOTE[1:]}.", ""] if has_interval(rec.rows[0].get("predicted_ci95")) else [])]
        if rec.left_out:
            out += [f"{', '.join(rec.left_out)} left out: K is above the {rec.top_k} ranks the traces record.", ""]
    else:
        out += ["No recommendation: the traces reach no drafted node in this group (roots only: ar runs?).", ""]
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

