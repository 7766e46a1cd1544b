"""Entry point of the ``kubevirt-py/sleeper`` image: sleep, exit 0 on SIGTERM.

``python -m localkube.sleeper [SECONDS]`` sleeps SECONDS (default: forever) and exits 0.
Any other arguments (e.g. a launcher's flags, when it stands in for the launcher) are ignored.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType


def main() -> None:
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    seconds = float(first) if first.replace(".", "", 1).isdigit() else None
    stop.wait(seconds)
    sys.exit(0)


if __name__ == "__main__":
    main()
