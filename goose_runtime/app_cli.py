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
import signal
import socket
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


def check_listen(address: str, port: int) -> None:
    """The address resolves and the port is free there (streamlit would say so in a traceback, or in
    two lines with exit code 1); an empty address would listen on every interface."""
    if not address.strip():
        raise UsageError("--address is empty (it would listen on every interface; say 0.0.0.0 to mean that)")
    try:
        found = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--address {address!r}: {exc.strerror}") from None
    problem = None
    for family, kind, proto, _, where in found:  # as the server does: the first address that binds
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as tornado: TIME_WAIT is no obstacle
                probe.bind(where)
                return
        except OSError as exc:
            problem = problem or exc.strerror
    raise UsageError(f"cannot listen on {address}:{port}: {problem}")


def run_server(cmd: list[str]) -> int:
    """Run streamlit from the repository root (so the app finds traces/ and app/) and wait; a SIGTERM
    to goose is passed on, so stopping goose stops the server instead of orphaning it."""
    proc = subprocess.Popen(cmd, cwd=APP_SCRIPT.parent.parent, env=dict(os.environ))
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        code = proc.wait()
        return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it
    except KeyboardInterrupt:  # a terminal's Ctrl-C reached streamlit too; `kill -INT goose` did not
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _handler(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port: {args.port} is not a TCP port (1-65535)")
    if not APP_SCRIPT.is_file():
        raise UsageError(f"{APP_SCRIPT}: the app script is missing (goose app needs a source checkout)")
    check_listen(args.address, args.port)
    cmd = streamlit_command(args.port, args.headless, args.address)
    print(f"goose app: http://{args.address}:{args.port}  (Ctrl-C stops it)", file=sys.stderr)
    return run_server(cmd)


def register(subparsers) -> None:
    """Add ``goose app`` to the ``goose`` dispatcher."""
    p = subparsers.add_parser("app", help="start the Streamlit what-if explorer",
                              description="Start the Streamlit what-if explorer (app/explorer.py).")
    p.add_argument("--port", type=int, default=8501, help="TCP port (default 8501)")
    p.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.set_defaults(handler=_handler)
