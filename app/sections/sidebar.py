"""The sidebar: the what-if parameters every section shares (each widget has a ``key``)."""
from __future__ import annotations

import json

import streamlit as st

from app.sections.common import INPUT_ERRORS, Params, parse_topology_json, show_error

RULE_CHOICES = ("optimal", "linear", "harmonic", "paper", "source-blind", "isotropic:3", "isotropic:5",
                "mixed-isotropic:3", "mixed-isotropic:5", "spine-only", "transition-only", "uploaded topology")
UPLOADED = "uploaded topology"


def render() -> Params:
    """Draw the sidebar and return the chosen parameters."""
    sb = st.sidebar
    sb.header("What-if parameters")
    p_s = sb.slider("p_s (spine acceptance)", 0.0, 1.0, 0.5, 0.01, key="p_s")
    p_t = sb.slider("p_t (transition acceptance)", 0.0, 0.5, 0.05, 0.005, key="p_t", format="%.3f")
    model = sb.radio("acceptance model", ("exclusive", "independent"), key="model", horizontal=True,
                     help="exclusive: siblings are distinct tokens, at most one matches (exact for greedy); "
                          "independent: the paper's analysis")
    budget = sb.slider("budget B (tree nodes)", 1, 200, 60, 1, key="budget")
    max_depth = sb.slider("max depth (branches)", 1, 12, 6, 1, key="max_depth")
    max_spine = sb.slider("max spine length", 0, 40, 20, 1, key="max_spine")
    top_k = sb.slider("top-K ranks", 1, 20, 10, 1, key="top_k")
    rule = sb.selectbox("rule", RULE_CHOICES, key="rule")
    seed = int(sb.number_input("Monte Carlo seed", 0, 2**31 - 1, 0, 1, key="seed"))
    topology_json = None
    if rule == UPLOADED:
        upload = sb.file_uploader("goose-topology/1 JSON", type=["json"], key="topology_upload")
        if upload is None:
            sb.info("Upload a topology file; until then the optimal tree is shown.")
        else:
            try:
                topology_json = json.dumps(parse_topology_json(upload.getvalue()))
            except INPUT_ERRORS as exc:
                show_error(f"topology file {upload.name}", exc)
    effective_rule = "optimal" if rule == UPLOADED else rule
    return Params(p_s, p_t, model, effective_rule if topology_json is None else UPLOADED, budget,
                  max_depth, max_spine, top_k, seed, topology_json)
