"""Shared plumbing for the sections: Streamlit-cached wrappers and error display.

The cached wrappers are made once per process; ``st.cache_data`` keys them on their arguments
only (the compute functions are pure), so repeated interactions are answered from the cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import compute, compute_io
from goose_theory.cli_util import one_line

_cache = st.cache_data(max_entries=256, show_spinner=False)
whatif = _cache(compute.whatif)
spine_curves = _cache(compute.spine_curves)
width_profiles = _cache(compute.width_profiles)
tree_layout = _cache(compute.tree_layout)
gain_grid = _cache(compute.gain_grid)
topology_download = _cache(compute.topology_download)
parse_topology_json = _cache(compute.parse_topology_json)
fit_shipped = _cache(compute_io.fit_shipped)
fit_uploaded = _cache(compute_io.fit_uploaded)
parse_latency = _cache(compute_io.parse_latency)
cost_table = _cache(compute_io.cost_table)

# Errors that mean "the input is bad", shown as one readable line; anything else is a bug.
INPUT_ERRORS: tuple[type[BaseException], ...] = compute.BAD_INPUT + compute_io.BAD_INPUT


@dataclass(frozen=True)
class Params:
    """The sidebar's what-if parameters."""

    p_s: float
    p_t: float
    model: str
    rule: str
    budget: int
    max_depth: int
    max_spine: int
    top_k: int
    seed: int
    topology_json: str | None = None  # an uploaded topology replaces the rule's tree

    @property
    def shape(self) -> dict[str, int]:
        return {"budget": self.budget, "max_depth": self.max_depth, "max_spine": self.max_spine,
                "top_k": self.top_k}


def show_error(where: str, exc: BaseException) -> None:
    """One readable line in the page, never a stack trace."""
    st.error(f"{where}: {one_line(exc)}")
