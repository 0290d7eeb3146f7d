"""The files of a fit-acceptance report: each group's ``goose-topology/1`` file (or its two-regime
exports), the charts as HTML and ``report.md`` (rendered by :mod:`goose_runtime.fit_report`).

The files are written as one set (temp files, renamed into place only once all are written);
callers validate all input first (:func:`check_outputs`), so bad input never leaves a half-written
report.
"""
from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from typing import Any, Callable

from goose_theory.cli_util import to_jsonable
from goose_theory.errors import OutputPathError
from goose_theory.fileio import output_file_problem, write_files_together, write_text
from goose_theory.fitanalysis import Analysis, GroupAnalysis
from goose_theory.regimefile import regime_pair_path, with_fit_provenance
from goose_theory.topology import Topology, json_text

from .fit_report import CHART_NAMES, chart_frames, chart_writer, has_interval, render_markdown, tau_text

# what a regime export's intervals hold and leave out (goose_theory.regimeinterval's docstring)
REGIME_INTERVAL_NOTE = ("95% intervals: the fitted prompts resampled, the two-regime fit redone on each draw, "
                        "the exported trees kept; sampling error only (the trees were chosen on the same data)")


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
            ci = g.recommendation.rows[0].get("predicted_ci95")  # the one-regime prediction's; a regime export brings its own
            interval = {"predicted_ci95": ci} if has_interval(ci) else {}  # 1 prompt: NaN, left out
            writers[path] = _topology_writer(g.recommendation.best.topology.with_meta(
                provenance=_provenance(analysis, g), **interval))
            continue
        single, pair = with_fit_provenance(*regimes[g.label][:2], _provenance(analysis, g))
        pair_path = regime_pair_path(path)
        writers[path], writers[pair_path] = _topology_writer(single), _topology_writer(pair)
        exports.append(regime_export(g.label, single, pair, path, pair_path))
    chart_files = []
    for name, frame in chart_frames(analysis).items():
        if not frame.empty:
            chart_files.append(os.path.join(out_dir, f"{name}.html"))
            writers[chart_files[-1]] = chart_writer(name, frame)
    recommended = ReportFiles(topologies, exports).recommended
    report = render_markdown(analysis, recommended, chart_files) + regime_section(analysis, exports)
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
            **{key: {"file": path, "rule": t.meta.get("rule"), "predicted_tau": t.meta.get("predicted_tau"),
                     "predicted_ci95": t.meta.get("predicted_ci95")}  # None without bootstrap draws
               for key, path, t in (("single", single_path, single), ("regime_file", pair_path, pair))}}


def export_line(e: dict[str, Any]) -> str:
    """One group's two regime exports (:func:`regime_export`), on one line."""
    one, pair = e["single"], e["regime_file"]
    return (f"{e['group']} at budget {e['budget']}: one tree, predicted tau "
            f"{tau_text(one['predicted_tau'], one.get('predicted_ci95'))} -> {one['file']}; regime file, predicted tau "
            f"{tau_text(pair['predicted_tau'], pair.get('predicted_ci95'))} -> {pair['file']}")


def regime_section(analysis: Analysis, exports: list[dict[str, Any]]) -> str:
    """The report's section on the groups whose files hold two-regime exports ('' without any)."""
    if not exports:
        return ""
    section = ["## Exported topologies (two-regime fit, `docs/two-regime.md`)", "",
               "The recommendation above treats cycles with and without a match as one regime (a(d) folded into "
               "p_s). These exports fit "
               "the cycles with and without a match apart; theirs are the predictions to hold against measured tau."
               + (" With a latency profile each file's budget is where its own predicted tau per cycle second "
                  "peaks (`goose_theory/regimebudget.py`), which may differ from the budget above."
                  if any(g.recommendation and g.recommendation.cost_table for g in analysis.groups) else ""), "",
               *([REGIME_INTERVAL_NOTE, ""] if any(has_interval(e["regime_file"].get("predicted_ci95")) for e in exports)
                 else []),
               *[f"- {export_line(e)}" for e in exports], ""]
    return "\n" + "\n".join(section)
