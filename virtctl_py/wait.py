"""--wait: poll an object until a condition holds, showing progress, bounded by --timeout.

`poll_until` for the synchronous verbs (virtctl_py.commands), `wait_until` for the ones on
the full asynchronous client (image-upload, vmexport); both print the same lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

from virtctl_py.errors import CliError, Exit


class _Progress:
    """Prints each new state once; raises the timeout error past the deadline."""

    def __init__(self, what: str, timeout: float, out: TextIO) -> None:
        self.what, self.timeout, self.out = what, timeout, out
        self.deadline = time.monotonic() + timeout
        self.last = ""

    def seen(self, state: str) -> None:
        if state != self.last:
            self.out.write(f"  {self.what}: {state}\n")
            self.out.flush()
            self.last = state

    def check(self) -> None:
        if time.monotonic() >= self.deadline:
            raise CliError(
                f"timed out after {self.timeout:g}s waiting for {self.what} (last: {self.last})",
                code=Exit.TIMEOUT,
            )


def poll_until(
    probe: Callable[[], tuple[bool, str]],
    *,
    what: str,
    timeout: float,
    out: TextIO = sys.stderr,
    interval: float = 1.0,
) -> None:
    """Call ``probe`` until it says done; print each new state it reports."""
    progress = _Progress(what, timeout, out)
    while True:
        done, state = probe()
        progress.seen(state)
        if done:
            return
        progress.check()
        time.sleep(interval)


async def wait_until(
    probe: Callable[[], Awaitable[tuple[bool, str]]],
    *,
    what: str,
    timeout: float,
    out: TextIO = sys.stderr,
    interval: float = 1.0,
) -> None:
    """Await ``probe`` until it says done; print each new state it reports."""
    import asyncio  # noqa: PLC0415 - the synchronous verbs never load it

    progress = _Progress(what, timeout, out)
    while True:
        done, state = await probe()
        progress.seen(state)
        if done:
            return
        progress.check()
        await asyncio.sleep(interval)
