"""Measuring what a speculation tree costs on this device: the library behind ``goose profile-latency``.

- :func:`verify_latency`: seconds of one verification forward of ``n`` tree tokens after a realistic
  prefix in the KV cache (median of ``repeats``, after a warm-up; synchronised on CUDA). The cache is
  cropped back to the prefix after every call, as the decoder does after a cycle.
- :func:`draft_overhead`: per-cycle seconds outside the forward pass (matching, tree building, mask,
  walk, cache compaction, harvesting), from a short real ``goose`` run: a least-squares line
  ``draft_s = a + b * nodes`` over its cycles.
- :func:`profile_latency`: both, as a :class:`goose_theory.latency.LatencyProfile` (the JSON
  ``goose optimize --latency`` reads).

Example:
    >>> from goose_runtime.model import tiny_random_bundle
    >>> seconds = verify_latency(tiny_random_bundle(), sizes=(1, 4), repeats=2, prefix_len=16)
    >>> len(seconds)
    2
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from goose_theory.latency import LatencyProfile

from . import linear_plan

DEFAULT_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
PREFIX_LEN = 256


def _prefix_ids(bundle, prefix_len: int) -> list[int]:
    """Token ids of real code (the first stdlib prompt), repeated up to ``prefix_len``."""
    from .prompts import encode_prompt, load_prompts

    ids = encode_prompt(bundle.tokenizer, load_prompts("stdlib", limit=1)[0])
    ids = (ids * (prefix_len // max(len(ids), 1) + 1))[:prefix_len]
    return [min(i, bundle.model.config.vocab_size - 1) for i in ids]


def ternary_parents(n: int) -> list[int]:
    """Parents of an n-node complete ternary tree (root first): a shape like iso:3's. The forward's
    cost depends on n, not on the shape, but positions and mask follow a real tree all the same."""
    return [-1] + [(i - 1) // 3 for i in range(1, n)]


def depths(parent: list[int]) -> list[int]:
    """Depth of each node of a parents-first tree (root 0)."""
    depth = [0] * len(parent)
    for i in range(1, len(parent)):
        depth[i] = depth[parent[i]] + 1
    return depth


@torch.inference_mode()
def verify_latency(bundle, *, sizes=DEFAULT_SIZES, repeats: int = 5, prefix_len: int = PREFIX_LEN,
                   seed: int = 0) -> tuple[float, ...]:
    """Median seconds of one forward of ``n`` tokens after a ``prefix_len``-token cache, per size.

    Uses the decoder's own pieces (growable KV cache, float tree mask, forward), so the numbers
    are what a cycle's ``verify_s`` measures.
    """
    from .kvcache import cache_for
    from .verify import MaskBuilder, forward

    if repeats < 1 or not sizes or min(sizes) < 1:
        raise ValueError("verify_latency needs repeats >= 1 and sizes >= 1")
    model, device = bundle.model, bundle.device
    masks = MaskBuilder(bundle.dtype, device)
    cache = cache_for(model)
    prefix = torch.tensor(_prefix_ids(bundle, prefix_len), device=device)
    forward(model, prefix, torch.arange(prefix_len, device=device), masks.causal_mask(prefix_len), cache)
    gen = torch.Generator().manual_seed(seed)
    trees = []
    for n in sizes:
        parent = ternary_parents(n)
        depth = depths(parent)
        tokens = torch.randint(0, model.config.vocab_size, (n,), generator=gen).to(device)
        trees.append((n, tokens, torch.tensor(depth, device=device) + prefix_len, parent))
    times: list[list[float]] = [[] for _ in sizes]
    # round-robin over the sizes, so a burst of background load hits every size alike (the ratios
    # between sizes are what auto and the optimiser use); round 0 warms up kernels and the allocator
    for rep in range(repeats + 1):
        for i, (n, tokens, positions, parent) in enumerate(trees):
            bundle.synchronize()
            start = time.perf_counter()
            forward(model, tokens, positions, masks.tree_mask(parent, prefix_len), cache)
            bundle.synchronize()
            if rep:
                times[i].append(time.perf_counter() - start)
            cache.crop(-n)  # back to the prefix, as compaction does after a cycle
    return tuple(statistics.median(t) for t in times)


def draft_overhead(bundle, *, prompt_ids: list[int], max_new_tokens: int = 64,
                   budget: int | None = None) -> tuple[float, float]:
    """(intercept seconds per cycle, seconds per tree node) of the goose draft overhead.

    Fits ``draft_s = a + b * non_root_nodes`` over the cycles of one goose run; with a single tree
    size the slope is 0 and ``a`` is the mean.
    """
    from .config import DecodeConfig
    from .decoder import Decoder
    from .methods import parse_method

    decoder = Decoder(bundle, parse_method("goose", budget=budget), DecodeConfig(max_new_tokens=max_new_tokens))
    result = decoder.decode(prompt_ids, prompt_id="profile", benchmark="profile")
    nodes = np.array([c.n_nodes - 1 for c in result.cycles], dtype=float)
    draft = np.array([c.draft_s for c in result.cycles], dtype=float)
    if len(draft) == 0:
        return 0.0, 0.0
    if np.ptp(nodes) == 0:
        return float(draft.mean()), 0.0
    slope, intercept = np.polyfit(nodes, draft, 1)
    return float(max(intercept, 0.0)), float(max(slope, 0.0))


def with_crossover(sizes, bundle) -> tuple[int, ...]:
    """``sizes`` plus k and k + 1 where the bundle's linears switch from MKL to oneDNN after k rows
    (``bundle.linears``): the cost steps there, and a profile interpolates linearly between sizes."""
    k = (getattr(bundle, "linears", None) or {}).get("stock_rows", 0)
    sizes = set(int(s) for s in sizes)
    if k and min(sizes) <= k < max(sizes):
        sizes |= {k, k + 1}
    return tuple(sorted(sizes))


def profile_latency(bundle, *, sizes=DEFAULT_SIZES, repeats: int = 5, prefix_len: int = PREFIX_LEN,
                    draft_tokens: int = 64, seed: int = 0) -> LatencyProfile:
    """Verification latency per tree size plus the goose draft overhead, as a LatencyProfile.
    The sizes get the linears' crossover added (:func:`with_crossover`)."""
    sizes = with_crossover(sizes, bundle)
    seconds = verify_latency(bundle, sizes=sizes, repeats=repeats, prefix_len=prefix_len, seed=seed)
    from .prompts import encode_prompt, load_prompts

    prompt_ids = encode_prompt(bundle.tokenizer, load_prompts("stdlib", limit=1)[0])
    draft_s, per_node = draft_overhead(bundle, prompt_ids=prompt_ids, max_new_tokens=draft_tokens)
    dtype = str(bundle.dtype).removeprefix("torch.")
    device = torch.cuda.get_device_name(bundle.device) if bundle.device.type == "cuda" else _cpu_name()
    return LatencyProfile(sizes=sizes, seconds=seconds, draft_s=draft_s, draft_s_per_node=per_node,
                          device=device, model=bundle.name, dtype=dtype)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            name = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "cpu")
    except OSError:
        name = "cpu"
    return f"cpu: {name} ({torch.get_num_threads()} threads)"


DEVICE_PROFILE_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
# bumped whenever the forward's cost changes (revision 2: packed tree attention; 3: MKL for the
# fewest rows where it is faster, linear_plan), so no cached profile of an older forward is used
PROFILE_REVISION = 3


def cached_profile_path(bundle, *, dtype: str) -> str:
    """Where :func:`device_profile` caches the profile of this model, device, thread count and dtype."""
    import os

    from .model import _cache_root, cache_label

    from .linear_plan import cpu_digest

    name = cache_label(str(bundle.name))
    # on a CPU the thread count changes the shape of the curve (more threads: wider trees are
    # cheaper), and so does the host: a VM may wake up on another CPU (the digest)
    where = bundle.device.type if bundle.device.type != "cpu" else f"cpu{torch.get_num_threads()}t-{cpu_digest()}"
    return os.path.join(_cache_root(), f"latency-{name}-{where}-{dtype}-r{PROFILE_REVISION}.json")


def device_profile(bundle, *, dtype: str, path: str | None = None, refresh: bool = False,
                   log=None) -> tuple[LatencyProfile, str]:
    """The latency profile of this model on this device: ``path`` if given, else the cached one
    under the goose cache folder (:func:`cached_profile_path`), measured (about 10 s) when it is
    missing or when ``refresh`` is set. Returns the profile and the file it is in ('' for a profile
    measured while the host was busy, :func:`goose_runtime.linear_plan.host_busy`: it serves this
    process but is not cached).

    ``refresh`` re-measures and replaces the cached file (atomically: a run killed while measuring
    leaves the old file whole); the CLIs' ``--refresh-latency``. This VM's speeds drift from day to
    day, and the cost-aware budget follows the profile. With an explicit ``path`` it is an error
    (:class:`goose_theory.latency.LatencyError`): that file is the user's and is never overwritten;
    measure a new one with ``goose profile-latency --out FILE``.
    """
    import os

    from goose_theory.latency import LatencyError, load_latency, save_latency

    if path is not None:  # an empty path is a file given (and refused), never "use the cached one"
        if not path.strip():
            raise LatencyError("the latency profile path is empty")
        if refresh:
            raise LatencyError(f"refresh re-measures the cached profile; it never overwrites the given file {path}")
        return load_latency(path), path
    path = cached_profile_path(bundle, dtype=dtype)
    if not refresh and path in _UNCACHED:  # measured on a busy host earlier in this process
        return _UNCACHED[path], ""
    if os.path.exists(path) and not refresh:
        if log:  # the machine's speeds drift (a VM's from day to day): say how old the profile is
            hours = max(0.0, (time.time() - os.path.getmtime(path)) / 3600)
            log(f"using the cached latency profile {path}, measured {hours:.1f} h ago "
                "(--refresh-latency re-measures it)")
        return load_latency(path), path
    if log:
        log("re-measuring verification latency against tree size on this device (--refresh-latency)" if refresh
            else "measuring verification latency against tree size on this device (once; cached)")
    busy = linear_plan.host_busy()
    profile = profile_latency(bundle, sizes=DEVICE_PROFILE_SIZES, repeats=5)
    if busy:  # timings taken beside other work would price every later run's trees wrongly, as a busy plan did
        _UNCACHED[path] = profile
        if log:  # with --refresh-latency an older cached profile may be there: it stays, and the next run reads it
            after = ("the cached one stays; --refresh-latency on a quiet host replaces it" if os.path.exists(path)
                     else "the next run on a quiet host measures again")
            log("note: the host was busy (load average above its core count) while the latency profile was "
                f"measured: this run uses it, but it is not cached ({after})")
        return profile, ""
    save_latency(profile, path)  # atomic: temp file beside it, then rename over the old one
    return profile, path


_UNCACHED: dict[str, LatencyProfile] = {}  # cache path -> a profile measured on a busy host, for this process only
