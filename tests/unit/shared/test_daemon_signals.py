"""shared.daemon.stop_on_signals: a stop signal inside the block sets the event; with
`ignore_after`, one that arrives after the block (while the process exits) no longer
kills it, so a launcher that stops on its handler's Delete exits 0 even when the kubelet's
SIGTERM comes during its exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from shared.daemon import stop_on_signals

    async def main(ignore_after: bool) -> None:
        async with stop_on_signals(ignore_after=ignore_after) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(stop.wait(), 10)
        os.kill(os.getpid(), signal.SIGTERM)  # the late one, while "exiting"
        await asyncio.sleep(0.2)

    asyncio.run(main(sys.argv[1] == "1"))
    """
)


@pytest.mark.parametrize(("ignore_after", "code"), [(True, 0), (False, -15)])
def test_a_late_sigterm_is_ignored_only_when_asked(ignore_after: bool, code: int) -> None:
    """The signal inside the block only sets the event; the late one kills the process
    (-SIGTERM) unless the block was entered with ignore_after."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "1" if ignore_after else "0"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
