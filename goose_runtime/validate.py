"""Feeding optimised topologies back into the runtime: predicted against measured tau.

For each prompt set, on held-out prompts (those whose ids do not appear in the traces the
topology was fitted on, in the set's fixed order), one run decodes with ``ar``, the paper's
adaptive ``goose`` at the topology's budget (and at the paper's default budget 60), and
``topology:FILE`` (a two-regime file, one with ``regimes.unmatched``, drafts that tree in cycles
without a context match). With ``prior`` (``--prior``), goose and every topology draft with the
model's successor prior (:mod:`goose_runtime.prior`), for files fitted on traces recorded so, and
the paper's goose@60 runs as published too (neither predicted nor replayed). Each row reports:

* ``predicted_tau``: the topology's exported prediction (a priori; for ``goose loop``'s files the
  two-regime tau of :mod:`goose_theory.regime`), with ``predicted_low`` / ``predicted_high``, the
  file's 95% interval where it carries one (``predicted_ci95``: a bootstrap of its fit's prompts,
  :mod:`goose_theory.regimeinterval`, or fit-acceptance's :mod:`goose_theory.fitinterval`);
* ``realised_tau``: mean exact E[tau] of the trees the runtime actually built, same model
  (see :mod:`goose_theory.validation`);
* ``measured_tau`` with a 95% interval over prompts (``goose_theory.validation.ratio_ci``: a t
  interval on the log of the ratio), tokens/s and speedup against the ``ar`` of the same run, and
  whether the tokens equal ``ar``'s (lossless);
* ``noise_pct``: the 95% half-width of the error an *exact* model would still show, fitted on the
  traces' prompts and measured on these few (``goose_theory.validation.split_noise``, from this
  run's spread between prompts, with Student's t for a spread estimated from so few): an
  ``error_pct`` inside it is what prompt sampling alone gives;
* for a topology, ``vs_goose_pct`` with a 95% interval: its measured tau against ``goose`` (with
  ``prior``, goose+prior) at the same budget on the same prompts (``validation.paired_ratio_ci``);
* ``accepted_tau``: tokens the verification *accepted* per call (bonus included), which is what
  the acceptance model predicts. ``measured_tau`` counts the tokens emitted, and a prompt's last
  cycle is cut at ``max_new_tokens`` (or EOS): on long code matches that cut costs a few percent
  of tau (4.4% on ``stdlib-wide``, ``docs/two-regime.md`` section 10). ``accepted_error_pct`` is the
  prediction's error against it; ``error_pct`` stays the issue's, against ``measured_tau``;
* for a topology with a regime fit whose traces are at hand (and for goose, with such a file's
  fit, one with a confident regime first), ``replayed_tau``: the trace replay
  (:mod:`goose_runtime.replayfit`: the file's own drafting re-run on the *fitted* prompts' texts,
  the spine exact, transitions drawn from the fit with its text cue, the same token cap) and
  ``replayed_error_pct`` against ``measured_tau``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from goose_theory.acceptance import Acceptance
from goose_theory.topology import Topology, load_topology
from goose_theory.validation import paired_ratio_ci, prompt_spread, ratio_ci, realised_prediction, split_noise

from .prompts import Prompt, set_name
from .records import PromptResult
from .validate_inputs import fitted_set

PAPER_BUDGET = 60


@dataclass(frozen=True)
class ValidationRow:
    """One method on one prompt set's held-out prompts: predicted against measured tau (fields as
    in the module docstring; ``error_pct`` is of the measured tau, ``vs_goose_*`` of goose's;
    NaN where they do not apply)."""

    benchmark: str
    method: str
    budget: int
    predicted_tau: float
    realised_tau: float
    measured_tau: float
    ci_low: float
    ci_high: float
    error_pct: float       # (predicted - measured) / measured, percent
    tokens_per_s: float
    speedup_vs_ar: float
    lossless: bool
    prompts: int
    cycles: int
    psi: float = float("nan")            # measured share of tokens from cycles with a context match
    tau_matched: float = float("nan")    # measured tau of cycles with / without a context match
    tau_unmatched: float = float("nan")
    noise_pct: float = float("nan")      # 95% half-width of an exact model's error from prompt sampling
    vs_goose_pct: float = float("nan")   # topology rows: tau / goose's at the same budget - 1, same prompts
    vs_goose_low: float = float("nan")
    vs_goose_high: float = float("nan")
    accepted_tau: float = float("nan")        # accepted (not emitted) tokens per verification call
    accepted_error_pct: float = float("nan")  # (predicted - accepted) / accepted, percent
    replayed_tau: float = float("nan")        # the trace replay's emitted tau (goose_runtime.replay)
    replayed_error_pct: float = float("nan")  # (replayed - measured) / measured, percent
    predicted_low: float = float("nan")       # the file's predicted_ci95 (a bootstrap of its fit), where it has one
    predicted_high: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _acceptance_from(acc: Any) -> Acceptance | None:
    if not isinstance(acc, dict) or "p_s" not in acc or "p_t" not in acc:
        return None
    return Acceptance.from_dict(acc)


def fitted_prompt_count(topology: Topology, benchmark: str) -> int:
    """How many prompts of ``benchmark`` a topology's prediction was fitted on: the regime fit's own
    (goose loop's files, fitted per set; it takes acceptance from the trace methods nearest the
    budget), else the fit group's when the group is that set; 0 when the file does not say (a fit
    pooled over several sets describes another population)."""
    regime = topology.meta.get("regime_fit")
    if isinstance(regime, dict) and isinstance(regime.get("prompts"), int):
        return regime["prompts"]
    count = (topology.meta.get("provenance") or {}).get("prompts")
    return count if isinstance(count, int) and fitted_set(topology) == benchmark else 0


def fitted_acceptance(topology: Topology) -> tuple[Acceptance | None, Acceptance | None]:
    """(a priori, realised) acceptance models of a topology.

    A priori: what it was optimised for (its ``acceptance`` meta: fit-acceptance's p_s(d) scaled by
    the chance that the matcher offers a d-th token, or for ``goose loop``'s files the matched
    regime's acceptance; their ``predicted_tau`` is the two-regime tau). Realised: the fitted model
    *given* that a node exists (``provenance.fitted.selected``), for the trees the runtime built.
    """
    a_priori = _acceptance_from(topology.meta.get("acceptance"))
    fitted = ((topology.meta.get("provenance") or {}).get("fitted") or {}).get("selected")
    return a_priori, _acceptance_from(fitted) or a_priori


def _trees(results: Sequence[PromptResult]):
    for r in results:
        for c in r.cycles:
            yield tuple(c.parent), tuple(c.source), tuple(c.rank)


def _sums(runs: Sequence[PromptResult]) -> dict[str, tuple[float, int]]:
    """prompt id -> (tokens, verification calls) of one method's run."""
    return {r.prompt_id: (float(sum(c.tau for c in r.cycles)), len(r.cycles)) for r in runs}


def _versus(runs: Sequence[PromptResult], baseline: Sequence[PromptResult] | None) -> tuple[float, float, float]:
    """(tau / baseline tau - 1, 95% low, high) in percent over the prompts both ran; NaN without one."""
    if not baseline:
        return float("nan"), float("nan"), float("nan")
    mine, theirs = _sums(runs), _sums(baseline)
    shared = [p for p in mine if p in theirs]
    diff = paired_ratio_ci([mine[p][0] for p in shared], [mine[p][1] for p in shared],
                           [theirs[p][0] for p in shared], [theirs[p][1] for p in shared])
    return tuple(100.0 * x for x in diff)


def summarize_rows(benchmark: str, results: dict[str, list[PromptResult]], summaries: dict[str, Any],
                   predictions: dict[str, tuple[int, float, Acceptance | None]], *,
                   fitted_prompts: dict[str, int] | None = None, baselines: dict[str, str] | None = None,
                   replayed: dict[str, float] | None = None,
                   intervals: dict[str, Sequence[float]] | None = None) -> list[ValidationRow]:
    """One row per method label; ``predictions`` maps label -> (budget, a-priori tau, realised-tree
    acceptance model); ``fitted_prompts``: label -> how many prompts its prediction was fitted on
    (absent: unknown, no ``noise_pct``); ``baselines``: label -> the label it is compared with on the
    same prompts (``vs_goose_pct``); ``replayed``: label -> the trace replay's emitted tau;
    ``intervals``: label -> the prediction's 95% interval (a topology file's ``predicted_ci95``)."""
    rows = []
    for label, runs in results.items():
        budget, predicted, acceptance = predictions.get(label, (0, float("nan"), None))
        tokens, cycles = [sum(c.tau for c in r.cycles) for r in runs], [len(r.cycles) for r in runs]
        tau, lo, hi = ratio_ci(tokens, cycles)
        noise = 100.0 * split_noise(prompt_spread(tokens, cycles), (fitted_prompts or {}).get(label, 0), len(runs),
                                    df=len(runs) - 1)  # the spread is estimated from these few prompts
        versus = _versus(runs, results.get((baselines or {}).get(label, "")))
        realised = realised_prediction(_trees(runs), acceptance).tau if acceptance else float("nan")
        accepted = sum(sum(c.accepted) for r in runs for c in r.cycles) / sum(cycles) if sum(cycles) else float("nan")
        s, replay = summaries[label], (replayed or {}).get(label, float("nan"))
        rows.append(ValidationRow(benchmark, label, budget, predicted, realised, tau, lo, hi, _error(predicted, tau),
                                  s.tokens_per_s, s.speedup_vs_ar, s.matches_ar, len(runs),
                                  sum(cycles), *regime_split(runs), noise, *versus, accepted,
                                  _error(predicted, accepted), replay, _error(replay, tau),
                                  *(intervals or {}).get(label, (float("nan"), float("nan")))))
    return rows


def _error(predicted: float, measured: float) -> float:
    """(predicted - measured) / measured in percent; NaN where either is missing."""
    return 100.0 * (predicted - measured) / measured if measured == measured and measured > 0 else float("nan")


def regime_split(runs: Sequence[PromptResult]) -> tuple[float, float, float]:
    """(psi, tau matched, tau unmatched) of a run: the quantities of the two-regime model
    (:mod:`goose_theory.regime`), measured; NaN where the method has no matcher or no such cycle."""
    cycles = [c for r in runs for c in r.cycles if c.spine_avail >= 0]
    m = [c.tau for c in cycles if c.spine_avail > 0]
    u = [c.tau for c in cycles if c.spine_avail == 0]
    total = sum(m) + sum(u)
    nan = float("nan")
    return (sum(m) / total if total else nan, sum(m) / len(m) if m else nan, sum(u) / len(u) if u else nan)


def validate_benchmark(bundle, benchmark: str, topology_paths: Sequence[str], prompts: list[Prompt], *, config,
                       holdout: bool = True, on_result=None, trace_out: str | None = None,
                       prior: bool = False) -> tuple[list[ValidationRow], dict[str, list[PromptResult]]]:
    """Run ar, goose (topology budget and 60) and each topology on the held-out ``prompts`` of one
    set (:func:`~goose_runtime.validate_inputs.holdout_prompts`; ``holdout`` says they are held out, so the noise band applies);
    with ``trace_out``, record every method's per-node trace there (one parquet file, atomically);
    with ``prior``, goose and every topology draft with the model's successor prior (``+prior``),
    and the paper's goose@60 without it runs too (unpredicted: the fit is of +prior traces)."""
    from .methods import PRIOR_SUFFIX
    from .replayfit import replay_prediction
    from .runner import distinct_methods, parse_labeled, run_methods, summarize, write_results_trace

    topologies = [(path, load_topology(path)) for path in topology_paths]
    specs, predictions, baselines, fitted, replayed, intervals = [parse_labeled("ar")], {}, {}, {}, {}, {}
    suffix = PRIOR_SUFFIX if prior else ""
    goose = "goose" + suffix
    for path, topo in topologies:
        a_priori, realised = fitted_acceptance(topo)
        n_fit = fitted_prompt_count(topo, set_name(benchmark)) if holdout else 0  # else the prompts may overlap
        for budget in dict.fromkeys((topo.budget, PAPER_BUDGET)):
            spec = parse_labeled(goose, budget=max(budget, 1))
            specs.append(spec)
            predictions.setdefault(_label(spec), (spec.budget, _goose_prediction(topo, a_priori, spec.budget), realised))
            fitted.setdefault(_label(spec), n_fit)
        if prior:  # the paper's default as published too; the fit (of +prior traces) does not describe it
            spec = parse_labeled("goose", budget=PAPER_BUDGET)
            specs.append(spec)
            predictions.setdefault(_label(spec), (PAPER_BUDGET, float("nan"), None))
        spec = parse_labeled(f"topology:{path}{suffix}")
        specs.append(spec)
        predictions[_label(spec)] = (topo.budget, float(topo.meta.get("predicted_tau", float("nan"))), realised)
        if topo.meta.get("predicted_ci95"):  # checked on load (topometa): two taus, low first
            intervals[_label(spec)] = tuple(float(x) for x in topo.meta["predicted_ci95"])
        baselines[_label(spec)], fitted[_label(spec)] = _label(parse_labeled(goose, budget=max(topo.budget, 1))), n_fit
        _replayed(replayed, replay_prediction(bundle, spec, benchmark, config=config), spec)
    specs = list(distinct_methods(specs).values())
    _replay_goose(bundle, benchmark, config, [t for _, t in topologies], [s for s in specs if s.prior == prior],
                  replayed)
    results = run_methods(bundle, specs, prompts, config=config, on_result=on_result)
    if trace_out is not None:  # the format of `goose decode --trace-out`; its config says whether held out
        write_results_trace(trace_out, bundle, specs, results, config, run_id_prefix="validate",
                            benchmark=set_name(benchmark), holdout=holdout)
    return summarize_rows(benchmark, results, summarize(results), predictions, fitted_prompts=fitted,
                          baselines=baselines, replayed=replayed, intervals=intervals), results


def _replay_goose(bundle, benchmark: str, config, topologies, specs, replayed: dict[str, float]) -> None:
    """goose's replayed tau at each of its budgets, with the fit of the first file that replays,
    files whose fit has a confident regime (goose's bypass cycles) first."""
    from .replayfit import replay_prediction

    ordered = sorted(topologies, key=lambda t: not (t.meta.get("regime_fit") or {}).get("confident"))
    for spec in (s for s in specs if s.kind == "goose"):
        for topo in ordered:
            replay = replay_prediction(bundle, spec, benchmark, config=config, fitted=topo)
            if replay is not None:
                _replayed(replayed, replay, spec)
                break


def _replayed(replayed: dict[str, float], replay, spec) -> None:
    if replay is not None:
        replayed[_label(spec)] = replay.emitted_tau


def _label(spec) -> str:
    from .runner import method_label
    return method_label(spec)


def _goose_prediction(topology: Topology, acceptance: Acceptance | None, budget: int) -> float:
    """Indicative tau of the adaptive goose: with a two-regime fit in the topology (goose loop),
    the paper's tree in matched cycles and the optimal transition tree in unmatched ones (goose
    spends the whole budget on transitions there); else the paper shape under the fit."""
    fit = topology.meta.get("regime_fit")
    if not isinstance(fit, dict):
        return _paper_prediction(acceptance, budget)
    from goose_theory.optimize import build_topology
    from goose_theory.regime import regime_tau

    m, u = Acceptance.from_dict(fit["matched"]), Acceptance.from_dict(fit["unmatched"])
    paper = build_topology("paper", m, budget=budget).topology
    best_u = build_topology("optimal", u, budget=budget).topology
    return regime_tau(paper, m, u, float(fit["psi"]), best_u).tau


def _paper_prediction(acceptance: Acceptance | None, budget: int) -> float:
    """E[tau] of the paper's BuildSpineTree shape under the fitted model (goose is adaptive, so
    this is only indicative)."""
    if acceptance is None:
        return float("nan")
    from goose_theory.optimize import build_topology
    return build_topology("paper", acceptance, budget=budget).predicted_tau
