"""Two-regime topologies in the runtime: one tree when the context matcher offers a spine, another
when it offers nothing.

A fixed ``topology:FILE`` loses every spine slot (with its subtree) in a cycle without a context
match, which on the shipped traces is 70-96% of cycles; the paper's ``goose`` re-plans instead.
A topology file may carry ``"regimes": {"unmatched": {"nodes": [...]}}`` (written by ``goose
loop``; see :mod:`goose_theory.regime`): :class:`RegimeDecoder` drafts that tree in unmatched
cycles and the file's own tree otherwise. A plain ``topology:FILE`` ignores the key.

This lives outside :mod:`goose_runtime.decoder` until the lead wires it in: the change there is
one branch in ``Decoder._build`` for ``kind == "topology"`` (see :meth:`RegimeDecoder._build`),
and ``run_methods`` would then need nothing of this module.
"""
from __future__ import annotations

import dataclasses

from goose_theory.topology import Topology, topology_from_dict

from .decoder import Decoder
from .matcher import NO_MATCH
from .trees import DraftTree, build_from_topology, new_tree

SUFFIX = "+regimes"


def unmatched_topology(topology: Topology | None) -> Topology | None:
    """The tree a topology file asks for in cycles without a context match (None: none given)."""
    if topology is None:
        return None
    spec = (topology.meta.get("regimes") or {}).get("unmatched")
    if not spec:
        return None
    return topology_from_dict({"schema": "goose-topology/1", **spec})


class RegimeDecoder(Decoder):
    """A :class:`Decoder` whose ``topology`` method switches to the file's unmatched tree when the
    matcher offers nothing (lossless like every tree: the walk only keeps verified tokens)."""

    def __init__(self, bundle, method, config) -> None:
        super().__init__(bundle, method, config)
        self.unmatched = unmatched_topology(method.topology) if method.kind == "topology" else None

    def _build(self, tokens: list[int], matcher) -> DraftTree:
        if self.unmatched is None or matcher is None:
            return super()._build(tokens, matcher)
        anchor = tokens[-1]
        before = tokens[-2] if len(tokens) > 1 else -1
        match = matcher.match()
        if len(match) == 0:
            return build_from_topology(self.unmatched, NO_MATCH, self.adjacency, before, anchor,
                                       budget=self.method.budget)
        if self.method.budget == 0:
            return new_tree(anchor, match)
        return build_from_topology(self.method.topology, match, self.adjacency, before, anchor,
                                   budget=self.method.budget)


def run_with_regimes(bundle, specs: list, prompts: list, *, config, on_result=None) -> dict:
    """:func:`goose_runtime.runner.run_methods` with a :class:`RegimeDecoder` per topology spec
    that carries an unmatched tree (labelled ``<label>+regimes``); the others as usual. Prompts
    outer, methods inner, one warm-up, as run_methods does."""
    from .methods import parse_method
    from .runner import encode_all, method_label

    ids = encode_all(bundle, prompts, max_new_tokens=config.max_new_tokens,
                     margin=max(config.max_spine, config.max_depth) + 2)
    if ids:
        warm = dataclasses.replace(config, max_new_tokens=min(8, config.max_new_tokens), record=False)
        Decoder(bundle, parse_method("ar"), warm).decode(ids[0][-64:], prompt_id="warmup", benchmark="warmup")
    decoders: dict[str, Decoder] = {}
    for s in specs:
        label = method_label(s)
        if unmatched_topology(s.topology if s.kind == "topology" else None) is not None:
            decoders.setdefault(label + SUFFIX, RegimeDecoder(bundle, s, config))
        else:
            decoders.setdefault(label, Decoder(bundle, s, config))
    results: dict[str, list] = {label: [] for label in decoders}
    for prompt, prompt_ids in zip(prompts, ids):
        for label, decoder in decoders.items():
            result = decoder.decode(prompt_ids, prompt_id=prompt.id, benchmark=prompt.benchmark)
            results[label].append(dataclasses.replace(result, method=label))
            if on_result is not None:
                on_result(results[label][-1])
    return results
