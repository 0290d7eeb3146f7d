"""What the explorer's bench scripts share: the timing helper and the spec dump."""
from __future__ import annotations

import json
import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls of ``fn`` after one warm-up call (numba's cached
    kernels, imports, altair's first-use caches)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def write_specs(path: str | None, specs: dict) -> None:
    """Write chart specs (JSON, keys sorted) to ``path`` when one is given: two versions' dumps
    compared with ``cmp`` show whether a change kept the charts."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(specs, fh, sort_keys=True, default=str)
