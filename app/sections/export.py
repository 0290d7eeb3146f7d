"""Export: download the chosen tree as ``goose-topology/1`` JSON (the runtime's input) and, without a
spine, as the tree choices other runtimes take."""
from __future__ import annotations

from typing import Any

import streamlit as st

from app.sections import common, whatif
from app.sections.common import INPUT_ERRORS, Params
from goose_theory.cli_util import one_line


def render(p: Params) -> None:
    """Draw the Export tab for the What-if tab's tree (the same cached result)."""
    st.subheader("Download the topology")
    try:
        result = whatif.tree_result(p)
    except INPUT_ERRORS as exc:
        st.warning(f"No valid tree to export ({one_line(exc)}): change the What-if parameters.")
        return
    topo = result["topology"]
    text = common.topology_download(topo)
    name = "uploaded" if p.topology_json is not None else p.rule.replace(":", "")
    st.write(f"Rule **{topo.get('rule', name)}**, {topo['budget']} nodes, spine {result['spine_length']}, "
             f"predicted E[tau] = {result['exact']:.4f} under {p.describe()}.")
    st.download_button("Download goose-topology/1 JSON", text, file_name=f"topology-{name}-B{topo['budget']}.json",
                       mime="application/json", key="download_topology")
    st.caption("Use it with `goose yield --topology FILE ...` or the runtime's `--topology FILE`.")
    with st.expander("Show the JSON"):
        st.code(text, language="json")
    _choices(topo, name)


def _choices(topo: dict[str, Any], name: str) -> None:
    st.subheader("Tree choices (Medusa, EAGLE, TensorRT-LLM, vLLM)")
    text, notes = common.choices_download(topo)
    if text is None:
        st.caption(f"Not for this tree: {notes[0]}")
        return
    st.download_button("Download tree choices", text, file_name=f"choices-{name}-B{topo['budget']}.json",
                       mime="application/json", key="download_choices")
    st.caption("One rank path per node, e.g. [[0], [1], [0, 0]]: `medusa_choices`, EAGLE's tree choices, "
               "vLLM's `speculative_token_tree`; `goose choices import FILE --out T.json` reads it back.")
    for note in notes:
        st.caption(f"Note: {note}.")
