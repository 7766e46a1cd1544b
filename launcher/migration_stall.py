"""Whether a running migration still moves: KubeVirt's migrations.progressTimeout.

The source job feeds each poll of libvirt's job figures to a `StallWatch`. Progress is
data remaining going down or data processed (memory and disks sent) going up since the
previous poll; a migration that saw none for `timeout` seconds is stalled (a stream that
no longer drains: a frozen target, a dead link) and is aborted. A migration that moves but
never converges is the completion timeout's business, not this one's.
"""

from __future__ import annotations

import math

from launcher.virttypes import JobStats


class StallWatch:
    """The last time a migration moved, from successive job figures (times: monotonic)."""

    __slots__ = ("_moved_at", "_processed", "_remaining", "timeout")

    def __init__(self, *, timeout: float | None, started: float) -> None:
        self.timeout = timeout  # seconds; None: never stalled
        self._moved_at = started
        self._remaining: int | None = None
        self._processed: int | None = 0  # anything sent since the start is progress

    def saw(self, stats: JobStats, *, now: float) -> None:
        """Take one poll's figures; progress since the previous poll restarts the clock."""
        if _less(stats.data_remaining, self._remaining) or _less(
            self._processed, stats.data_processed
        ):
            self._moved_at = now
        if stats.data_remaining is not None:
            self._remaining = stats.data_remaining
        if stats.data_processed is not None:
            self._processed = stats.data_processed

    def stalled_for(self, *, now: float) -> int | None:
        """Whole seconds without progress once past the timeout; None while within it."""
        idle = now - self._moved_at
        if self.timeout is None or idle < self.timeout:
            return None
        return math.floor(idle)


def _less(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and a < b


def stall_reason(seconds: int) -> str:
    """The failure reason, in KubeVirt's words."""
    return f"Live migration stuck for {seconds} seconds and has been aborted"


def completion_reason(seconds: float) -> str:
    """The failure reason of a job past its completion timeout, in KubeVirt's words."""
    return f"Live migration is not completed after {int(seconds)} seconds and has been aborted"
