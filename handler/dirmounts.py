"""Bind mounts of whole directories into launcher pods (a backup's target claim), beside
hotplug's file mounts (handler/hotplug/mounts.py): the same propagation (the kubelet's pods
dir is mounted Bidirectional in the handler, HostToContainer in the launcher), lazy
unmounts so a QEMU still writing never makes a teardown hang.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import Protocol

import structlog

from handler.hotplug.mounts import MNT_DETACH, MS_BIND, MountFailed, _mount_point

log = structlog.get_logger("handler.dirmounts")


class DirMountPort(Protocol):
    """What backups need of the mount table (DirMounts; fakes in unit tests)."""

    def bind_dir(self, source: Path, target: Path) -> None: ...

    def unmount_dir(self, target: Path) -> None: ...


class DirMounts:
    """mount(2) / umount2(2) of directories through libc."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def bind_dir(self, source: Path, target: Path) -> None:
        """Bind-mount the directory `source` onto `target` (made when absent)."""
        if self._mounted(target):
            return
        target.mkdir(exist_ok=True)
        rc = self._libc.mount(os.fsencode(source), os.fsencode(target), None, MS_BIND, None)
        if rc != 0:
            err = ctypes.get_errno()
            raise MountFailed(f"bind mount {source} on {target}: {os.strerror(err)}")
        log.info("dir_mounted", source=str(source), target=str(target))

    def unmount_dir(self, target: Path) -> None:
        """Lazily unmount `target` (every stacked mount) and remove the empty directory."""
        while self._mounted(target):
            if self._libc.umount2(os.fsencode(target), MNT_DETACH) != 0:
                err = ctypes.get_errno()
                raise MountFailed(f"unmount {target}: {os.strerror(err)}")
            log.info("dir_unmounted", target=str(target))
        if target.is_dir():
            target.rmdir()

    @staticmethod
    def _mounted(target: Path) -> bool:
        wanted = os.fsencode(target)
        with open("/proc/self/mountinfo", "rb") as mountinfo:
            return any(_mount_point(line) == wanted for line in mountinfo)
