"""Theory benchmark: Monte Carlo throughput, RNG-bound limit, exact yield and optimizer timings.

Run: ``.venv/bin/python bench/bench_theory.py`` (``make bench``). Prints machine info and one
markdown table; every row is the median over repeats, measured side by side in one run.
Numbers are recorded in docs/bench-theory.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np
from numba import prange

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without install

from goose_theory import _sim_kernels as K  # noqa: E402
from goose_theory._numba import parallel_jit  # noqa: E402
from goose_theory.acceptance import Acceptance  # noqa: E402
from goose_theory.simulate import node_q, simulate, simulate_numpy  # noqa: E402
from goose_theory.topology import Topology  # noqa: E402
from goose_theory.yields import exact_yield  # noqa: E402

P_S, P_T, BUDGET = 0.45, 0.05, 60


# ---- the paper-default tree ----------------------------------------------------------------
def paper_tree(acceptance: Acceptance, budget: int) -> tuple[Topology, str]:
    """The paper rule's tree (goose's, when every node has candidates) and how it was made."""
    from goose_theory.optimize import build_topology
    return build_topology("paper", acceptance, budget=budget).topology, 'build_topology("paper")'


# ---- baselines ---------------------------------------------------------------------------
@parallel_jit
def naive_numba_chunks(cum, start, index, cycles, chunk, seeds, hist):
    """The straightforward loop: numba's own np.random (per-thread state, seeded per chunk),
    float cumulative thresholds; otherwise the same walk as the real kernel."""
    for c in prange(hist.shape[0]):
        np.random.seed(seeds[c])
        counts = np.zeros(hist.shape[1], dtype=np.int64)
        for _ in range(min(chunk, cycles - c * chunk)):
            v, tau = 0, 1
            while start[v] < start[v + 1]:
                u = np.random.random()
                k = start[v]
                while k < start[v + 1] and u >= cum[k]:
                    k += 1
                if k == start[v + 1]:
                    break
                v = index[k]
                tau += 1
            counts[tau] += 1
        hist[c, :] = counts


@parallel_jit
def numba_random_throughput(draws, seeds):
    below = np.zeros(seeds.shape[0], dtype=np.int64)
    for c in prange(seeds.shape[0]):
        np.random.seed(seeds[c])
        hits = 0
        for _ in range(draws):
            hits += np.random.random() < 0.5
        below[c] = hits
    return below.sum()


def run_naive(topo: Topology, acc: Acceptance, cycles: int, seed: int) -> float:
    start, index = topo.children
    cum = K.thresholds(node_q(topo, acc), start, index, cumulative=True) / 2.0 ** 32
    n_chunks = -(-cycles // K.CHUNK_CYCLES)
    seeds = np.random.SeedSequence(seed).generate_state(n_chunks, np.uint32).astype(np.int64)
    hist = np.zeros((n_chunks, int(topo.depth.max()) + 2), dtype=np.int64)
    naive_numba_chunks(cum, start, index, cycles, K.CHUNK_CYCLES, seeds, hist)
    taus = np.arange(hist.shape[1])
    return float(hist.sum(axis=0) @ taus / cycles)


# ---- timing helpers ----------------------------------------------------------------------
def median_time(fn, repeats: int) -> tuple[float, float]:
    """Median wall seconds and median process CPU seconds (all threads) of ``fn()``."""
    fn()  # warm-up: compilation, caches
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def per_call(fn, calls: int, repeats: int) -> float:
    def batch():
        for _ in range(calls):
            fn()
    return median_time(batch, repeats)[0] / calls


def machine_info() -> list[str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [f"- CPU: {model}; cores available: {cores} (os.cpu_count {os.cpu_count()})",
            f"- numba threads: {numba.get_num_threads()} (threading layer {numba.threading_layer()})",
            f"- python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}",
            f"- platform: {platform.platform()}"]


# ---- the benchmark -------------------------------------------------------------------------
def draws_per_cycle(topo: Topology, acc: Acceptance) -> float:
    """Exclusive model: one 32-bit draw per reached node that has children (exact)."""
    start, _ = topo.children
    inner = np.diff(start) > 0
    return float(exact_yield(topo, acc).reach[inner].sum())


def simulator_rows(topo: Topology, acc: Acceptance, cycles: int, repeats: int) -> tuple[list, dict]:
    """Wall-clock rates, plus work per CPU-second (per core busy: robust to other jobs)."""
    rate, cpu = {}, {}

    def measure(key, work, fn):
        wall_s, cpu_s = median_time(fn, repeats)
        rate[key], cpu[key] = work / wall_s, work / cpu_s

    np_cycles = max(cycles // 50, 1)
    ind = acc.with_model("independent")
    n_draws, keys = 1 << 24, np.random.SeedSequence(0).generate_state(64, np.uint64).reshape(16, 4)
    gen, out = np.random.default_rng(0), np.empty(1 << 20)
    measure("numba", cycles, lambda: simulate(topo, acc, cycles=cycles, seed=1))
    measure("independent", cycles, lambda: simulate(topo, ind, cycles=cycles, seed=1))
    measure("naive", cycles, lambda: run_naive(topo, acc, cycles, 1))
    measure("numpy", np_cycles, lambda: simulate_numpy(topo, acc, cycles=np_cycles, seed=1))
    measure("rng_ours", 16 * n_draws, lambda: K.uniform_throughput(n_draws, keys))
    measure("rng_numba", 16 * n_draws, lambda: numba_random_throughput(n_draws, np.arange(16, dtype=np.int64)))
    measure("rng_numpy", 64 * out.size, lambda: [gen.random(out=out) for _ in range(64)])
    per = draws_per_cycle(topo, acc)

    def row(label, key, unit, target, note):
        return (label, f"{rate[key] / 1e6:.1f} M {unit}/s", f"{cpu[key] / 1e6:.1f} M", target, note)

    def limit(rng, key, what):
        return (f"limit {rate[rng] / per / 1e6:.0f} M cycles/s; {what} at "
                f"{rate[key] / (rate[rng] / per):.0%} of it")

    rows = [
        row("(1) numba simulator, exclusive", "numba", "cycles", ">= 50 M/s",
            f"{rate['numba'] / rate['naive']:.2f}x straightforward; {rate['numba'] / rate['numpy']:.1f}x numpy "
            f"(target >= 10x)"),
        row("(1b) numba simulator, independent model", "independent", "cycles", "-", "same tree and p"),
        row("(2) straightforward numba loop (np.random)", "naive", "cycles", "(~24 M/s)", ""),
        row("(3) numpy-vectorised reference (1 thread)", "numpy", "cycles", "-", ""),
        row("(4a) RNG: our xoshiro256** 32-bit uniforms", "rng_ours", "draws", "-", limit("rng_ours", "numba", "(1)")),
        row("(4b) RNG: numba np.random.random()", "rng_numba", "draws", "-", limit("rng_numba", "naive", "(2)")),
        row("(4c) RNG: numpy default_rng().random (1 thread)", "rng_numpy", "draws", "-",
            limit("rng_numpy", "numpy", "(3)")),
    ]
    return rows, {"draws_per_cycle": per}


def exact_and_optimizer_rows(topo: Topology, acc: Acceptance, repeats: int) -> list:
    us = per_call(lambda: exact_yield(topo, acc), 2000, repeats) * 1e6
    rows = [("(5) exact E[tau], B=60 (exact_yield)", f"{us:.1f} us/call", "-", "< 20 us", "prebuilt Topology")]
    try:
        from goose_theory.optimize import build_topology
    except ImportError:
        return rows + [(f"(6) optimal rule, B={b}", "n/a (optimize not available)", "-", target, "")
                       for b, target in ((60, "< 5 ms"), (1000, "< 100 ms"))]
    for b, target, calls in ((60, "< 5 ms", 50), (1000, "< 100 ms", 3)):
        ms = per_call(lambda: build_topology("optimal", acc, budget=b), calls, repeats) * 1e3
        rows.append((f"(6) optimal rule, B={b} (build_topology)", f"{ms:.2f} ms/call", "-", target, ""))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=100_000_000, help="cycles per numba simulator run")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per row (median reported)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]  # other processes on the machine skew every rate below
    acc = Acceptance.parse(P_S, P_T)  # exclusive: 0.45 + 10 * 0.05 <= 1
    topo, how = paper_tree(acc, BUDGET)
    exact = exact_yield(topo, acc)
    sim_rows, extra = simulator_rows(topo, acc, args.cycles, args.repeats)
    rows = sim_rows + exact_and_optimizer_rows(topo, acc, args.repeats)
    print("## Machine")
    print("\n".join(machine_info()))
    print(f"- 1-minute load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"(the run itself adds up to 2 by the end; more means other work competed for the 2 cores)")
    print(f"\n## Tree: paper-default B={topo.budget} via {how}; spine {topo.spine_length}, "
          f"first-level widths {topo.first_level_widths.tolist()}, max depth {int(topo.depth.max())}")
    print(f"p_s={P_S}, p_t={P_T}, exclusive model: exact E[tau] = {exact.expected_tau:.6f}, "
          f"draws per cycle = {extra['draws_per_cycle']:.4f}; {args.cycles:,} cycles per simulator run "
          f"(numpy: {max(args.cycles // 50, 1):,}), median of {args.repeats} repeats\n")
    print("| measurement | wall-clock rate | per CPU-second (one core busy) | target | notes |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
