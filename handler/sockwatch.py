"""Wake a waiter as soon as a name appears in a directory (Linux inotify through libc).

The launcher pool waits for a starting launcher's `launcher-sock`, which the launcher
renames into place once it answers: an inotify watch on the sockets dir for names created
or moved in wakes the pool at once, where a poll waited half its interval on average. The
wait stays bounded (the watch is a shortcut, never the only way): without inotify, or
while the directory does not exist yet, `DirWatch.until` just waits its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
from pathlib import Path

IN_CREATE = 0x100
IN_MOVED_TO = 0x80
READ_SIZE = 4096


def _inotify_fd(directory: Path) -> int:
    """An inotify fd (non-blocking, close-on-exec) watching `directory` for new names."""
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own libc: no search
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    if libc.inotify_add_watch(fd, os.fsencode(directory), IN_CREATE | IN_MOVED_TO) < 0:
        errno = ctypes.get_errno()
        os.close(fd)
        raise OSError(errno, f"inotify_add_watch {directory}")
    return fd


class DirWatch:
    """Waits for a path to appear; `close()` when done (the watch is opened on first use,
    once the directory exists). Close it when not waiting: inotify instances are few per
    user (fs.inotify.max_user_instances, 128 by default, shared with the kubelet)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._fd: int | None = None
        self._unavailable = False
        self._woken = asyncio.Event()

    @property
    def watching(self) -> bool:
        return self._fd is not None

    async def until(self, path: Path, *, timeout: float) -> bool:
        """Wait until `path` (in the watched directory) exists, at most `timeout`
        seconds; whether it exists now."""
        self._open()
        self._woken.clear()
        if path.exists():
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._woken.wait()
        return path.exists()

    def _open(self) -> None:
        if self._fd is not None or self._unavailable or not self._dir.is_dir():
            return
        try:
            fd = _inotify_fd(self._dir)
        except (OSError, AttributeError):  # no inotify here: the bounded wait remains
            self._unavailable = True
            return
        asyncio.get_running_loop().add_reader(fd, self._readable)
        self._fd = fd

    def _readable(self) -> None:
        assert self._fd is not None
        with contextlib.suppress(BlockingIOError):
            while os.read(self._fd, READ_SIZE):
                pass
        self._woken.set()

    def close(self) -> None:
        """Give the inotify instance back (a later `until` opens another)."""
        self._unavailable = False
        if self._fd is not None:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
