"""``auto``: the theory's cost-aware optimal tree, chosen online every cycle.

The paper fixes the budget (B = 60) and the shape (BuildSpineTree). On a CPU a 60-node forward
costs several decode steps, so a fixed big tree loses to plain decoding where acceptance is low.
``auto`` closes the loop inside the decoder instead:

1. it keeps EMAs (smoothing 0.3, like the paper's) of what the walk observes on *reached*
   nodes: spine acceptance p_s, rank-0 transition acceptance under the root, under spine nodes
   and under transition nodes (they differ several-fold in real traces), and the acceptance of
   the other ranks;
2. each cycle, with L = the tokens the context matcher offers now, it asks ``goose_theory``
   for the tree that maximises E[tau] / (verification time + draft time) over the budgets of the
   device's latency profile, under the independent model with p_s for the first L spine depths
   (no spine past what the matcher offers) and per-parent p_t = (rank 0, rest, rest, ...);
   budget 0 is a plain decoding step, so trees that cannot pay for themselves are not built;
3. the chosen topology is filled like ``topology:FILE`` (spine slots from the match, transition
   slots from the adjacency table).

Decisions are cached on the quantised state (p_s to 0.05, rank-0 p_t to 0.1, the rest to 0.02, L
bucketed) in a dictionary the decoder keeps across prompts, so most decisions are lookups.

Example:
    >>> from goose_theory.latency import LatencyProfile
    >>> steep = LatencyProfile(sizes=(1, 2, 64), seconds=(0.04, 0.08, 1.0))
    >>> AutoPolicy(steep, p_t_root=0.2).choose(match_len=0).budget   # costly trees: plain decoding
    0
"""
from __future__ import annotations

from dataclasses import dataclass, field

from goose_theory.acceptance import Acceptance
from goose_theory.latency import LatencyProfile
from goose_theory.optimize import build_topology
from goose_theory.topology import SPINE, Topology

L_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 20)


def _bucket_len(match_len: int) -> int:
    return max(b for b in L_BUCKETS if b <= match_len)


@dataclass
class AutoPolicy:
    """Online acceptance estimates plus the cost-aware tree choice (one per prompt)."""

    latency: LatencyProfile
    top_k: int = 10
    max_depth: int = 6
    max_spine: int = 20
    alpha: float = 0.3
    max_budget: int = 63
    p_s: float = 0.5          # starting guesses, near what fits of the shipped traces give
    p_t_root: float = 0.35    # (rank 0 under root / spine / transition: 0.32-0.49, 0.04-0.27,
    p_t_spine: float = 0.1    # 0.51-0.63; ranks >= 1: 0.02-0.09); the EMAs move within a few cycles
    p_t_chain: float = 0.5
    p_t_rest: float = 0.05
    _choices: dict = field(default_factory=dict, repr=False)

    def choose(self, *, match_len: int) -> Topology:
        """The cost-aware optimal topology for the current estimates and match length."""
        key = (round(self.p_s * 20), round(self.p_t_root * 10), round(self.p_t_spine * 10),
               round(self.p_t_chain * 10), round(self.p_t_rest * 50), min(_bucket_len(match_len), self.max_spine))
        topo = self._choices.get(key)
        if topo is None:
            topo = _best_tree(self.latency, key, self.top_k, self.max_depth, self.max_budget)
            self._choices[key] = topo
        return topo

    def observe(self, parent: list[int], source: list[int], rank: list[int], token: list[int],
                argmax: list[int], path: list[int]) -> None:
        """Fold one cycle's reached nodes (parent on the accepted ``path``) into the three EMAs;
        a reached node matched when its token is the target's argmax at its parent."""
        on_path = set(path)
        names = ("p_t_root", "p_t_spine", "p_t_chain")
        counts = {name: [0, 0] for name in ("p_s", *names, "p_t_rest")}
        for i in range(1, len(parent)):
            p = parent[i]
            if p not in on_path:
                continue
            kind = "p_s" if source[i] == SPINE else (names[source[p]] if rank[i] == 0 else "p_t_rest")
            counts[kind][0] += 1
            counts[kind][1] += token[i] == argmax[p]
        for attr, (reached, hits) in counts.items():
            if reached:
                setattr(self, attr, (1 - self.alpha) * getattr(self, attr) + self.alpha * hits / reached)


def _best_tree(latency: LatencyProfile, key: tuple, top_k: int, max_depth: int, max_budget: int) -> Topology:
    ps_q, root_q, spine_q, chain_q, rest_q, spine = key
    rest = [min(rest_q / 50, 1.0)] * (top_k - 1)
    acceptance = Acceptance.parse(ps_q / 20, [root_q / 10] + rest, "independent",
                                  p_t_spine=[spine_q / 10] + rest, p_t_chain=[chain_q / 10] + rest)
    top = min(max(latency.sizes) - 1, max_budget)
    # budget 0 is a plain decoding step: one token per forward of the anchor alone
    best, best_rate = Topology.root_only(max_depth=max_depth, max_spine=spine), 1.0 / latency.verify_seconds(1)
    for budget in _candidate_budgets(top):
        result = build_topology("optimal", acceptance, budget=budget, max_depth=max_depth,
                                max_spine=spine, top_k=top_k)
        rate = result.predicted_tau / latency.cycle_seconds(result.topology.budget)
        if rate > best_rate:
            best, best_rate = result.topology, rate
    return best


CANDIDATE_BUDGETS = (1, 2, 3, 4, 6, 8, 11, 15, 20, 24, 31, 40, 47, 63)


def _candidate_budgets(top: int) -> list[int]:
    """A grid that is dense where trees are cheap: a cold decision costs a few ms."""
    return [b for b in CANDIDATE_BUDGETS if b <= top]
