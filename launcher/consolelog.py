"""The launcher pod's `guest-console-log` container (KubeVirt's virt-tail): it copies the
guest's serial console log, which QEMU appends to in the pod's private volume, to its own
stdout from the first byte, so `kubectl logs <pod> -c guest-console-log` shows the guest's
boot while the console socket stays free for `virtctl console`.

It ends on its own once the launcher is gone (its command socket, once seen, vanished or
refuses connections; or never came within `--startup-timeout`), so the pod completes with
the launcher, and on SIGTERM; either way after copying what is left of the log.

    python3 -m launcher.consolelog --log FILE --socket SOCK [--socket SOCK2 ...]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from shared import podlayout

CHUNK = 64 * 1024
DEFAULT_LOG = Path(podlayout.PRIVATE_DIR) / podlayout.SERIAL_LOG
DEFAULT_SOCKETS = tuple(
    Path(podlayout.SOCKETS_DIR) / name
    for name in (podlayout.LAUNCHER_SOCKET, podlayout.LAUNCHER_INIT_SOCKET)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    log: Path = DEFAULT_LOG
    sockets: tuple[Path, ...] = DEFAULT_SOCKETS
    poll: float = 0.5  # seconds between reads when the log has nothing new
    probe_every: float = 5.0  # seconds between connection checks of the launcher's socket
    startup_timeout: float = 300.0  # the launcher's socket must show up within this


def launcher_alive(sockets: Sequence[Path], *, timeout: float = 1.0) -> bool | None:
    """True: a launcher socket accepts connections (or is too busy to answer at once);
    False: the ones there refuse (the launcher died); None: none exists (not yet, or
    removed at a clean exit)."""
    present = [s for s in sockets if s.exists()]
    if not present:
        return None
    for path in present:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                continue
            except OSError:  # a timeout or a full backlog: someone is there
                return True
            return True
    return False


@dataclass(slots=True)
class Follower:
    """Copies new bytes of one file to `out`, reopening it when it is replaced or cut."""

    path: Path
    out: BinaryIO
    _file: BinaryIO | None = None
    _inode: int | None = field(default=None)

    def pump(self) -> int:
        """Copy everything new; the number of bytes copied."""
        self._reopen_if_replaced()
        if self._file is None:
            return 0
        copied = 0
        while chunk := self._file.read(CHUNK):
            self.out.write(chunk)
            copied += len(chunk)
        if copied:
            self.out.flush()
        return copied

    def _reopen_if_replaced(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if self._file is not None and st.st_ino == self._inode:
            if st.st_size < self._file.tell():  # truncated: start over
                self._file.seek(0)
            return
        if self._file is not None:
            self.pump_rest_and_close()
        self._file = self.path.open("rb")
        self._inode = st.st_ino

    def pump_rest_and_close(self) -> None:
        if self._file is None:
            return
        while chunk := self._file.read(CHUNK):
            self.out.write(chunk)
        self.out.flush()
        self._file.close()
        self._file = None


def run(options: Options, *, out: BinaryIO, stop: threading.Event) -> None:
    """Follow the log until the launcher is gone or `stop` is set."""
    follower = Follower(options.log, out)
    started = time.monotonic()
    seen = False
    next_probe = 0.0
    while not stop.is_set():
        if follower.pump():
            continue
        now = time.monotonic()
        if now >= next_probe:
            next_probe = now + options.probe_every
            alive = launcher_alive(options.sockets)
            if alive:
                seen = True
            elif (seen and not alive) or (not seen and now - started > options.startup_timeout):
                break
        stop.wait(options.poll)
    follower.pump()
    follower.pump_rest_and_close()


def _parse(argv: Sequence[str] | None) -> Options:
    p = argparse.ArgumentParser(prog="consolelog", description=__doc__)
    p.add_argument("--log", type=Path, default=DEFAULT_LOG)
    p.add_argument("--socket", type=Path, action="append", dest="sockets")
    p.add_argument("--startup-timeout", type=float, default=300.0)
    ns = p.parse_args(argv)
    sockets = tuple(ns.sockets) if ns.sockets else DEFAULT_SOCKETS
    return Options(log=ns.log, sockets=sockets, startup_timeout=ns.startup_timeout)


def main(argv: Sequence[str] | None = None) -> None:
    options = _parse(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _sig, _frame: stop.set())
    with contextlib.suppress(BrokenPipeError):
        run(options, out=sys.stdout.buffer, stop=stop)


if __name__ == "__main__":
    main()
