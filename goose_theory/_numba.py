"""The one place that sets numba options for goose_theory.

Every kernel is compiled with ``cache=True`` so that a fresh process (a CLI call, a test
worker) loads machine code from ``__pycache__`` instead of recompiling for seconds.
``fastmath`` stays off: the exact calculator must agree with brute force to the last digit.
"""
from __future__ import annotations

import numba

jit = numba.njit(cache=True, nogil=True)
"""Decorator for serial kernels."""

parallel_jit = numba.njit(cache=True, nogil=True, parallel=True)
"""Decorator for kernels that use ``numba.prange``."""
