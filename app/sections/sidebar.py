"""The sidebar: the what-if parameters every section shares (each widget has a ``key``)."""
from __future__ import annotations

import json
import math

import streamlit as st

from app.sections.common import INPUT_ERRORS, Params, parse_topology_json, seed, show_error, uploader

RULE_CHOICES = ("optimal", "linear", "harmonic", "paper", "source-blind", "isotropic:3", "isotropic:5",
                "mixed-isotropic:3", "mixed-isotropic:5", "spine-only", "transition-only", "uniform-levels",
                "uploaded topology")
UPLOADED = "uploaded topology"
P_T_MAX = 0.5  # the root p_t slider's top; per-parent p_t goes to 1 (chains reach 0.5-0.65 in real traces)
BY_PARENT_HELP = ("Real traces show transition acceptance depends on the parent: rank 0 is accepted "
                  "0.31-0.47 under the root, 0.07-0.53 under a spine node and 0.51-0.63 under a "
                  "transition node (the shipped traces' fit, by prompt set). On: p_t applies under "
                  "the root and two more sliders set the rest.")


P_S_STEP, P_T_STEP = 0.01, 0.005  # the sliders' steps


def on_slider(x: float, step: float, hi: float = 1.0) -> float:
    """``x`` clipped to [0, hi] and rounded to the slider's ``step``, so the value the page
    computes with is the one the slider shows.

    Example:
        >>> on_slider(0.9123, 0.01), on_slider(0.1538, 0.005), on_slider(0.7, 0.005, hi=0.5)
        (0.91, 0.155, 0.5)
    """
    return round(min(max(round(x / step) * step, 0.0), hi), 6)


def load_acceptance(p_s: float, p_t: float, p_t_spine: float, p_t_chain: float) -> None:
    """Button callback: put fitted values, on the sliders' steps, into the sliders (runs before
    the next rerun, when writing a widget's state is allowed) and turn the per-parent control
    on. A NaN (the traces never reached such a node; the caller substitutes what it can) leaves
    that slider as it is."""
    values = dict(p_s=(p_s, P_S_STEP, 1.0), p_t=(p_t, P_T_STEP, P_T_MAX), p_t_spine=(p_t_spine, P_T_STEP, 1.0),
                  p_t_chain=(p_t_chain, P_T_STEP, 1.0))
    st.session_state.update({key: on_slider(x, step, hi) for key, (x, step, hi) in values.items() if math.isfinite(x)},
                            by_parent=True)


def _by_parent(sb, p_t: float) -> tuple[float | None, float | None]:
    """The optional per-parent p_t sliders; (None, None) while the control is off. Switched on,
    both start at the current p_t, so nothing changes until one is moved."""
    if not sb.checkbox("transition acceptance by parent", key="by_parent", help=BY_PARENT_HELP):
        return None, None
    seed("p_t_spine", p_t)
    seed("p_t_chain", p_t)
    spine = sb.slider("p_t under a spine node", 0.0, 1.0, step=P_T_STEP, key="p_t_spine", format="%.3f")
    chain = sb.slider("p_t under a transition node", 0.0, 1.0, step=P_T_STEP, key="p_t_chain", format="%.3f")
    return spine, chain


def render() -> Params:
    """Draw the sidebar and return the chosen parameters."""
    sb = st.sidebar
    sb.header("What-if parameters")
    seed("p_s", 0.5)
    seed("p_t", 0.05)
    p_s = sb.slider("p_s (spine acceptance)", 0.0, 1.0, step=P_S_STEP, key="p_s")
    p_t = sb.slider("p_t (transition acceptance)", 0.0, P_T_MAX, step=P_T_STEP, key="p_t", format="%.3f",
                    help="every transition node's; under the root only while 'by parent' is on")
    p_t_spine, p_t_chain = _by_parent(sb, p_t)
    model = sb.radio("acceptance model", ("exclusive", "independent"), key="model", horizontal=True,
                     help="exclusive: siblings are distinct tokens, at most one matches (exact for greedy); "
                          "independent: the paper's analysis")
    budget = sb.slider("budget B (tree nodes)", 1, 200, 60, 1, key="budget")
    max_depth = sb.slider("max depth (branches)", 1, 12, 6, 1, key="max_depth")
    max_spine = sb.slider("max spine length", 0, 40, 20, 1, key="max_spine")
    top_k = sb.slider("top-K ranks", 1, 20, 10, 1, key="top_k")
    rule = sb.selectbox("rule", RULE_CHOICES, key="rule")
    mc_seed = int(sb.number_input("Monte Carlo seed", 0, 2**31 - 1, 0, 1, key="seed"))
    topology_json = None
    if rule == UPLOADED:
        upload = uploader("goose-topology/1 JSON, or tree choices ([[0], [1], [0, 0]])", "topology_upload",
                          where=sb, type=["json"])
        if not upload:
            sb.info("Upload a topology file; until then the optimal tree is shown.")
        else:
            (name, data), = upload
            try:
                topology_json = json.dumps(parse_topology_json(data))
            except INPUT_ERRORS as exc:
                show_error(f"topology file {name}", exc)
                # the page goes on with the optimal tree: say so, or its figures read as the rejected file's
                sb.info("Until a file loads, the optimal tree is shown.")
    effective_rule = "optimal" if rule == UPLOADED else rule
    return Params(p_s, p_t, model, effective_rule if topology_json is None else UPLOADED, budget,
                  max_depth, max_spine, top_k, mc_seed, topology_json, p_t_spine=p_t_spine, p_t_chain=p_t_chain)
