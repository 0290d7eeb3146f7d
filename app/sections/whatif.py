"""What-if: exact E[tau], the paper's bound and Monte Carlo for the chosen tree, the spine-length
curves, the branch widths, the tree itself, the pmf of tau and the gain heatmap."""
from __future__ import annotations

import json
from typing import Any

import streamlit as st

from app import compute
from app.sections import common
from app.sections.common import INPUT_ERRORS, Params, chart, show_error

HEATMAP_BUDGETS = (20, 40, 60, 100)


def _metrics(r: dict[str, Any]) -> None:
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("exact E[tau]", f"{r['exact']:.4f}", help="closed form (goose_theory.yields.exact_yield)")
    c2.metric("paper's lower bound", f"{r['lower_bound']:.4f}",
              delta=f"gap {r['exact'] - r['lower_bound']:.4f}", delta_color="off", delta_arrow="off",
              help=f"indicator decomposition with lbar = {r['lbar']:.3f} (from the topology)")
    lo, hi = r["mc_ci95"]
    c3.metric("Monte Carlo mean", f"{r['mc_mean']:.4f}", delta=f"95% CI {lo:.4f} .. {hi:.4f}",
              delta_color="off", delta_arrow="off", help=f"{r['mc_cycles']:,} simulated cycles")
    nodes = r["topology"]["budget"]
    c4.metric("tree", f"{nodes} node{'' if nodes == 1 else 's'}", delta=f"spine {r['spine_length']}",
              delta_color="off", delta_arrow="off")
    if r["notes"]:  # the optimizer cut ranks where p_s + sum p_t would exceed 1 (exclusive model)
        with st.expander(f"Exclusive model: fewer than top-K ranks at {len(r['notes'])} place(s), "
                         f"so that every node's children's q sum stays <= 1"):
            st.markdown("\n".join(f"- {note}" for note in r["notes"]))
    if r["unplaced"]:
        st.warning(unplaced_text(r["unplaced"], capped=bool(r["notes"]), paper=r["topology"].get("rule") == "paper"))
    elif r["topology"].get("rule") == "uniform-levels" and nodes < r["topology"].get("requested_budget", nodes):
        st.info(f"uniform-levels: every node of a level has the same children (vLLM's trees), so the best such tree "
                f"within the budget holds {nodes} of its {r['topology']['requested_budget']} nodes")


def unplaced_text(unplaced: int, *, capped: bool, paper: bool = False) -> str:
    """Why the tree holds fewer nodes than its budget. Where the exclusive model left ranks out
    (p_s = 1 allows no transition node at all), raising top-K or max depth may not help; the paper
    rule's split itself strands nodes a deep spine node cannot hang, as goose's builder does.

    Example:
        >>> unplaced_text(1, capped=False, paper=True)[:58]
        "1 node(s) of the budget went unused: the paper's split giv"
    """
    if paper:
        return (f"{unplaced} node(s) of the budget went unused: the paper's split gives the spine nodes that can hold "
                "branches shares by 1/i, and the deepest of them cannot hang all of theirs (goose's builder leaves "
                "them unused too)")
    why = ("max depth, max spine and top-K; the exclusive model also leaves ranks out (above), which a "
           "larger top-K cannot fill: raise max spine or max depth, or choose the independent model" if capped else
           "max depth, max spine and top-K: raise one of them")
    return f"{unplaced} node(s) of the budget did not fit in the candidate tree (its limits: {why})"


def _against_optimal(p: Params, r: dict[str, Any]) -> None:
    """The uploaded tree against the optimal tree of as many nodes under the same sliders."""
    budget = r["topology"]["budget"]
    try:
        best = common.optimal_tau(p.p_s, p.p_t, p.model, **{**p.shape, "budget": budget}, **p.by_parent)
    except INPUT_ERRORS as exc:
        show_error("the optimal tree of as many nodes", exc)
        return
    st.caption(f"The optimal tree of {budget} nodes within the sidebar's limits: E[tau] = {best:.4f}; "
               f"this tree {r['exact'] / best - 1:+.1%} against it.")


def _curves(p: Params) -> None:
    try:
        view = common.curves_view(p.p_s, p.p_t, p.model, **p.by_parent, **p.shape)
    except INPUT_ERRORS as exc:
        show_error("E[tau] against spine length and branch widths", exc)
        return
    if p.topology_json is not None:  # the curves compare the rules; the uploaded tree is none of them
        st.caption(f"The two charts below compare the allocation rules at the sidebar's budget B = "
                   f"{p.shape['budget']} under the sliders; the uploaded tree is not among them.")
    left, right = st.columns(2)
    with left:
        chart(view["curve_spec"])
    with right:
        chart(view["widths_spec"])


def _heatmap(p: Params) -> None:
    st.subheader("Where does the anisotropic tree win?")
    common.seed("heatmap_budget", 60)
    budget = st.select_slider("heatmap budget B", HEATMAP_BUDGETS, key="heatmap_budget",
                              help="its own budget, so moving the sidebar's does not recompute the grid")
    try:
        view = common.heatmap_view(p.model, budget=budget, max_depth=p.max_depth, max_spine=p.max_spine,
                                   top_k=p.top_k)
    except INPUT_ERRORS as exc:
        show_error("gain heatmap", exc)
        return
    chart(view["spec"])
    st.caption(f"gain = optimal E[tau] / best isotropic:K E[tau] (K = 1..{p.top_k}) - 1, {p.model} model, "
               f"B = {budget}; outlined cells: gains in the paper's measured range, +12% .. +33% (its baseline was "
               f"Iso(3)/Iso(5) alone, the colour's is the best K)."
               + (" One p_s and one p_t per cell, under every parent (the sidebar's fitted model does not apply here)."
                  if p.fitted is not None else
                  " One p_t per cell, under every parent (the per-parent sliders do not apply here)."
                  if p.p_t_spine is not None else ""))


def tree_result(p: Params) -> dict[str, Any]:
    """The what-if result of the sidebar's tree (cached; the Export tab's input too); raises the
    library's input errors."""
    return common.whatif_view(p.p_s, p.p_t, p.model, p.rule if p.topology_json is None else "optimal",
                              seed=p.seed, topology_json=p.topology_json, **p.by_parent, **p.shape)


def render(p: Params) -> None:
    """Draw the What-if tab."""
    r = None
    try:
        r = tree_result(p)
    except INPUT_ERRORS as exc:
        show_error("this tree cannot be evaluated", exc)
    if p.topology_json is not None and (note := compute.uploaded_note(json.loads(p.topology_json))):
        st.info(note)
    if r is not None:
        _metrics(r)
        if p.topology_json is not None:
            _against_optimal(p, r)
        left, right = st.columns([3, 2])
        with left:
            chart(r["tree_spec"])
        with right:
            chart(r["pmf_spec"])
            if r["pmf_note"]:
                st.caption(r["pmf_note"])
    _curves(p)
    _heatmap(p)
