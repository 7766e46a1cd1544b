"""Unix socket paths: private to their owner, and reachable past sun_path's length limit.

Sockets are private to their owner: 0600 in a 0700 directory, set explicitly, so the
umask of whoever started the daemon does not decide who may send it commands. A socket
meant for one more group (virt-handler's, which non-root launchers dial: their group is
`shared.launcherpod.LAUNCHER_GID`) is 0660 in a 0710 directory of that group. A directory
another user owns (a non-root launcher's sockets in a pod volume the kubelet made) cannot
be changed: the socket's own mode keeps others out of it.

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
GROUP_SOCKET_MODE = 0o660
GROUP_DIR_MODE = 0o710


def private_dir(path: Path, *, group: int | None = None) -> None:
    """Make ``path`` a directory only its owner (and ``group``, which may only pass
    through) can enter, whatever the umask; one another user owns is left as it is.

    A shared sticky directory (/tmp) is refused: a socket there cannot be kept private.
    """
    mode = SOCKET_DIR_MODE if group is None else GROUP_DIR_MODE
    path.mkdir(mode=SOCKET_DIR_MODE, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_mode & stat.S_ISVTX:
        raise PermissionError(f"{path} is a shared (sticky) directory; give sockets their own")
    if st.st_uid != os.geteuid():
        return
    if group is not None and st.st_gid != group:
        os.chown(path, -1, group)
    if stat.S_IMODE(st.st_mode) != mode:
        path.chmod(mode)


def bind_private(path: Path, *, group: int | None = None) -> socket.socket:
    """A Unix socket bound at ``path`` (replacing a stale one) with mode 0600 (0660 for
    ``group``), not listening.

    The directory is made private first, and the mode is set before listen(), so nobody
    else can reach the socket in between.
    """
    if os.geteuid() != 0:
        group = None  # only root gives a file to a group it is not in
    private_dir(path.parent, group=group)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with short_path(path) as sock_path:
            sock.bind(sock_path)
            if group is not None:
                os.chown(sock_path, -1, group)
            os.chmod(sock_path, SOCKET_MODE if group is None else GROUP_SOCKET_MODE)
    except BaseException:
        sock.close()
        raise
    return sock
