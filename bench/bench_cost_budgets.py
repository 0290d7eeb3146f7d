"""The Cost tab's best budget per rule against the library's full scan (``goose optimize --latency``).

Made for the 4 Dec change (optimal priced at every budget, other rules on a log-spaced grid refined
around its best): for each shipped latency profile, a few acceptances and the tab's rules, whether
the tab's best budget equals :func:`goose_theory.latency.cost_aware` over every budget (where not,
how far its predicted tokens/s falls short), and how long the tab's table took (all rules, uncached).

    .venv/bin/python bench/bench_cost_budgets.py
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ACCEPTANCES = ((0.5, 0.05), (0.8, 0.1), (0.3, 0.2), (0.9, 0.02))


def main() -> int:
    from app import compute_io
    from app.sections.cost import COST_RULES
    from goose_theory.acceptance import Acceptance
    from goose_theory.latency import cost_aware, latency_from_dict

    agree, total, misses = 0, 0, []
    for path in sorted((ROOT / "app" / "latency").glob("*.json")):
        text = path.read_text()
        profile = latency_from_dict(json.loads(text))
        for p_s, p_t in ACCEPTANCES:
            start = time.perf_counter()
            out = compute_io.cost_table(p_s, p_t, "exclusive", text, COST_RULES)
            elapsed = time.perf_counter() - start
            best = out["best"].set_index("rule")
            for rule in COST_RULES:
                full = cost_aware(Acceptance.parse(p_s, p_t), profile, rule=rule)
                total += 1
                agree += int(best.loc[rule, "budget"] == full.best.budget)
                if best.loc[rule, "budget"] != full.best.budget:
                    rate = next(r["tokens_per_s"] for r in full.table if r["budget"] == full.best.budget)
                    short = 1 - best.loc[rule, "tokens_per_s"] / rate
                    misses.append(f"{path.name} p_s {p_s} p_t {p_t} {rule}: tab {best.loc[rule, 'budget']}, full scan "
                                  f"{full.best.budget}; the tab's predicted tokens/s {short:.3%} below the full scan's")
            print(f"{path.name}  p_s {p_s}  p_t {p_t}: {len(COST_RULES)} rules in {elapsed:.2f} s", flush=True)
    print(f"best budget equal to the full scan's: {agree} of {total}")
    print("\n".join(misses))
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
