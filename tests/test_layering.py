"""goose_theory must not import torch, transformers, streamlit or altair (a fresh interpreter proves it)."""
from __future__ import annotations

import pkgutil
import subprocess
import sys

import goose_theory

FORBIDDEN = ("torch", "transformers", "streamlit", "altair")


def test_goose_theory_imports_no_heavy_stack():
    modules = [f"goose_theory.{m.name}" for m in pkgutil.iter_modules(goose_theory.__path__)]
    code = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\nprint(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr.strip().splitlines()[-1:]
    assert out.stdout.strip() == "", f"goose_theory pulled in: {out.stdout.strip()}"
    assert len(modules) >= 5
