"""SIGUSR2 makes a daemon log its memory (shared/memtrace.py): RSS always; with tracemalloc
tracing, the traced total and, after the first (baseline) snapshot, the sites that grew."""

from __future__ import annotations

import asyncio
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from shared.memtrace import SIGNAL, MemoryLog, log_memory_on_signal, rss_kib


@pytest.fixture
def tracing() -> Iterator[None]:
    tracemalloc.start(5)
    yield
    tracemalloc.stop()


def test_rss_is_read_from_proc_status(tmp_path: Path) -> None:
    """VmRSS in KiB; 0 when the status file has no such line."""
    status = tmp_path / "status"
    status.write_text("Name:\tx\nVmRSS:\t  12345 kB\n")
    assert rss_kib(status) == 12345
    status.write_text("Name:\tx\n")
    assert rss_kib(status) == 0
    assert rss_kib() > 0


def test_growth_since_the_baseline_names_the_allocating_line(tracing: None) -> None:
    """The first snapshot is the baseline; the next names this file's allocation as grown."""
    memory = MemoryLog(top=5)
    with capture_logs() as logs:
        memory.snapshot()
        kept = [bytearray(4096) for _ in range(256)]  # ~1 MiB held
        memory.snapshot()
    first, second = logs
    assert first["event"] == "memory_snapshot" and "grew" not in first
    assert second["traced_kib"] >= 1024
    assert any("test_memtrace.py" in line and "+" in line for line in second["grew"])
    assert len(kept) == 256


def test_without_tracing_only_rss_is_logged() -> None:
    """A daemon started without PYTHONTRACEMALLOC still answers, with its RSS."""
    assert not tracemalloc.is_tracing()
    with capture_logs() as logs:
        MemoryLog().snapshot()
    assert logs[0]["rss_kib"] > 0 and "traced_kib" not in logs[0]


async def test_each_signal_logs_one_snapshot_until_cancelled() -> None:
    """Two SIGUSR2 → two snapshots; cancelled, the signal handler is removed."""
    taken = asyncio.Event()

    class Counting(MemoryLog):
        def snapshot(self) -> None:
            super().snapshot()
            taken.set()

    memory = Counting()
    task = asyncio.create_task(log_memory_on_signal(memory))
    await asyncio.sleep(0)
    for expected in (1, 2):
        taken.clear()
        os.kill(os.getpid(), SIGNAL)
        async with asyncio.timeout(5):
            await taken.wait()
        assert memory.taken == expected
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not asyncio.get_running_loop().remove_signal_handler(SIGNAL)
