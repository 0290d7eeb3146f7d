"""Losslessness on the real default model in fp32: every method emits exactly ar's token ids.

Prompts are text nobody here wrote: CPython standard-library sources and docstrings found on this
machine. One prompt makes context matching fire (a passage followed by its own start), one is code
that repeats identifiers, one is a short chat question where matching has little to work with.
"""
from __future__ import annotations

import pathlib
import sysconfig

import pytest

from goose_theory.topology import Topology, save_topology

pytestmark = pytest.mark.slow

METHODS = ["pld", "tr", "iso:3", "mixed-iso:3", "goose", "topology", "auto", "auto-flat", "goose+prior", "auto+prior",
           "goose+store", "auto+store"]
NEW_TOKENS = 64
# auto needs a latency profile: this is one `goose profile-latency` measured on the 2-core CPU
CPU_PROFILE = dict(sizes=(1, 2, 4, 8, 16, 24, 32, 48, 64),
                   seconds=(0.0244, 0.0253, 0.0251, 0.0304, 0.0333, 0.0394, 0.0451, 0.0595, 0.0719),
                   draft_s=0.00073, draft_s_per_node=3.4e-05)
# ... and the nearly flat one of an H200 (goose profile-latency there), under which auto drafts its
# largest trees (36-50 nodes on the GPU)
FLAT_PROFILE = dict(sizes=(1, 2, 4, 8, 16, 32, 64), seconds=(0.0219, 0.0255, 0.0249, 0.0228, 0.0236, 0.0225, 0.0221),
                    draft_s=0.00083, draft_s_per_node=1.4e-05)


def stdlib_text(name: str) -> str:
    return (pathlib.Path(sysconfig.get_paths()["stdlib"]) / name).read_text(encoding="utf-8")


def code_prompt() -> str:
    src = stdlib_text("textwrap.py")
    start = src.index("def dedent(")
    end = src.index("def indent(")
    return src[start:end] + "def indent("  # the model continues a stdlib function


def module_docstring(name: str) -> str:
    src = stdlib_text(name)
    first = src.index('"""') + 3
    return src[first:src.index('"""', first)].strip()


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def bundle(request):
    # the same proof on a GPU where there is one (conftest deselects the cuda case where there is none)
    from goose_runtime.model import load_model
    return load_model("default", device=request.param, dtype="float32")


@pytest.fixture(scope="module")
def prompts(bundle):
    tok = bundle.tokenizer

    def chat(text: str) -> list[int]:
        return list(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                            tokenize=True, return_dict=False))
    passage = module_docstring("heapq.py")[:700]
    return {
        "code": tok.encode(code_prompt()),
        # the passage, then its start again: the model goes on copying, so matching fires
        "repeat": tok.encode(passage + "\n\n" + passage[:120]),
        "question": chat(module_docstring("colorsys.py").splitlines()[0] + " Explain what that means."),
    }


@pytest.fixture(scope="module")
def topology_path(tmp_path_factory):
    nodes = [(-1, "root", 0)] + [(i, "spine", 0) for i in range(6)]
    nodes += [(s, "transition", r) for s in range(3) for r in range(4 - s)] + [(7, "transition", 0)]
    path = tmp_path_factory.mktemp("topo") / "spine6.json"
    save_topology(Topology.from_nodes(nodes), path)
    return str(path)


@pytest.fixture(scope="module")
def reference(bundle, prompts):
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.methods import parse_method
    dec = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=NEW_TOKENS))
    return {name: dec.decode(ids).token_ids for name, ids in prompts.items()}


@pytest.mark.parametrize("method", METHODS)
def test_method_matches_ar_exactly(bundle, prompts, reference, topology_path, method):
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.methods import parse_method
    from goose_theory.latency import LatencyProfile
    spec = parse_method(method.removesuffix("-flat"), topology_path=topology_path)
    latency = {"auto": LatencyProfile(**CPU_PROFILE), "auto+prior": LatencyProfile(**CPU_PROFILE),
               "auto+store": LatencyProfile(**CPU_PROFILE), "auto-flat": LatencyProfile(**FLAT_PROFILE)}.get(method)
    dec = Decoder(bundle, spec, DecodeConfig(max_new_tokens=NEW_TOKENS, latency=latency))
    spine_hits, largest, bare, guesses = {}, 0, 0, []
    for name, ids in prompts.items():
        res = dec.decode(ids, prompt_id=name)
        bare += sum(1 for c in res.cycles if len(c.parent) == 1 and c.spine_avail == 0)  # root alone, no match
        largest = max([largest] + [len(c.parent) - 1 for c in res.cycles])
        assert res.token_ids == reference[name], f"{method} diverged from ar on {name}"
        spine_hits[name] = sum(1 for c in res.cycles for src, acc in zip(c.source, c.accepted)
                               if src == "spine" and acc)
        assert sum(c.tau for c in res.cycles) == len(res.token_ids)
        guesses += [c.accepted[i] for c in res.cycles for i in range(1, len(c.parent))
                    if c.source[i] == "transition" and c.rank[i] == dec.config.top_k]  # the store's
    assert all(len(reference[n]) == NEW_TOKENS for n in ("code", "repeat"))  # long enough to mean something
    if method == "goose+prior":
        assert bare == 0  # the prior gave every unmatched cycle candidates, new tokens included
    if spec.store:
        assert sum(guesses) >= 3 and len(guesses) > sum(guesses)  # drafted, and some accepted (a cache copy)
    if method == "auto-flat":
        assert largest >= 30  # the flat profile really made auto verify large trees
    if spec.uses_matcher:
        assert spine_hits["repeat"] >= 10  # context matching fired and its tokens were accepted


@pytest.mark.parametrize("method", ["goose", "auto+store"])
def test_keep_history_is_lossless_and_drafts_from_earlier_prompts(bundle, prompts, reference, method):
    # every prompt twice in a row, the matcher keeping the history: the second time the first
    # pass's text is found again, on the chat question too (where matching within it has little)
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.methods import parse_method
    from goose_theory.latency import LatencyProfile
    dec = Decoder(bundle, parse_method(method), DecodeConfig(max_new_tokens=NEW_TOKENS, keep_history=True,
                                                             latency=LatencyProfile(**CPU_PROFILE)))
    spine_hits = {}
    for round_ in (1, 2):
        for name, ids in prompts.items():
            res = dec.decode(ids, prompt_id=name)
            assert res.token_ids == reference[name], f"{method} with history diverged from ar on {name}"
            spine_hits[round_, name] = sum(1 for c in res.cycles for src, acc in zip(c.source, c.accepted)
                                           if src == "spine" and acc)
    assert spine_hits[2, "question"] >= NEW_TOKENS // 2 > spine_hits[1, "question"]


@pytest.fixture(scope="module")
def other_plan(bundle, prompts):
    """The linear plan this host did not choose, and ar's tokens under it: MKL up to 3 rows where
    the host measured oneDNN everywhere, oneDNN everywhere where it measured a crossover
    (linear_plan), so both plans are proven lossless on every host."""
    from goose_runtime.cpu_speed import set_stock_rows
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.methods import parse_method

    if not bundle.linears or bundle.linears["source"] == "untuned":
        pytest.skip("no tuned linears on this device")
    rows = 0 if bundle.linears["stock_rows"] else 3
    set_stock_rows(bundle.model, rows)
    try:
        ar = Decoder(bundle, parse_method("ar"), DecodeConfig(max_new_tokens=NEW_TOKENS))
        return rows, {name: ar.decode(ids).token_ids for name, ids in prompts.items()}
    finally:
        set_stock_rows(bundle.model, bundle.linears["stock_rows"])


@pytest.mark.parametrize("method", ["pld", "goose", "tr", "auto"])
def test_the_other_linear_plan_is_lossless_too(bundle, prompts, other_plan, method):
    from goose_runtime.cpu_speed import set_stock_rows
    from goose_runtime.config import DecodeConfig
    from goose_runtime.decoder import Decoder
    from goose_runtime.methods import parse_method
    from goose_theory.latency import LatencyProfile

    rows, reference = other_plan
    set_stock_rows(bundle.model, rows)
    try:
        dec = Decoder(bundle, parse_method(method), DecodeConfig(max_new_tokens=NEW_TOKENS,
                                                                 latency=LatencyProfile(**CPU_PROFILE)))
        for name, ids in prompts.items():
            assert dec.decode(ids).token_ids == reference[name], f"{method} diverged from ar on {name}"
    finally:
        set_stock_rows(bundle.model, bundle.linears["stock_rows"])
