"""The guest-console-log follower: copies the serial log from its first byte as it grows,
ends once the launcher's socket (seen before) is gone or refuses, and on a stop request,
copying what is left first."""

from __future__ import annotations

import io
import socket
import threading
from pathlib import Path

from launcher.consolelog import Follower, Options, launcher_alive, run


def test_follower_copies_growth_and_restarts_after_truncation(tmp_path: Path) -> None:
    """New bytes are copied as they come; a truncated log is read again from the start."""
    log = tmp_path / "serial.log"
    out = io.BytesIO()
    follower = Follower(log, out)
    assert follower.pump() == 0  # no log yet
    log.write_bytes(b"KUBEVIRT-PY-GUEST-BOOTED\n")
    follower.pump()
    with log.open("ab") as f:
        f.write(b"tick 1\n")
    follower.pump()
    assert out.getvalue() == b"KUBEVIRT-PY-GUEST-BOOTED\ntick 1\n"
    log.write_bytes(b"new\n")
    follower.pump()
    assert out.getvalue().endswith(b"new\n")


def test_launcher_alive_states(tmp_path: Path) -> None:
    """None without a socket file, True while it accepts, False once it refuses."""
    path = tmp_path / "launcher-sock"
    assert launcher_alive([path]) is None
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    assert launcher_alive([path]) is True
    server.close()  # the file stays: a killed launcher
    assert launcher_alive([path]) is False


def test_run_ends_when_the_launcher_goes(tmp_path: Path) -> None:
    """Seen alive, then its socket refuses: the follower copies the rest and returns."""
    log = tmp_path / "serial.log"
    log.write_bytes(b"booted\n")
    path = tmp_path / "launcher-sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(128)
    out = io.BytesIO()
    options = Options(log=log, sockets=(path,), poll=0.01, probe_every=0.01)
    stop = threading.Event()
    worker = threading.Thread(target=run, args=(options,), kwargs={"out": out, "stop": stop})
    worker.start()
    try:
        while b"booted" not in out.getvalue():
            stop.wait(0.01)
        stop.wait(0.3)  # a few probes see the launcher alive
        with log.open("ab") as f:
            f.write(b"last words\n")
        server.close()
        worker.join(timeout=10)
        assert not worker.is_alive()
    finally:
        stop.set()
        worker.join()
    assert out.getvalue() == b"booted\nlast words\n"


def test_run_ends_on_stop_and_without_a_launcher(tmp_path: Path) -> None:
    """A stop request ends it; so does a launcher socket that never shows up in time."""
    log = tmp_path / "serial.log"
    log.write_bytes(b"x\n")
    stop = threading.Event()
    stop.set()
    out = io.BytesIO()
    run(Options(log=log, sockets=(tmp_path / "none",)), out=out, stop=stop)
    assert out.getvalue() == b"x\n"
    options = Options(log=log, sockets=(tmp_path / "none",), poll=0.01, startup_timeout=0.0)
    run(options, out=io.BytesIO(), stop=threading.Event())
