"""Unix socket paths longer than sun_path allows.

Kubelet-style paths (``<pods>/<uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock``)
easily pass the 108-byte limit. A directory file descriptor reached through
``/proc/self/fd/<n>/`` gives a short alias for the same directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

SUN_PATH_MAX = 107


@contextlib.contextmanager
def short_path(path: Path) -> Iterator[str]:
    """Yield a path to the same socket that fits in sun_path, valid inside the block."""
    text = str(path)
    if len(os.fsencode(text)) <= SUN_PATH_MAX:
        yield text
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)
