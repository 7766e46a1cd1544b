"""shared.tasks.cancelling: tells a retry loop that its own task is being cancelled."""

from __future__ import annotations

import asyncio

import pytest

from shared.tasks import cancelling


async def test_cancelling_is_false_normally_and_true_once_the_task_is_cancelled() -> None:
    """Outside a cancellation it is False; inside a task whose cancel() is pending, True."""
    assert not cancelling()
    seen: list[bool] = []
    started = asyncio.Event()

    async def worker() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append(cancelling())
            raise

    task = asyncio.create_task(worker())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [True]
