"""at_once: calls awaited together, results in order, the first failure raised as itself
(a SyncError stays a SyncError for the reconciler, not an ExceptionGroup)."""

from __future__ import annotations

import asyncio

import pytest

from controller.errors import SyncError
from controller.snapshot.base import at_once


async def test_results_in_order_and_concurrently() -> None:
    """Two calls that each wait for the other finish: they ran at the same time."""
    a, b = asyncio.Event(), asyncio.Event()

    async def one(mine: asyncio.Event, other: asyncio.Event, value: int) -> int:
        mine.set()
        await other.wait()
        return value

    assert await asyncio.wait_for(at_once(one(a, b, 1), one(b, a, 2)), 5) == [1, 2]


async def test_a_failure_is_raised_as_itself() -> None:
    """A SyncError in one call comes out as that SyncError."""

    async def fails() -> int:
        raise SyncError("FailedCreate", "nope")

    async def fine() -> int:
        return 1

    with pytest.raises(SyncError, match="nope"):
        await at_once(fine(), fails())
