"""scripts/bench/launcher_cpu.py runs at its smallest and prints every step's row (its
figures are a report, never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[4] / "scripts" / "bench" / "launcher_cpu.py"


def test_launcher_cpu_prints_each_step() -> None:
    """One round: the interpreter, both imports, both Syncs and the total are printed."""
    out = subprocess.run(
        [sys.executable, str(BENCH), "--rounds", "1"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    for row in (
        "interpreter start",
        "launcher.main imported",
        "launcher.serve imported",
        "first Sync",
        "second Sync",
        "total to the domain started",
    ):
        assert row in out, out
