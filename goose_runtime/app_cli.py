"""``goose app``: start the Streamlit what-if explorer (``app/explorer.py``).

It is a thin wrapper around ``streamlit run``: the app lives in the source tree (``app/`` beside
the packages), so this works from a checkout (``pip install -e .``). Streamlit's own stats
collection is switched off; the server stays on the loopback interface unless told otherwise.

Example:
    goose app --port 8502 --headless
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from goose_theory.cli_util import UsageError

APP_SCRIPT = Path(__file__).resolve().parent.parent / "app" / "explorer.py"


def streamlit_command(port: int, headless: bool, address: str = "127.0.0.1",
                      script: Path = APP_SCRIPT) -> list[str]:
    """The ``streamlit run`` command line that ``goose app`` executes."""
    return [sys.executable, "-m", "streamlit", "run", str(script),
            "--server.port", str(port), "--server.address", address,
            "--server.headless", "true" if headless else "false",
            "--browser.gatherUsageStats", "false"]


def _handler(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port: {args.port} is not a TCP port (1-65535)")
    if not APP_SCRIPT.is_file():
        raise UsageError(f"{APP_SCRIPT}: the app script is missing (goose app needs a source checkout)")
    cmd = streamlit_command(args.port, args.headless, args.address)
    print(f"goose app: http://{args.address}:{args.port}  (Ctrl-C stops it)", file=sys.stderr)
    try:
        # The repository root is the working directory so the app finds traces/ and app/.
        return subprocess.call(cmd, cwd=APP_SCRIPT.parent.parent, env=dict(os.environ))
    except KeyboardInterrupt:
        return 0


def register(subparsers) -> None:
    """Add ``goose app`` to the ``goose`` dispatcher."""
    p = subparsers.add_parser("app", help="start the Streamlit what-if explorer",
                              description="Start the Streamlit what-if explorer (app/explorer.py).")
    p.add_argument("--port", type=int, default=8501, help="TCP port (default 8501)")
    p.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.set_defaults(handler=_handler)
