"""Entry point of the ``kubevirt-py/sleeper`` image: sleep, exit 0 on SIGTERM.

``python -m localkube.sleeper [SECONDS]`` sleeps SECONDS (default: forever) and exits 0.
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
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else None
    stop.wait(seconds)
    sys.exit(0)


if __name__ == "__main__":
    main()
