"""A daemon's memory, on demand: SIGUSR2 logs one `memory_snapshot` event.

Always: the process's resident memory (VmRSS). When `tracemalloc` traces (the daemon was
started with `PYTHONTRACEMALLOC=<frames>` in its environment, as `scripts/soak
--tracemalloc` sets on the controller and handler), also the traced total and peak and the
allocation sites that grew most since the first snapshot (the baseline), so a soak's last
snapshot names where memory went. Taking a snapshot stops the loop for a moment (tens of
milliseconds per MiB traced): meant for soaks, not for production scrapes.
"""

from __future__ import annotations

import asyncio
import signal
import tracemalloc
from pathlib import Path
from typing import NoReturn

import structlog

log = structlog.get_logger("memtrace")

SIGNAL = signal.SIGUSR2


def rss_kib(status: Path = Path("/proc/self/status")) -> int:
    """This process's VmRSS in KiB (0 where /proc does not say)."""
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def growth(baseline: tracemalloc.Snapshot, now: tracemalloc.Snapshot, *, top: int) -> list[str]:
    """The `top` allocation sites by growth since `baseline`, as `file:line +KiB (+blocks)`."""
    stats = now.compare_to(baseline, "lineno")
    lines = []
    for stat in stats[:top]:
        frame = stat.traceback[0]
        lines.append(
            f"{frame.filename}:{frame.lineno} {stat.size_diff / 1024:+.1f} KiB "
            f"({stat.count_diff:+d} blocks, {stat.size / 1024:.1f} KiB now)"
        )
    return lines


class MemoryLog:
    """The snapshots one daemon took: the first is the baseline of every later one."""

    def __init__(self, *, top: int = 15) -> None:
        self._top = top
        self._baseline: tracemalloc.Snapshot | None = None
        self.taken = 0

    def snapshot(self) -> None:
        """Log `memory_snapshot` now."""
        self.taken += 1
        fields: dict[str, object] = {"n": self.taken, "rss_kib": rss_kib()}
        if tracemalloc.is_tracing():
            traced, peak = tracemalloc.get_traced_memory()
            now = tracemalloc.take_snapshot().filter_traces(
                (tracemalloc.Filter(False, tracemalloc.__file__),)
            )
            fields |= {"traced_kib": traced // 1024, "peak_kib": peak // 1024}
            if self._baseline is None:
                self._baseline = now
            else:
                fields["grew"] = growth(self._baseline, now, top=self._top)
        log.info("memory_snapshot", **fields)


async def log_memory_on_signal(memory: MemoryLog | None = None) -> NoReturn:
    """Until cancelled: a `memory_snapshot` for every SIGUSR2 (the handler removed after)."""
    memory = memory or MemoryLog()
    loop = asyncio.get_running_loop()
    asked = asyncio.Event()
    loop.add_signal_handler(SIGNAL, asked.set)
    try:
        while True:
            await asked.wait()
            asked.clear()
            memory.snapshot()
    finally:
        loop.remove_signal_handler(SIGNAL)
