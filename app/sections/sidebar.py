"""The sidebar: the what-if parameters every section shares (each widget has a ``key``)."""
from __future__ import annotations

import json
import math
from typing import Any

import streamlit as st

from app import fitted
from app.sections.common import INPUT_ERRORS, Params, parse_topology_json, seed, show_error, uploader
from goose_theory.topology import PAPER_MAX_DEPTH, PAPER_MAX_SPINE

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
BUDGET_MAX, TOP_K_MAX = 200, 20  # the budget and top-K sliders' tops
SOURCE_KEY, FITTED, SLIDERS = "acceptance_source", "fitted", "sliders"  # once a trace fit is loaded


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
    the next rerun, when writing a widget's state is allowed), turn the per-parent control
    on, and use the sliders again if a fitted model replaced them. A NaN (the traces never reached
    such a node; the caller substitutes what it can) leaves that slider as it is."""
    values = dict(p_s=(p_s, P_S_STEP, 1.0), p_t=(p_t, P_T_STEP, P_T_MAX), p_t_spine=(p_t_spine, P_T_STEP, 1.0),
                  p_t_chain=(p_t_chain, P_T_STEP, 1.0))
    st.session_state.update({key: on_slider(x, step, hi) for key, (x, step, hi) in values.items() if math.isfinite(x)},
                            by_parent=True, **{SOURCE_KEY: SLIDERS})


def load_fitted(label: str, entry: dict[str, Any]) -> None:
    """Button callback: the model a trace fit recommends with (``app.fitted``) replaces the
    sliders' p_s and p_t; the rule becomes optimal, the model and the tree's limits
    ``fit-acceptance``'s, the budget and top-K the largest recorded (within the sliders' ranges:
    the caption says where they cut), so the What-if tab's tree is the one it recommends."""
    st.session_state.update({fitted.FITTED_KEY: {"label": label, **entry}, SOURCE_KEY: FITTED,
                             "model": entry["acceptance"].get("model", "exclusive"), "rule": "optimal",
                             "max_depth": PAPER_MAX_DEPTH, "max_spine": PAPER_MAX_SPINE,
                             "budget": min(max(int(entry["budget"]), 1), BUDGET_MAX),
                             "top_k": min(max(int(entry["top_k"]), 1), TOP_K_MAX)})


def _forget_fitted() -> None:
    st.session_state.pop(fitted.FITTED_KEY, None)
    st.session_state[SOURCE_KEY] = SLIDERS


def _cut_note(entry: dict[str, Any]) -> str:
    """Where the loaded budget or top-K exceeded its slider's top (so the tree is not the recommended one)."""
    cut = [f"the {name} slider stops at {top} (recorded {entry[key]})"
           for name, key, top in (("budget", "budget", BUDGET_MAX), ("top-K", "top_k", TOP_K_MAX)) if entry[key] > top]
    return f" Not quite: {' and '.join(cut)}." if cut else ""


def _fitted_choice(sb) -> dict[str, Any] | None:
    """Once a trace fit was loaded: the choice between it and the sliders; the loaded entry while chosen."""
    entry = st.session_state.get(fitted.FITTED_KEY)
    if entry is None:
        return None
    source = sb.radio("acceptance from", (FITTED, SLIDERS), key=SOURCE_KEY, horizontal=True,
                      format_func=lambda s: f"fit of {entry['label']}" if s == FITTED else s)
    sb.button("Forget the fitted model", key="forget_fitted", on_click=_forget_fitted)
    if source != FITTED:
        return None
    sb.caption(f"The model `fit-acceptance` predicts with ({entry['acceptance'].get('model', 'exclusive')}; "
               f"the other model gives other figures): {fitted.describe(entry)}. The p_s and p_t sliders below "
               f"are not used. Loading set the rule to optimal, max depth {PAPER_MAX_DEPTH}, max spine "
               f"{PAPER_MAX_SPINE}, the largest recorded budget ({entry['budget']}) and top-K ({entry['top_k']}): "
               f"the tree `fit-acceptance` recommends. It is a one-regime fit (the spine's offers folded into p_s): "
               f"where the matcher offers a spine in only some cycles, as in goose's traces, such predictions ran "
               f"22-70% above measured tau (docs/two-regime.md, section 1); the regime files of `fit-acceptance "
               f"--regimes` and `goose loop` are the ones to hold against a measurement." + _cut_note(entry))
    return entry


def _by_parent(sb, p_t: float, disabled: bool) -> tuple[float | None, float | None]:
    """The optional per-parent p_t sliders; (None, None) while the control is off. Switched on,
    both start at the current p_t, so nothing changes until one is moved."""
    if not sb.checkbox("transition acceptance by parent", key="by_parent", help=BY_PARENT_HELP, disabled=disabled):
        return None, None
    seed("p_t_spine", p_t)
    seed("p_t_chain", p_t)
    spine = sb.slider("p_t under a spine node", 0.0, 1.0, step=P_T_STEP, key="p_t_spine", format="%.3f",
                      disabled=disabled)
    chain = sb.slider("p_t under a transition node", 0.0, 1.0, step=P_T_STEP, key="p_t_chain", format="%.3f",
                      disabled=disabled)
    return spine, chain


def _acceptance(sb) -> dict[str, Any]:
    """p_s, p_t, p_t_spine, p_t_chain and model: the sliders', or a loaded fit's (the sliders are
    drawn either way, disabled then, so their state survives a switch back)."""
    entry = _fitted_choice(sb)
    seed("p_s", 0.5)
    seed("p_t", 0.05)
    off = entry is not None
    p_s = sb.slider("p_s (spine acceptance)", 0.0, 1.0, step=P_S_STEP, key="p_s", disabled=off)
    p_t = sb.slider("p_t (transition acceptance)", 0.0, P_T_MAX, step=P_T_STEP, key="p_t", format="%.3f",
                    help="every transition node's; under the root only while 'by parent' is on", disabled=off)
    p_t_spine, p_t_chain = _by_parent(sb, p_t, off)
    model = sb.radio("acceptance model", ("exclusive", "independent"), key="model", horizontal=True,
                     help="exclusive: siblings are distinct tokens, at most one matches (exact for greedy); "
                          "independent: the paper's analysis")
    if entry is not None:
        return {**fitted.as_arguments(entry), "model": model, "fitted": entry["label"]}
    return {"p_s": p_s, "p_t": p_t, "p_t_spine": p_t_spine, "p_t_chain": p_t_chain, "model": model}


def render() -> Params:
    """Draw the sidebar and return the chosen parameters."""
    sb = st.sidebar
    sb.header("What-if parameters")
    acceptance = _acceptance(sb)
    seed("budget", 60)
    seed("top_k", 10)
    budget = sb.slider("budget B (tree nodes)", 1, BUDGET_MAX, step=1, key="budget")
    seed("max_depth", PAPER_MAX_DEPTH)
    seed("max_spine", PAPER_MAX_SPINE)
    max_depth = sb.slider("max depth (branches)", 1, 12, step=1, key="max_depth")
    max_spine = sb.slider("max spine length", 0, 40, step=1, key="max_spine")
    top_k = sb.slider("top-K ranks", 1, TOP_K_MAX, step=1, key="top_k")
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
    return Params(rule=effective_rule if topology_json is None else UPLOADED, budget=budget, max_depth=max_depth,
                  max_spine=max_spine, top_k=top_k, seed=mc_seed, topology_json=topology_json, **acceptance)
