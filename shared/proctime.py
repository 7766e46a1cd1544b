"""When this process started, from the kernel's own record (not from when Python got
round to asking): the start-up benchmarks measure interpreter start and imports with it.

`/proc/self/stat`'s field 22 is the start in clock ticks after boot (the boot-time clock,
suspend included); its distance to CLOCK_BOOTTIME now, taken from the wall clock now, is the
start in epoch seconds. Inside a container the kernel and its clocks are the host's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STAT = Path("/proc/self/stat")


def process_started_at(*, stat: Path = STAT) -> float | None:
    """This process's start in epoch seconds (clock-tick resolution), or None without /proc."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    ticks = int(fields[19])  # field 22 of the whole line
    since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - since_start
