"""``goose app``: flag parsing, the streamlit command line, and bad input, without launching
anything (``subprocess.call`` is replaced by a recorder)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from goose_runtime import app_cli
from goose_runtime.cli import build_parser, main


_REAL_CHECK = app_cli.check_listen


def _flags(cmd: list[str]) -> dict[str, str]:
    """The ``--name value`` pairs after the script in a streamlit command line."""
    tail = cmd[cmd.index("run") + 2:]
    assert len(tail) % 2 == 0 and all(k.startswith("--") for k in tail[::2]), tail
    return dict(zip(tail[::2], tail[1::2]))


@pytest.fixture
def launches(monkeypatch):
    """Record each would-be launch instead of starting streamlit; the fake exits with code 0."""
    calls: list[dict] = []

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            calls.append({"cmd": cmd, **kwargs})

        def wait(self):
            return 0
    monkeypatch.setattr(app_cli.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(app_cli, "check_listen", lambda address, port: None)  # no real port: the tests below own that
    return calls


def test_flags_and_defaults_parse_through_the_goose_dispatcher():
    args = build_parser().parse_args(["app"])
    assert (args.port, args.address, args.headless) == (8501, "127.0.0.1", False)
    assert args.handler is app_cli._handler
    args = build_parser().parse_args(["app", "--port", "8502", "--headless", "--address", "0.0.0.0"])
    assert (args.port, args.address, args.headless) == (8502, "0.0.0.0", True)


@pytest.mark.parametrize("headless", [True, False])
def test_streamlit_command_line(headless, tmp_path):
    script = tmp_path / "explorer.py"
    cmd = app_cli.streamlit_command(8600, headless, "10.0.0.5", script=script)
    # this interpreter's streamlit (the venv's), not whatever `streamlit` is first on PATH
    assert cmd[:5] == [sys.executable, "-m", "streamlit", "run", str(script)]
    assert _flags(cmd) == {"--server.port": "8600", "--server.address": "10.0.0.5",
                           "--server.headless": "true" if headless else "false",
                           "--browser.gatherUsageStats": "false"}


def test_goose_app_runs_streamlit_on_the_app_script_from_the_repo_root(launches, capsys):
    assert main(["app", "--port", "8502", "--headless"]) == 0
    assert len(launches) == 1
    call = launches[0]
    assert call["cmd"] == app_cli.streamlit_command(8502, True, "127.0.0.1")
    assert Path(call["cmd"][4]) == app_cli.APP_SCRIPT and app_cli.APP_SCRIPT.is_file()
    assert app_cli.APP_SCRIPT.parts[-2:] == ("app", "explorer.py")
    assert Path(call["cwd"]) == app_cli.APP_SCRIPT.parent.parent  # the repository root: traces/ and app/
    assert call["env"] == dict(os.environ)
    err = capsys.readouterr().err
    assert "http://127.0.0.1:8502" in err and err.count("\n") == 1


def test_streamlits_exit_code_is_passed_on_and_ctrl_c_is_a_clean_stop(monkeypatch):
    class Exits3:
        def __init__(self, cmd, **kw):
            self.waits = 0

        def wait(self):
            return 3
    monkeypatch.setattr(app_cli.subprocess, "Popen", Exits3)
    monkeypatch.setattr(app_cli, "check_listen", lambda address, port: None)
    assert main(["app", "--port", "8597"]) == 3

    class Interrupted(Exits3):
        signalled: list = []

        def wait(self, timeout=None):
            self.waits += 1
            if self.waits == 1:
                raise KeyboardInterrupt
            return -2

        def poll(self):
            return None

        def send_signal(self, signum):
            self.signalled.append(signum)
    monkeypatch.setattr(app_cli.subprocess, "Popen", Interrupted)
    assert main(["app", "--port", "8597"]) == 0
    assert Interrupted.signalled == [signal.SIGINT]  # a SIGINT sent to goose alone is passed on, not left hanging


def test_sigterm_stops_the_server_too(tmp_path):
    """goose app killed with SIGTERM used to leave streamlit serving, orphaned."""
    import signal
    import subprocess
    import time
    child_pid = tmp_path / "pid"
    server = tmp_path / "server.py"  # stands in for streamlit: says who it is, then serves a minute
    server.write_text(f"import os, time\nopen({str(child_pid)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    goose = tmp_path / "goose_app.py"  # goose app's wait, around that server
    goose.write_text(f"import sys\nfrom goose_runtime import app_cli\n"
                     f"sys.exit(app_cli.run_server([sys.executable, {str(server)!r}]))\n")
    proc = subprocess.Popen([sys.executable, str(goose)])
    deadline = time.time() + 60
    while time.time() < deadline and not (child_pid.exists() and child_pid.read_text()):
        time.sleep(0.05)
    pid = int(child_pid.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # the server's end, reported as a shell would
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("address, message", [("", "--address is empty"), ("999.1.1.1", "--address '999.1.1.1'")])
def test_an_address_it_cannot_listen_on_exits_2(launches, capsys, monkeypatch, address, message):
    import socket

    def no_such_name(*args, **kwargs):  # what a resolver answers, without asking one
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    monkeypatch.setattr(app_cli.socket, "getaddrinfo", no_such_name)
    monkeypatch.setattr(app_cli, "check_listen", _REAL_CHECK)
    assert main(["app", "--address", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and launches == []


def test_a_port_in_use_exits_2_before_streamlit_starts(launches, capsys, monkeypatch):
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setattr(app_cli, "check_listen", _REAL_CHECK)  # the fixture's stub, undone
        assert main(["app", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err and launches == []
    _REAL_CHECK("127.0.0.1", port)  # free again once closed: the probe itself holds nothing


@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_a_port_out_of_range_exits_2_naming_it_and_launches_nothing(launches, capsys, port):
    assert main(["app", "--port", port]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--port" in err and port in err
    assert launches == []


def test_a_port_that_is_not_a_number_is_an_argparse_error(launches, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["app", "--port", "http"])
    assert caught.value.code == 2 and "--port" in capsys.readouterr().err and launches == []


def test_a_missing_app_script_exits_2_naming_it(launches, capsys, monkeypatch, tmp_path):
    gone = tmp_path / "app" / "explorer.py"
    monkeypatch.setattr(app_cli, "APP_SCRIPT", gone)
    assert main(["app"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(gone) in err and launches == []
