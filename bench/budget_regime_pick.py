"""Which budget would the regime files' own predictions have chosen, in a bench_budget_choice run?

``goose loop`` picks the budget with the single-regime fit and exports the regime file there.
``bench/bench_budget_choice.py`` measured the regime file at several budgets; each row carries the
file's own ``predicted_tau``. This divides it by the profile's cycle time at that budget (as
``goose_theory.latency.LatencyProfile.cycle_seconds`` does) and prints, per set, the predicted and
measured tokens/s per budget, the rule's choice and the regime prediction's choice, each as a
share of the fastest measured export. Reads JSON only (no model).

Usage:
    python bench/budget_regime_pick.py bench/results/bench_budget_choice_2026-12-01_prior.json \
        bench/results/latency_cpu2t_2026-12-01.json
"""
from __future__ import annotations

import json
import sys

from goose_theory.latency import load_latency


def main(argv=None) -> int:
    result_path, latency_path = (argv or sys.argv[1:])[:2]
    with open(result_path, encoding="utf-8") as fh:
        result = json.load(fh)
    latency = load_latency(latency_path)
    for name, entry in result["sets"].items():
        exports = sorted((r for r in entry["rows"] if r["method"].startswith("topology")), key=lambda r: r["budget"])
        measured = {r["budget"]: r["tokens_per_s"] for r in exports}
        predicted = {r["budget"]: r["predicted_tau"] / latency.cycle_seconds(r["budget"]) for r in exports}
        fastest = max(measured.values())
        pick = max(predicted, key=predicted.get)
        rows = ", ".join(f"{b}: {predicted[b]:.1f} / {measured[b]:.1f}" for b in measured)
        print(f"{name}: predicted / measured tok/s by budget {rows}")
        print(f"  rule's choice {entry['chosen']}: {measured[entry['chosen']] / fastest:.3f}x the fastest; "
              f"regime prediction's choice {pick}: {measured[pick] / fastest:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
