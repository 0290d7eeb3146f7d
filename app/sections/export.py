"""Export: download the chosen tree as ``goose-topology/1`` JSON (the runtime's input)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from app.sections import common
from app.sections.common import Params


def render(p: Params, result: dict[str, Any] | None) -> None:
    """Draw the Export tab for the What-if tab's tree."""
    st.subheader("Download the topology")
    if result is None:
        st.warning("No valid tree to export: fix the What-if parameters first (see the message there).")
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
