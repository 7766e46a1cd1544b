"""--wait: poll an object until a condition holds, showing progress, bounded by --timeout."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

from virtctl_py.errors import CliError, Exit


async def wait_until(
    probe: Callable[[], Awaitable[tuple[bool, str]]],
    *,
    what: str,
    timeout: float,
    out: TextIO = sys.stderr,
    interval: float = 1.0,
) -> None:
    """Call ``probe`` until it says done; print each new state it reports."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        done, state = await probe()
        if state != last:
            out.write(f"  {what}: {state}\n")
            out.flush()
            last = state
        if done:
            return
        if time.monotonic() >= deadline:
            raise CliError(
                f"timed out after {timeout:g}s waiting for {what} (last: {last})", code=Exit.TIMEOUT
            )
        await asyncio.sleep(interval)
