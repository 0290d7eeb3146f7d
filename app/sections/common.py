"""Shared plumbing for the sections: Streamlit-cached wrappers and error display.

The cached wrappers are made once per process; ``st.cache_data`` keys them on their arguments
only (the compute functions are pure), so repeated interactions are answered from the cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import compute, compute_io, views
from goose_theory.cli_util import one_line
from goose_theory.errors import InputError

_cache = st.cache_data(max_entries=256, show_spinner=False)
whatif_view = _cache(views.whatif_view)
curves_view = _cache(views.curves_view)
heatmap_view = _cache(views.heatmap_view)
cost_view = _cache(views.cost_view)
fit_shipped_view = _cache(views.fit_shipped_view)
fit_uploaded_view = _cache(views.fit_uploaded_view)
topology_download = _cache(compute.topology_download)
choices_download = _cache(compute.choices_download)
optimal_tau = _cache(compute.optimal_tau)
parse_topology_json = _cache(compute.parse_topology_json)
parse_latency = _cache(compute_io.parse_latency)

# Errors that mean "the input is bad" (the library's one base class for them), shown as one
# readable line; anything else is a bug and Streamlit shows it as such.
INPUT_ERRORS: tuple[type[BaseException], ...] = (InputError,)


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
    p_t_spine: float | None = None  # p_t under a spine node; None: as p_t (the control is off)
    p_t_chain: float | None = None  # p_t under a transition node; None: as p_t

    @property
    def shape(self) -> dict[str, int]:
        return {"budget": self.budget, "max_depth": self.max_depth, "max_spine": self.max_spine,
                "top_k": self.top_k}

    @property
    def by_parent(self) -> dict[str, float | None]:
        """The per-parent p_t keywords every compute call takes."""
        return {"p_t_spine": self.p_t_spine, "p_t_chain": self.p_t_chain}

    def describe(self) -> str:
        """The acceptance in words, for captions."""
        if self.p_t_spine is None and self.p_t_chain is None:
            return f"p_s = {self.p_s}, p_t = {self.p_t} ({self.model})"
        spine = self.p_t if self.p_t_spine is None else self.p_t_spine
        chain = self.p_t if self.p_t_chain is None else self.p_t_chain
        return (f"p_s = {self.p_s}, p_t = {self.p_t} under the root, {spine} under a spine node, "
                f"{chain} under a transition node ({self.model})")


def chart(spec: dict) -> None:
    """Draw a cached vega-lite spec across the column."""
    st.vega_lite_chart(spec, width="stretch")


def show_error(where: str, exc: BaseException) -> None:
    """One readable line in the page, never a stack trace."""
    st.error(f"{where}: {one_line(exc)}")
