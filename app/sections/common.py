"""Shared plumbing for the sections: Streamlit-cached wrappers, error display, and widget state that
outlives a closed tab.

The cached wrappers are made once per process; ``st.cache_data`` keys them on their arguments
only (the compute functions are pure), so repeated interactions are answered from the cache.

Only the open tab runs (``app/explorer.py``), and Streamlit drops the state of every widget that a
run does not draw. So the widgets of the tabs keep their state through :func:`keep_tab_widgets`
(re-assigned at the top of each run, which makes them the page's own session state) and start from
:func:`seed` instead of a ``value=``/``default=`` argument (Streamlit warns about a widget given both);
a file uploader cannot be re-assigned, so :func:`uploader` keeps a copy of its files.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

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

TAB_KEY = "tab"  # st.tabs' key: its state is the open tab's label
# the tabs' widgets whose state outlives a run that does not draw them (a closed tab); the sidebar
# is drawn in every run. Not the Traces tab's "group to load": its options change with the traces.
KEPT_WIDGETS = ("heatmap_budget", "trace_source", "trace_files", "trace_group_by", "latency_choice", "cost_rules")
_KEPT_UPLOAD = "kept_upload:"  # + an uploader's key: the (name, bytes) of its files

# Errors that mean "the input is bad" (the library's one base class for them), shown as one
# readable line; anything else is a bug and Streamlit shows it as such.
INPUT_ERRORS: tuple[type[BaseException], ...] = (InputError,)


@dataclass(frozen=True)
class Params:
    """The sidebar's what-if parameters: the sliders' scalars, or (``fitted``: its group's label)
    the model loaded from a trace fit, whose p_s is by spine depth and p_t by rank (tuples)."""

    p_s: float | tuple[float, ...]
    p_t: float | tuple[float, ...]
    model: str
    rule: str
    budget: int
    max_depth: int
    max_spine: int
    top_k: int
    seed: int
    topology_json: str | None = None  # an uploaded topology replaces the rule's tree
    p_t_spine: float | tuple[float, ...] | None = None  # p_t under a spine node; None: as p_t (the control is off)
    p_t_chain: float | tuple[float, ...] | None = None  # p_t under a transition node; None: as p_t
    fitted: str | None = None  # the trace fit's group whose model replaced the sliders (app/fitted.py)

    @property
    def shape(self) -> dict[str, int]:
        return {"budget": self.budget, "max_depth": self.max_depth, "max_spine": self.max_spine,
                "top_k": self.top_k}

    @property
    def by_parent(self) -> dict[str, float | tuple[float, ...] | None]:
        """The per-parent p_t keywords every compute call takes."""
        return {"p_t_spine": self.p_t_spine, "p_t_chain": self.p_t_chain}

    def describe(self) -> str:
        """The acceptance in words, for captions."""
        if self.fitted is not None:
            return f"the acceptance fitted on {self.fitted} ({self.model})"
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


def seed(key: str, value: Any) -> None:
    """A widget's starting value, kept in session state (not the widget's ``value``), so a
    callback (the Traces tab's "load fitted values") or :func:`keep_tab_widgets` may set it without
    a duplicate-default clash."""
    if key not in st.session_state:
        st.session_state[key] = value


def keep_tab_widgets() -> None:
    """Call first in every run: re-assigning a widget's value makes it the page's own session state,
    which Streamlit keeps through runs that do not draw the widget (its tab is closed)."""
    for key in KEPT_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def _keep_upload(key: str) -> None:
    """The uploader's on_change: copy what it now holds (nothing: the user removed the files)."""
    value = st.session_state.get(key)
    files = value if isinstance(value, list) else [value] if value is not None else []
    if files:
        st.session_state[_KEPT_UPLOAD + key] = tuple((f.name, f.getvalue()) for f in files)
    else:
        st.session_state.pop(_KEPT_UPLOAD + key, None)


def _forget_upload(key: str) -> None:
    st.session_state.pop(_KEPT_UPLOAD + key, None)


def uploader(label: str, key: str, where: Any = st, **kwargs: Any) -> tuple[tuple[str, bytes], ...]:
    """A file uploader whose files outlive it being hidden (its tab closed, or the sidebar's rule
    switched away from it): the (name, bytes) of each file the user uploaded, or () if none.
    Shown again, the uploader itself shows no file (Streamlit made a new one), so the page says
    which kept files it uses and offers to forget them. ``where``: st or a container (st.sidebar)."""
    where.file_uploader(label, key=key, on_change=_keep_upload, args=(key,), **kwargs)
    kept = st.session_state.get(_KEPT_UPLOAD + key, ())
    if kept and not st.session_state.get(key):
        where.caption(f"Using {', '.join(name for name, _ in kept)}, uploaded before it was hidden "
                      "(upload again to replace).")
        where.button("Forget the uploaded file" + ("s" if len(kept) > 1 else ""), key=f"forget_{key}",
                     on_click=_forget_upload, args=(key,))
    return kept


FREEZE_AT = 20_000  # long-lived objects (the oldest generation) that make a full collection slow


def freeze_long_lived() -> None:
    """At the end of a run: when many objects have come to stay since the last freeze (the first
    run's imports and library state; numba loading the kernels of a tab opened the first time;
    pyarrow and scipy on the first fit), collect the garbage, then move what is left out of the
    garbage collector's sight (``gc.freeze``). A full collection walks every tracked object and came
    about once in a hundred interactions, landing on whichever one was running
    (bench/bench_app_moves.py on the 2-core host: one pass of 157-163 ms in 120 slider moves; none
    since). It happens a few times per server process (the check itself takes
    well under a millisecond once the heap is frozen); what is frozen is library state that lives as
    long as the process, and objects made later are collected as before."""
    if len(gc.get_objects(generation=2)) > FREEZE_AT:
        gc.collect()
        gc.freeze()
