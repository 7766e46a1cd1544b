"""Clean stops for the benchmarks that start processes of their own, without a cluster
(scripts/bench-launcher, scripts/bench-migration): launchers, their libvirtds and QEMUs,
raw floor daemons, an echo server.

Every directory such a benchmark works in is made under one scratch root (a fresh
/tmp/kvbench-* dir, or $KVPY_BENCH_SCRATCH when set: the stop tests name it), and every
process it starts names a path under that root on its command line (launchers their
private dir, libvirtd its config, QEMU its serial log and disks). `stopping()` installs
localkube.stopping's handlers, so SIGTERM, SIGINT or SIGHUP unwind the benchmark through
its `finally`s (launchers are asked to stop); then whatever still runs under the root is
stopped (SIGTERM, SIGKILL after a grace) and the root removed. A second signal forces it:
SIGKILL at once. `main()` exits 128+signal after a stop, as `scripts/cluster up` does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from localkube.stopping import Interrupted, stop_signals

SCRATCH_ENV = "KVPY_BENCH_SCRATCH"
GRACE = 10.0  # seconds leftovers get after SIGTERM before SIGKILL


class Scratch:
    """The benchmark's scratch root: its dirs, and the processes that name them."""

    def __init__(self) -> None:
        given = os.environ.get(SCRATCH_ENV)
        if given:
            self.root = Path(given)
            self.root.mkdir(parents=True, exist_ok=True)
        else:
            self.root = Path(tempfile.mkdtemp(prefix="kvbench-", dir="/tmp"))

    def dir(self, prefix: str) -> Path:
        """A new directory under the root."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))

    def processes(self) -> list[int]:
        """Live processes (not this one) whose command line names a path under the root."""
        mark = os.fsencode(str(self.root)) + b"/"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if mark in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
        return found

    def kill(self, sig: int = signal.SIGKILL) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def close(self) -> None:
        """Stop what still runs under the root (SIGTERM, then SIGKILL), then remove it."""
        if self.processes():
            self.kill(signal.SIGTERM)
            deadline = time.monotonic() + GRACE
            while self.processes() and time.monotonic() < deadline:
                time.sleep(0.1)
            self.kill(signal.SIGKILL)
            while self.processes() and time.monotonic() < deadline + GRACE:
                time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def stopping() -> Iterator[Scratch]:
    """A Scratch torn down on the way out, however the benchmark ends (see the module)."""
    signals = stop_signals()
    signals.install()
    scratch = Scratch()
    try:
        with signals.on_force(scratch.kill):
            yield scratch
    finally:
        with signals.tearing_down(), signals.on_force(scratch.kill):
            scratch.close()


def main(run: Callable[[Scratch], None]) -> None:
    """Run a benchmark in a Scratch; a stop signal ends it with 128+signal."""
    try:
        with stopping() as scratch:
            run(scratch)
    except Interrupted as stopped:
        print(f"benchmark {stopped}; everything it started is gone", file=sys.stderr)
        raise SystemExit(128 + stopped.signum) from None
