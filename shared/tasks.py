"""Small asyncio helpers every daemon uses."""

from __future__ import annotations

import asyncio


def cancelling() -> bool:
    """True when the current task is being cancelled.

    A retry loop that catches broad errors checks this before retrying: an error raised
    while a cancellation is pending (a timeout's CancelledError turned into something else
    by a library) must end the loop rather than be swallowed and retried.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
