"""Bind mounts of hotplugged disks into launcher pods: the handler's only mount(2) calls.

virt-handler runs privileged with the kubelet's pods dir mounted Bidirectional, so a bind
mount it makes under that dir propagates to the node and from there (HostToContainer)
into the launcher pod's hotplug-disks volume (shared/podlayout.py). Unmounts are lazy
(MNT_DETACH): a QEMU that still holds the file open never makes a VMI's teardown hang.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import Protocol

import structlog

from handler.errors import HandlerError

log = structlog.get_logger("handler.hotplug.mounts")

MS_BIND = 4096
MNT_DETACH = 2


class MountFailed(HandlerError):
    """A bind mount or unmount the kernel refused (message: which and why)."""


class MountPort(Protocol):
    """What hotplug needs of the mount table (BindMounts; fakes in unit tests)."""

    def bind(self, source: Path, target: Path) -> None: ...

    def unmount(self, target: Path) -> None: ...

    def is_mounted(self, target: Path) -> bool: ...


class BindMounts:
    """mount(2) / umount2(2) through libc."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def bind(self, source: Path, target: Path) -> None:
        """Bind-mount the file `source` onto `target` (made empty when absent)."""
        if self.is_mounted(target):
            return
        target.touch(exist_ok=True)
        rc = self._libc.mount(os.fsencode(source), os.fsencode(target), None, MS_BIND, None)
        if rc != 0:
            err = ctypes.get_errno()
            raise MountFailed(f"bind mount {source} on {target}: {os.strerror(err)}")
        log.info("hotplug_disk_mounted", source=str(source), target=str(target))

    def unmount(self, target: Path) -> None:
        """Lazily unmount `target` (every stacked mount) and remove the file."""
        while self.is_mounted(target):
            if self._libc.umount2(os.fsencode(target), MNT_DETACH) != 0:
                err = ctypes.get_errno()
                raise MountFailed(f"unmount {target}: {os.strerror(err)}")
            log.info("hotplug_disk_unmounted", target=str(target))
        target.unlink(missing_ok=True)

    def is_mounted(self, target: Path) -> bool:
        """True when `target` is a mount point (a bind-mounted file is one too)."""
        wanted = os.fsencode(target)
        with open("/proc/self/mountinfo", "rb") as mountinfo:
            return any(_mount_point(line) == wanted for line in mountinfo)


def _mount_point(line: bytes) -> bytes:
    """The mount point field of a mountinfo line, its octal escapes undone."""
    fields = line.split(b" ")
    raw = fields[4] if len(fields) > 4 else b""
    return raw.replace(b"\\040", b" ").replace(b"\\011", b"\t").replace(b"\\134", b"\\")
