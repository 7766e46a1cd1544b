"""What a non-root launcher opens, handed to its user (KubeVirt's handler adjusts the same).

The kubelet creates a container's device nodes (the device plugins' /dev/net/tun, /dev/kvm,
/dev/vhost-net; block-mode claims under /dev/vmi-disks) with the node's owner and mode:
root, 0600 or 0660. A launcher running as `shared.launcherpod.LAUNCHER_UID` could not open
them, so virt-handler (privileged, in the node's PID namespace) chowns each one in the
container's own /dev to the launcher's user, through `/proc/<pid>/root`, before it writes
the pod's network contract (the signal the launcher waits for before it starts QEMU).

hostDisk volumes are node directories (hostPath): an existing image file there is given
to the user, as KubeVirt's handler does; a missing one (DiskOrCreate) gets its directory
given, so the launcher can make it.

Only the container's node changes, never the node's own device. Paths are walked one
component at a time without following symlinks, so a pod cannot point the chown elsewhere;
under /dev anything but a character or block device is left alone. A hostDisk's path is
first resolved inside the container's root (its /var/run is a symlink to /run), as
openat2's RESOLVE_IN_ROOT would.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import PurePosixPath

import structlog

from handler.netns import Launcher
from shared import podlayout
from shared.model import VirtualMachineInstance

log = structlog.get_logger("handler.podowner")

DEVICES = (
    PurePosixPath("dev/kvm"),
    PurePosixPath("dev/net/tun"),
    PurePosixPath("dev/vhost-net"),
    PurePosixPath("dev/vhost-vsock"),
)
BLOCK_DIR = PurePosixPath(podlayout.BLOCK_DEVICES_DIR.lstrip("/"))
_MAX_LINKS = 40  # the kernel's own bound
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def host_disk_files(vmi: VirtualMachineInstance) -> list[PurePosixPath]:
    """The VMI's hostDisk image files as its launcher sees them (relative to /)."""
    base = PurePosixPath(podlayout.VMI_DISKS_DIR.lstrip("/"))
    return [
        base / podlayout.host_disk_file(v.name or "", v.host_disk.path)
        for v in vmi.spec.volumes
        if v.host_disk is not None and v.host_disk.path
    ]


def hand_over(
    launcher: Launcher, *, host_disks: Sequence[PurePosixPath] = (), proc: str = "/proc"
) -> list[str]:
    """Chown the launcher container's device nodes and hostDisk files (or their directory,
    when absent) to its user; the paths changed. A root launcher needs nothing."""
    if launcher.uid == 0:
        return []
    changed = []
    root = f"{proc}/{launcher.pid}/root"
    for device in (*DEVICES, *_block_devices(root)):
        if _chown(root, device, launcher.uid, devices_only=True):
            changed.append(f"/{device}")
    for disk in host_disks:
        try:  # /var/run is a symlink to /run in the launcher image
            image = resolve_in_root(root, disk.parent) / disk.name
        except OSError as e:
            log.warning("launcher_file_not_handed_over", path=f"/{disk}", error=str(e))
            continue
        target = image if _chown(root, image, launcher.uid) else image.parent
        if target == image.parent and not _chown(root, target, launcher.uid):
            log.warning("launcher_file_not_handed_over", path=f"/{disk}", error="not found")
            continue
        changed.append(f"/{target}")
    if changed:
        log.info("launcher_files_handed_over", uid=launcher.uid, paths=changed)
    return changed


def resolve_in_root(root: str, path: PurePosixPath) -> PurePosixPath:
    """`path` with its symlinks resolved as the container sees them: an absolute target
    from the container's root, `..` never above it (openat2's RESOLVE_IN_ROOT). Only read
    here; the chown then walks the result without following any symlink, so a link swapped
    meanwhile makes it fail, never lead it out."""
    done: list[str] = []
    todo = list(path.parts)
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("/", "", "."):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        try:
            target = os.readlink(os.path.join(root, *done, part))
        except OSError:  # not a symlink (or absent: the walk will say so)
            done.append(part)
            continue
        hops += 1
        if hops > _MAX_LINKS:
            raise OSError(errno.ELOOP, f"too many symlinks under /{path}")
        if target.startswith("/"):
            done = []
        todo = [*PurePosixPath(target).parts, *todo]
    return PurePosixPath(*done)


def _block_devices(root: str) -> Iterator[PurePosixPath]:
    with contextlib.suppress(OSError):
        parent = _open_dir(root, BLOCK_DIR.parent)
        try:  # listable (O_PATH is not), still not through a symlink
            fd = os.open(BLOCK_DIR.name, os.O_RDONLY | _DIR_FLAGS & ~os.O_PATH, dir_fd=parent)
        finally:
            os.close(parent)
        try:
            names = sorted(os.listdir(fd))
        finally:
            os.close(fd)
        yield from (BLOCK_DIR / name for name in names)


def _open_dir(root: str, path: PurePosixPath) -> int:
    """`path` under `root`, each component opened without following symlinks."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in path.parts:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _chown(root: str, path: PurePosixPath, uid: int, *, devices_only: bool = False) -> bool:
    """True when `path` under `root` exists (a device node, with `devices_only`; else a
    regular file or directory) and is now owned by `uid`."""
    try:
        fd = _open_dir(root, path.parent)
    except OSError:
        return False
    try:
        st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        device = stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        plain = stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)
        if not (device if devices_only else plain):
            return False
        if st.st_uid != uid:
            os.chown(path.name, uid, -1, dir_fd=fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        log.warning("launcher_file_not_handed_over", path=f"/{path}", error=str(e))
        return False
    finally:
        os.close(fd)
