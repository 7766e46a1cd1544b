"""localkube.stopping: the first stop signal interrupts (so `finally` blocks tear down), a
signal during the teardown forces it instead of interrupting it; run in a child process
that signals itself, as the tooling is signalled."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from localkube.stopping import Interrupted, stop_signals

    signals = stop_signals()
    signals.install()
    forced = []
    with signals.on_force(lambda: forced.append(1)):
        try:
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            time.sleep(5)
            print("not interrupted")
        except Interrupted as stop:
            print("interrupted", stop.signum)
        finally:
            with signals.tearing_down():
                os.kill(os.getpid(), signal.SIGTERM)  # a second signal mid-teardown
                time.sleep(0.1)
                print("teardown finished, forced", len(forced))
    """
)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_first_signal_interrupts_and_a_second_forces_the_teardown(name: str) -> None:
    """Each stop signal raises Interrupted carrying its number (logged); a signal during
    the teardown runs the force callbacks and lets the teardown finish."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name], capture_output=True, text=True, timeout=30
    )

    lines = [
        line for line in out.stdout.splitlines() if line.startswith(("interrupted", "teardown"))
    ]
    assert "stop_signal_tearing_down" in out.stdout and f"signal={name}" in out.stdout
    assert lines == [f"interrupted {int(getattr(signal, name))}", "teardown finished, forced 1"], (
        out.stderr
    )
