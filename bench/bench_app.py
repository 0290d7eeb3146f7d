"""Interaction timings of the what-if explorer: full-script AppTest reruns after one widget change.

Each row changes one widget (a new value, so its computation is not cached yet unless stated) and
reruns the page exactly as Streamlit does on an interaction; issue 5's target is < 300 ms each.
Only the open tab runs: the What-if rows run with it open, then the tab switches and a few sidebar
moves with the Cost tab open (its uploaded profile prices every rule's budgets on each move).

    .venv/bin/python bench/bench_app.py
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

from streamlit.testing.v1 import AppTest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from app.sections.common import TAB_KEY  # noqa: E402

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app", "explorer.py")
# a profile shaped like this CPU's (goose profile-latency), uploaded as a user would
PROFILE = {"schema": "goose-latency/1", "sizes": [1, 2, 4, 8, 16, 32, 64],
           "seconds": [0.0244, 0.0253, 0.0251, 0.0304, 0.0333, 0.0451, 0.0719], "draft_s": 0.00073}


def main() -> int:
    at = AppTest.from_file(APP, default_timeout=120)
    start = time.perf_counter()
    at.run()
    print(f"cold first run (imports, numba cache loads, heatmap): {time.perf_counter() - start:.2f} s")
    rows = []

    def step(label, change) -> None:
        t = time.perf_counter()
        change()
        at.run()
        assert not at.exception, at.exception
        rows.append((label, (time.perf_counter() - t) * 1e3))

    for model in ("exclusive", "independent"):
        step(f"model -> {model}", lambda m=model: at.radio(key="model").set_value(m))
        for v in (0.52, 0.61, 0.37):
            step(f"[{model}] p_s -> {v}", lambda v=v: at.slider(key="p_s").set_value(v))
        for v in (0.04, 0.07):
            step(f"[{model}] p_t -> {v}", lambda v=v: at.slider(key="p_t").set_value(v))
        for v in (45, 90):
            step(f"[{model}] budget -> {v}", lambda v=v: at.slider(key="budget").set_value(v))
        for r in ("harmonic", "paper", "isotropic:3"):
            step(f"[{model}] rule -> {r}", lambda r=r: at.selectbox(key="rule").set_value(r))
        step(f"[{model}] heatmap budget -> 40", lambda: at.select_slider(key="heatmap_budget").set_value(40))
        step(f"[{model}] p_s -> 0.52 again (cached)", lambda: at.slider(key="p_s").set_value(0.52))
        # the per-parent control: tick it (nothing changes), then move each of its sliders
        step(f"[{model}] by parent -> on", lambda: at.checkbox(key="by_parent").set_value(True))
        for key, v in (("p_t_spine", 0.02), ("p_t_chain", 0.3)):
            step(f"[{model}] {key} -> {v}", lambda key=key, v=v: at.slider(key=key).set_value(v))
        step(f"[{model}] by parent -> off", lambda: at.checkbox(key="by_parent").set_value(False))
    def open_tab(label: str) -> None:  # a click on the tab: st.tabs' state is the open tab's label
        at.session_state[TAB_KEY] = label

    for tab in ("Traces", "Export", "Cost"):
        step(f"tab -> {tab}", lambda tab=tab: open_tab(tab))
    step("[Cost] profile -> upload", lambda: at.selectbox(key="latency_choice").set_value("upload a profile"))
    step("[Cost] upload p.json", lambda: at.file_uploader(key="latency_upload").set_value(
        ("p.json", json.dumps(PROFILE).encode(), "application/json")))
    for v in (0.44, 0.58):
        step(f"[Cost] p_s -> {v}", lambda v=v: at.slider(key="p_s").set_value(v))
    step("[Cost] p_t -> 0.06", lambda: at.slider(key="p_t").set_value(0.06))
    step("[Cost] model -> exclusive", lambda: at.radio(key="model").set_value("exclusive"))
    step("[Cost] rules + linear", lambda: at.multiselect(key="cost_rules").set_value(
        ["optimal", "paper", "isotropic:3", "linear"]))
    step("tab -> What-if", lambda: open_tab("What-if"))
    for label, ms in rows:
        print(f"{ms:8.1f} ms  {label}")
    times = [ms for _, ms in rows]
    whatif = [ms for label, ms in rows if not label.startswith(("tab ->", "[Cost]"))]
    print(f"the What-if tab open: median {statistics.median(whatif):.1f} ms, max {max(whatif):.1f} ms over "
          f"{len(whatif)} reruns")
    print(f"median {statistics.median(times):.1f} ms, max {max(times):.1f} ms over {len(rows)} reruns; "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
