"""Unix socket paths: private to their owner, and reachable past sun_path's length limit.

Sockets are private to their owner: 0600 in a 0700 directory, set explicitly, so the
umask of whoever started the daemon does not decide who may send it commands.

Kubelet-style paths (``<pods>/<uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock``)
easily pass the 108-byte limit. A directory file descriptor reached through
``/proc/self/fd/<n>/`` gives a short alias for the same directory.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
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


SOCKET_MODE = 0o600
SOCKET_DIR_MODE = 0o700


def private_dir(path: Path) -> None:
    """Make ``path`` a directory only its owner can enter (0700), whatever the umask.

    A shared sticky directory (/tmp) is refused: a socket there cannot be kept private.
    """
    path.mkdir(mode=SOCKET_DIR_MODE, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_mode & stat.S_ISVTX:
        raise PermissionError(f"{path} is a shared (sticky) directory; give sockets their own")
    if stat.S_IMODE(st.st_mode) != SOCKET_DIR_MODE:
        path.chmod(SOCKET_DIR_MODE)


def bind_private(path: Path) -> socket.socket:
    """A Unix socket bound at ``path`` (replacing a stale one) with mode 0600, not listening.

    The directory is made private first, and the mode is set before listen(), so nobody
    else can reach the socket in between.
    """
    private_dir(path.parent)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with short_path(path) as sock_path:
            sock.bind(sock_path)
            os.chmod(sock_path, SOCKET_MODE)
    except BaseException:
        sock.close()
        raise
    return sock
