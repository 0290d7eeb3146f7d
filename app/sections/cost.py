"""Cost: a latency profile (shipped or uploaded) turns E[tau] into predicted speed; speedup
against budget for each rule, and each rule's best budget."""
from __future__ import annotations

import math
from pathlib import Path

import streamlit as st

from app import compute_io
from app.sections import common, sidebar, whatif
from app.sections.common import INPUT_ERRORS, Params, chart, show_error

PROFILES_DIR = Path(__file__).resolve().parents[1] / "latency"
COST_RULES = tuple(r for r in sidebar.RULE_CHOICES if r != sidebar.UPLOADED)  # every rule the sidebar offers
NO_BASELINE = ("the profile has no size-1 measurement (one token: plain autoregressive decoding), "
               "so there is no AR baseline to compare with")


def shipped_profiles() -> list[Path]:
    """Measured ``goose-latency/1`` profiles shipped in ``app/latency/``."""
    return sorted(PROFILES_DIR.glob("*.json")) if PROFILES_DIR.is_dir() else []


def _profile() -> str | None:
    files = shipped_profiles()
    options = [f.name for f in files] + ["upload a profile"]
    choice = st.selectbox("latency profile (goose-latency/1)", options, key="latency_choice")
    if choice != "upload a profile":
        data, name = (PROFILES_DIR / choice).read_bytes(), choice
    else:
        upload = common.uploader("latency profile JSON (written by `goose profile-latency --out FILE`)",
                                 "latency_upload", type=["json"])
        if not upload:
            st.info("Upload a latency profile, or measure one with `goose profile-latency --out FILE`.")
            return None
        (name, data), = upload
    try:
        return common.parse_latency(data, name)
    except INPUT_ERRORS as exc:
        show_error("latency profile", exc)
        return None


def _sidebar_tree(p: Params, profile: str) -> None:
    """The What-if tab's tree (the sidebar's rule and budget, or the uploaded tree) priced by the profile."""
    try:
        r = whatif.tree_result(p)
    except INPUT_ERRORS:
        st.caption("The sidebar's tree cannot be built with these settings (the What-if tab says why): not priced.")
        return
    nodes = r["topology"]["budget"]
    name = "the uploaded tree" if p.topology_json is not None else f"rule {p.rule}"
    cost = compute_io.tree_cost(profile, nodes, r["exact"])
    if cost is None:
        st.caption(f"The sidebar's tree ({name}, {nodes} nodes) is larger than the profile measures: not priced.")
        return
    speedup = "" if math.isnan(cost["speedup_vs_ar"]) else f", {cost['speedup_vs_ar']:.3f}x AR"
    st.markdown(f"**The sidebar's tree** ({name}, {nodes} nodes, E[tau] {r['exact']:.4f}): predicted "
                f"{cost['tokens_per_s']:.2f} tokens/s{speedup}.")


def above_slider_text(best_budgets: dict[str, int]) -> str | None:
    """Which rules' best budgets the sidebar's budget slider cannot set (a GPU profile can put
    one past it), and where those trees come from instead; None when every one fits.

    Example:
        >>> above_slider_text({"optimal": 63, "paper": 229})[:46]
        'Rule paper: best budget 229, above the sidebar'
    """
    above = {rule: b for rule, b in best_budgets.items() if b > sidebar.BUDGET_MAX}
    if not above:
        return None
    rules = "; ".join(f"rule {rule}: best budget {b}" for rule, b in above.items())
    return (f"{rules[0].upper()}{rules[1:]}, above the sidebar's budget slider (it stops at {sidebar.BUDGET_MAX}): "
            "the What-if tab cannot show that tree; `goose optimize --rule RULE --budget B` with the "
            "sidebar's acceptance builds it.")


def render(p: Params) -> None:
    """Draw the Cost tab for the sidebar's acceptance parameters."""
    st.subheader("Predicted speed from a latency profile")
    profile = _profile()
    common.seed("cost_rules", ["optimal", "paper", "isotropic:3"])
    rules = tuple(st.multiselect("rules", COST_RULES, key="cost_rules"))
    if profile is None:
        return
    if not rules:
        st.info("Choose one or more rules above to price them under this profile.")
        return
    st.caption("Profile: " + compute_io.profile_summary(profile) + " (as measured; the cost model prices the "
               "isotonic fit of these seconds)")
    try:
        out = common.cost_view(p.p_s, p.p_t, p.model, profile, rules, max_depth=p.max_depth,
                               max_spine=p.max_spine, top_k=p.top_k, **p.by_parent)
    except INPUT_ERRORS as exc:
        show_error("cost model", exc)
        return
    for message in out["errors"].values():
        st.warning(f"left out: {message}")  # the message names the rule
    best = out["best"].sort_values("tokens_per_s", ascending=False).reset_index(drop=True)
    top = best.iloc[0]
    c1, c2, c3 = st.columns(3)
    c1.metric("best budget", f"{int(top['budget'])}", delta=f"rule {top['rule']}", delta_color="off", delta_arrow="off")
    baseline = not math.isnan(top["speedup_vs_ar"])  # NaN: the profile does not measure size 1
    c2.metric("predicted speedup vs AR", f"{top['speedup_vs_ar']:.3f}x" if baseline else "n/a",
              help=None if baseline else NO_BASELINE)
    c3.metric("predicted E[tau] there", f"{top['predicted_tau']:.4f}")
    _sidebar_tree(p, profile)
    if baseline:
        chart(out["spec"])
    else:
        st.info(f"No speedup against AR: {NO_BASELINE}; the best budget is the one with the most tokens/s.")
    budgets = out["budgets"]
    every = len(budgets) == budgets[-1] - budgets[0] + 1
    st.caption(f"Budgets {budgets[0]} .. {budgets[-1]} (the profile's measured range): " + (
        "every rule at every one." if every else
        f"optimal at every one, as `goose optimize --latency` scans them; other rules at {len(budgets)} "
        "log-spaced budgets, then at every budget around each one's best."))
    st.markdown("**Best budget per rule**")
    st.dataframe(best, hide_index=True, key="cost_best_table")
    if note := above_slider_text(dict(zip(best["rule"], best["budget"].astype(int)))):
        st.caption(note)
