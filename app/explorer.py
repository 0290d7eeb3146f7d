"""The Goose what-if explorer (Streamlit): ``goose app`` or ``streamlit run app/explorer.py``.

Thin by design: the sidebar's widgets -> cached library calls (``app/compute*.py``) -> pure
altair charts (``app/charts.py``). Each tab lives in ``app/sections/``. Only the open tab runs (a tab
switch reruns the page), so moving a slider does not redraw the Traces tab's fit or recompute the
Cost tab's budgets behind a closed tab; its widgets keep their state (``sections/common.py``).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app/explorer.py` puts only app/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app.sections import common, cost, export, sidebar, traces, whatif  # noqa: E402

st.set_page_config(page_title="Goose what-if explorer", layout="wide")
st.title("Goose: anisotropic speculation trees, what if?")
st.caption("Move p_s, p_t and the budget in the sidebar: exact theory, the paper's bound and a Monte Carlo "
           "check update together. tau = tokens accepted per verification call, bonus token included.")

common.keep_tab_widgets()
params = sidebar.render()
tab_whatif, tab_traces, tab_cost, tab_export = st.tabs(["What-if", "Traces", "Cost", "Export"], key=common.TAB_KEY,
                                                       on_change="rerun")
if tab_whatif.open:
    with tab_whatif:
        whatif.render(params)
elif tab_traces.open:
    with tab_traces:
        traces.render()
elif tab_cost.open:
    with tab_cost:
        cost.render(params)
elif tab_export.open:
    with tab_export:
        export.render(params)
common.freeze_long_lived()  # after the first run, and after any that loaded much (see its docstring)
