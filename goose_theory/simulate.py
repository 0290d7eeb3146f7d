"""Monte Carlo simulation of verification cycles: tau's mean, std, 95% CI and histogram.

Each cycle walks the tree from the root like UnifiedGreedyWalk:

* ``exclusive`` model: at a reached node one uniform picks at most one child, child c with
  probability q(c) (cumulative thresholds in priority order); no child -> the cycle ends.
* ``independent`` model: one Bernoulli(q(c)) per child in priority order (spine first, then
  transition by rank); the first success is taken. This deliberately does *not* reuse
  :func:`goose_theory.yields` (its ``qeff``), so agreement with
  :func:`~goose_theory.yields.exact_yield` is an independent check of the closed form.

tau = 1 + number of accepted nodes (the bonus token included). The work runs in parallel over
fixed chunks of cycles, each with its own RNG stream seeded from ``np.random.SeedSequence(seed)``,
so a (topology, acceptance, cycles, seed) gives bit-identical results whatever the thread count.
:func:`simulate_bursty` adds a two-state Markov regime (repetitive / novel text) with its own
p_s per state: a model with no closed form that shows what correlation does to tau.

Example:
    >>> from goose_theory.topology import Topology
    >>> from goose_theory.acceptance import Acceptance
    >>> chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
    >>> r = simulate(chain, Acceptance.parse(0.5, 0.1), cycles=200_000, seed=1)
    >>> abs(r.mean - 1.75) < 4 * r.std / r.cycles ** 0.5   # exact: 1 + 0.5 + 0.25
    True
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from . import _sim_kernels as K
from .acceptance import Acceptance, AcceptanceError
from .topology import SPINE, Topology
from .yields import exact_yield

Z95 = 1.959963984540054  # two-sided 95% normal quantile


class SimulationError(AcceptanceError):
    """Bad simulation parameters (cycles, seed, regime); the message is one line. A subclass of
    AcceptanceError (a ValueError) so that the CLI's bad-input handling reports it as such."""


@dataclass(frozen=True)
class SimulationResult:
    """Summary of ``cycles`` simulated verification cycles."""

    mean: float
    std: float  # sample standard deviation of tau (ddof = 1; 0 for a single cycle)
    ci95: tuple[float, float]  # normal approximation: mean +- 1.96 std / sqrt(cycles)
    cycles: int
    histogram: np.ndarray  # int64; histogram[k] = number of cycles with tau == k
    model: str
    seed: int


def check_cycles_seed(cycles: object, seed: object) -> tuple[int, int]:
    """Validate ``cycles >= 1`` and a non-negative integer ``seed``; one-line errors."""
    for name, value, low in (("cycles", cycles, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise SimulationError(f"{name}: must be an integer >= {low}, got {value!r}")
    return int(cycles), int(seed)  # type: ignore[arg-type]


def node_q(topology: Topology, acceptance: Acceptance, p_s: float | None = None) -> np.ndarray:
    """q(v) of every node straight from the acceptance rules (root 1); ``p_s`` overrides it."""
    q = np.ones(topology.n_nodes)
    for v in range(1, topology.n_nodes):
        if topology.source[v] == SPINE:
            q[v] = acceptance.spine_q(int(topology.depth[v])) if p_s is None else p_s
        else:
            q[v] = acceptance.transition_q(topology.rank[v], topology.source[topology.parent[v]])
    return q


def chunk_keys(seed: int, cycles: int) -> np.ndarray:
    """The 256-bit xoshiro state of every chunk, shape (n_chunks, 4), from SeedSequence(seed)."""
    n_chunks = -(-cycles // K.CHUNK_CYCLES)
    return np.random.SeedSequence(seed).generate_state(4 * n_chunks, np.uint64).reshape(n_chunks, 4)


def summarize(hist: np.ndarray, model: str, seed: int, inflation: float = 1.0) -> SimulationResult:
    """Mean, std and CI from an integer histogram; ``inflation`` scales the variance of the
    mean (1 for independent cycles, > 1 for positively correlated ones)."""
    hist = np.asarray(hist, dtype=np.int64)
    taus = np.arange(hist.shape[0], dtype=np.int64)
    n = int(hist.sum())
    total, total_sq = int(hist @ taus), int(hist @ (taus * taus))  # exact integers
    mean = total / n
    var = (total_sq - total * total / n) / (n - 1) if n > 1 else 0.0
    std = math.sqrt(max(var, 0.0))
    half = Z95 * std * math.sqrt(max(inflation, 0.0) / n)
    # clipped to what tau can be (1 .. the deepest path + 1): 2 cycles gave [0.08, 7.92]
    low, high = max(mean - half, 1.0), min(mean + half, float(hist.shape[0] - 1))
    return SimulationResult(mean, std, (low, high), n, hist, model, seed)


def simulate(topology: Topology, acceptance: Acceptance, *, cycles: int, seed: int) -> SimulationResult:
    """Simulate ``cycles`` verification cycles of ``topology`` (numba, parallel, reproducible).

    Raises :class:`~goose_theory.yields.ExclusiveModelError` exactly when ``exact_yield`` does,
    and :class:`SimulationError` for ``cycles < 1`` or a bad seed.
    """
    cycles, seed = check_cycles_seed(cycles, seed)
    if not acceptance.independent:
        exact_yield(topology, acceptance)  # the same q-sum check and message as the calculator
    start, index = topology.children
    thr = K.thresholds(node_q(topology, acceptance), start, index, cumulative=not acceptance.independent)
    keys = chunk_keys(seed, cycles)
    hist = np.zeros((keys.shape[0], int(topology.depth.max()) + 2), dtype=np.int64)
    K.simulate_chunks(thr, start, index, acceptance.independent, cycles, keys, hist)
    return summarize(hist.sum(axis=0), acceptance.model, seed)


def simulate_numpy(topology: Topology, acceptance: Acceptance, *, cycles: int, seed: int,
                   batch: int = 1 << 16) -> SimulationResult:
    """The same model with plain numpy, vectorised over cycles (a reference for tests and the
    benchmark; single-threaded; its random stream differs from :func:`simulate`'s)."""
    cycles, seed = check_cycles_seed(cycles, seed)
    if not acceptance.independent:
        exact_yield(topology, acceptance)
    q = node_q(topology, acceptance)
    start, index = topology.children
    width = max(int(np.diff(start).max(initial=0)), 1)
    kids = np.full((topology.n_nodes, width), -1, dtype=np.int64)  # padded child table
    kid_q = np.zeros((topology.n_nodes, width))
    for v in range(topology.n_nodes):
        block = index[start[v]:start[v + 1]]
        kids[v, :block.size], kid_q[v, :block.size] = block, q[block]
    cum = np.where(kids >= 0, np.cumsum(kid_q, axis=1), np.inf)  # padding is never chosen
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    hist = np.zeros(int(topology.depth.max()) + 2, dtype=np.int64)
    for lo in range(0, cycles, batch):
        taus = _numpy_batch(min(batch, cycles - lo), kids, kid_q, cum, acceptance.independent, rng)
        hist += np.bincount(taus, minlength=hist.shape[0])
    return summarize(hist, acceptance.model, seed)


def _numpy_batch(n: int, kids, kid_q, cum, independent: bool, rng: np.random.Generator) -> np.ndarray:
    """tau of ``n`` cycles, stepping all still-walking cycles down one level at a time."""
    node = np.zeros(n, dtype=np.int64)
    tau = np.ones(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        v = node[alive]
        if independent:
            hit = rng.random((alive.size, kids.shape[1])) < kid_q[v]
            pos = np.where(hit.any(axis=1), hit.argmax(axis=1), kids.shape[1])
        else:
            pos = (rng.random(alive.size)[:, None] >= cum[v]).sum(axis=1)
        moved = pos < kids.shape[1]
        child = kids[v[moved], pos[moved]]
        ok = child >= 0
        alive = alive[moved][ok]
        node[alive] = child[ok]
        tau[alive] += 1
    return tau


@dataclass(frozen=True)
class BurstyRegime:
    """A two-state Markov regime over consecutive verification cycles: repetitive text (high
    spine acceptance) and novel text (low), each with its own scalar p_s.

    Example:
        >>> BurstyRegime(0.8, 0.1, to_novel=0.02, to_repetitive=0.06).stationary_repetitive
        0.75
    """

    p_s_repetitive: float
    p_s_novel: float
    to_novel: float  # P(repetitive -> novel) per cycle
    to_repetitive: float  # P(novel -> repetitive) per cycle

    def __post_init__(self) -> None:
        for name in ("p_s_repetitive", "p_s_novel", "to_novel", "to_repetitive"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise SimulationError(f"{name}: {value!r} is not a probability in [0, 1]")
            object.__setattr__(self, name, float(value))
        if self.to_novel + self.to_repetitive == 0.0:
            raise SimulationError("to_novel and to_repetitive are both 0: the regime never switches, "
                                  "so it has no stationary distribution")

    @property
    def stationary_repetitive(self) -> float:
        """Long-run share of cycles in the repetitive state."""
        return self.to_repetitive / (self.to_novel + self.to_repetitive)

    @property
    def persistence(self) -> float:
        """lambda = 1 - to_novel - to_repetitive: corr(state_t, state_t+k) = lambda**k."""
        return 1.0 - self.to_novel - self.to_repetitive


@dataclass(frozen=True)
class BurstyResult(SimulationResult):
    """A bursty run. ``ci95`` accounts for the correlation between cycles: the variance of the
    mean is inflated by 1 + 2 r1 / (1 - lambda) (r1 = measured lag-1 autocorrelation of tau,
    lambda = :attr:`BurstyRegime.persistence`; exact for this chain, whose lag-k
    autocorrelation is r1 * lambda**(k-1))."""

    fraction_repetitive: float
    lag1_autocorrelation: float  # NaN when undefined (tau constant, or single-cycle chunks)
    iid_mixture_tau: float  # exact E[tau] of the stationary mixture, for contrast


def simulate_bursty(topology: Topology, acceptance: Acceptance, regime: BurstyRegime, *,
                    cycles: int, seed: int) -> BurstyResult:
    """Simulate cycles whose spine acceptance follows ``regime`` (p_t and the model come from
    ``acceptance``; its p_s is replaced by the regime's per-state scalar). Every chunk of
    cycles starts its regime chain from the stationary distribution.

    Example:
        >>> from goose_theory.topology import Topology
        >>> chain = Topology.from_nodes([(-1, "root", 0), (0, "spine", 0), (1, "spine", 0)])
        >>> regime = BurstyRegime(0.9, 0.1, to_novel=0.05, to_repetitive=0.05)
        >>> r = simulate_bursty(chain, Acceptance.parse(0.5, 0.1), regime, cycles=100_000, seed=3)
        >>> r.lag1_autocorrelation > 0.3, r.ci95[0] < r.iid_mixture_tau < r.ci95[1]
        (True, True)
    """
    cycles, seed = check_cycles_seed(cycles, seed)
    p_states = (regime.p_s_repetitive, regime.p_s_novel)
    exact = [exact_yield(topology, replace(acceptance, p_s=(p,))).expected_tau
             for p in p_states]  # also the exclusive model's q-sum check, per state
    pi = regime.stationary_repetitive
    start, index = topology.children
    thr = np.stack([K.thresholds(node_q(topology, acceptance, p_s=p), start, index,
                                 cumulative=not acceptance.independent) for p in p_states])
    leave = K.thresholds(np.array([regime.to_novel, regime.to_repetitive]), np.array([0, 2]),
                         np.arange(2), cumulative=False)
    start_rep = K.thresholds(np.array([pi]), np.array([0, 1]), np.arange(1), cumulative=False)[0]
    keys = chunk_keys(seed, cycles)
    hist = np.zeros((keys.shape[0], int(topology.depth.max()) + 2), dtype=np.int64)
    stats = np.zeros((keys.shape[0], 4), dtype=np.int64)
    K.simulate_bursty_chunks(thr, start, index, acceptance.independent, leave, start_rep,
                             cycles, keys, hist, stats)
    r1 = _lag1(hist, stats)
    inflation = 1.0 if math.isnan(r1) else 1.0 + 2.0 * r1 / (1.0 - regime.persistence)
    base = summarize(hist.sum(axis=0), acceptance.model, seed, inflation=inflation)
    return BurstyResult(**vars(base), fraction_repetitive=int(stats[:, 0].sum()) / cycles,
                        lag1_autocorrelation=r1, iid_mixture_tau=pi * exact[0] + (1 - pi) * exact[1])


def _lag1(hist: np.ndarray, stats: np.ndarray) -> float:
    """Lag-1 autocorrelation of tau over the pairs of consecutive cycles inside each chunk."""
    taus = np.arange(hist.shape[1], dtype=np.int64)
    n_c, sum_c, sq_c = hist.sum(axis=1), hist @ taus, hist @ (taus * taus)
    pairs = int((n_c - 1).sum())
    if pairs == 0:
        return math.nan
    sx = int((sum_c - stats[:, 3]).sum())  # the first element of each pair
    sy = int((sum_c - stats[:, 2]).sum())  # the second element
    cov = int(stats[:, 1].sum()) / pairs - (sx / pairs) * (sy / pairs)
    n, total = int(n_c.sum()), int(sum_c.sum())
    var = int(sq_c.sum()) / n - (total / n) ** 2
    return cov / var if var > 0 else math.nan


__all__ = ["SimulationResult", "SimulationError", "simulate", "simulate_numpy",
           "BurstyRegime", "BurstyResult", "simulate_bursty"]
