"""A process's start time, read from the kernel's record."""

from __future__ import annotations

import time
from pathlib import Path

from shared.proctime import process_started_at


def test_process_start_is_read_from_proc() -> None:
    """The process's start comes from /proc/self/stat: before now, and within the life of
    this test process (not, say, the boot's time)."""
    started = process_started_at()
    assert started is not None
    assert started <= time.time()
    assert started > time.time() - 24 * 3600


def test_a_command_name_with_spaces_and_parentheses_is_skipped(tmp_path: Path) -> None:
    """The fields are counted after the command name's closing parenthesis, so a name like
    `a) b` does not shift them: 0 ticks after boot is the boot's time."""
    stat = tmp_path / "stat"
    fields = ["S"] + ["0"] * 18 + ["0"] + ["0"] * 30  # field 22 (starttime) is 0
    stat.write_text("1234 (a) b) " + " ".join(fields) + "\n")
    started = process_started_at(stat=stat)
    assert started is not None
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    assert abs(started - boot) < 1.0


def test_process_start_without_proc_is_unknown(tmp_path: Path) -> None:
    """Without a readable stat file the start is None, not an error."""
    assert process_started_at(stat=tmp_path / "missing") is None
