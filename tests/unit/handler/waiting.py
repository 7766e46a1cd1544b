"""Polling until a condition holds (events from other tasks and processes), bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Return once `predicate()` holds; AssertionError naming `what` after `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if predicate():
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


async def until_async(
    probe: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0, interval: float = 0.25
) -> None:
    """Like `until`, for a probe that has to await (an RPC, an HTTP request: cheap, so
    repeated every `interval`, a quarter of a second unless said)."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if await probe():
                    return
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None
