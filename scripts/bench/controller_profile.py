"""Runs `python -m controller` under pyinstrument, CPU samples only, for the benchmark.

    python scripts/bench/controller_profile.py OUT.txt [controller arguments…]

Writes the text report to OUT.txt (library frames folded) and OUT.txt.all (every frame)
when the controller exits (SIGTERM from the benchmark). pyinstrument is installed by hand
into the venv for profiling; it is not a project dependency. async_mode is disabled so
time spent awaiting is not charged to the awaiting coroutine.
"""

from __future__ import annotations

import importlib
import runpy
import sys


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    sys.argv = ["controller", *args]
    # Imported by name: not a dependency, so type checking must not require it.
    profiler_class = importlib.import_module("pyinstrument").Profiler
    profiler = profiler_class(interval=0.0005, async_mode="disabled")
    profiler.start()
    try:
        runpy.run_module("controller", run_name="__main__", alter_sys=True)
    finally:
        profiler.stop()
        with open(out, "w") as f:
            f.write(profiler.output_text(show_all=False))
        with open(out + ".all", "w") as f:
            f.write(profiler.output_text(show_all=True))


if __name__ == "__main__":
    main()
