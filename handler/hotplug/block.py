"""persistentVolumeClaim (Block mode), hotplugged: the device the kubelet mapped for the
claim's attachment pod, given to the running launcher pod as a device node of its own.

The kubelet maps a pod's block claim at `pods/<uid>/volumeDevices/<plugin>/<pv name>` (a
device node or a link to one). The handler makes a node of the same device number in the
launcher pod's hotplug-disks volume (owned by the launcher's user) and allows the device in
the launcher container's device cgroup (cgroup v1 `devices.allow`, in the container's
cgroup and every cgroup below it: libvirt's partition and QEMU's machine cgroup), as
KubeVirt's handler does; the container runtime gave the container only the devices it
had at start. The handler's own /sys/fs/cgroup shows its container's cgroup alone, so it
mounts the devices hierarchy once in its mount namespace (privileged; no cgroup
namespace, so its root is the node's). A node with cgroup v2 (device rules are an eBPF
program) is refused.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
from pathlib import Path

import structlog

from handler.errors import HandlerError
from handler.netns import Launcher
from shared.launcherpod import LAUNCHER_GID
from shared.model.volumestatus import VolumeStatus

log = structlog.get_logger("handler.hotplug.block")

BLOCK_MODE = "Block"
VOLUME_DEVICES = "volumeDevices"
# Where the handler mounts the devices cgroup v1 hierarchy (its own mount namespace).
DEVICES_MOUNT = Path("/run/kubevirt-py-devices-cgroup")
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8


class DeviceNotMapped(HandlerError):
    """The attachment pod's block device is not (or no longer) on this node."""


def is_block(entry: VolumeStatus) -> bool:
    """The entry's claim is a Block claim (as the controller read it)."""
    info = entry.persistent_volume_claim_info
    return info is not None and info.volume_mode == BLOCK_MODE


def device_source(entry: VolumeStatus, *, pods_dir: Path) -> Path:
    """The claim's device as the kubelet mapped it for the attachment pod."""
    pod_uid = entry.attach_pod_uid or ""
    root = pods_dir / pod_uid / VOLUME_DEVICES
    found = [
        d
        for plugin in (sorted(root.iterdir()) if root.is_dir() else [])
        for d in sorted(plugin.iterdir())
    ]
    if len(found) != 1:
        raise DeviceNotMapped(
            f"volume {entry.name!r}: no one block device mapped for attachment pod {pod_uid} "
            f"on this node ({len(found)} under {root})"
        )
    try:
        mode = found[0].stat().st_mode
    except OSError as e:
        raise DeviceNotMapped(f"volume {entry.name!r}: {found[0]}: {e.strerror}") from e
    if not stat.S_ISBLK(mode):
        raise DeviceNotMapped(f"volume {entry.name!r}: {found[0]} is no block device")
    return found[0]


def devices_hierarchy(at: Path = DEVICES_MOUNT) -> Path:
    """The devices cgroup v1 hierarchy, mounted at `at` unless it already is."""
    if (at / "devices.allow").is_file():
        return at
    at.mkdir(parents=True, exist_ok=True)
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if libc.mount(b"cgroup", os.fsencode(at), b"cgroup", flags, b"devices") != 0:
        why = os.strerror(ctypes.get_errno())
        raise HandlerError(
            f"mount the devices cgroup v1 hierarchy at {at}: {why} (hotplugging a block "
            "device needs one; cgroup v2 device programs are not updated by kubevirt-py)"
        )
    log.info("devices_cgroup_mounted", at=str(at))
    return at


def give_device(source: Path, target: Path, launcher: Launcher, *, devices: Path) -> None:
    """Allow `source`'s device to the launcher's container (`devices`: the devices
    hierarchy's root), then make its node at `target` (owned by the launcher's user)."""
    rdev = source.stat().st_rdev
    allow_device(launcher.pid, rdev, devices=devices)
    try:
        st = target.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISBLK(st.st_mode) and st.st_rdev == rdev:
        return
    if st is not None:
        target.unlink()
    os.mknod(target, stat.S_IFBLK | 0o660, rdev)
    if launcher.uid != 0:
        os.chown(target, launcher.uid, LAUNCHER_GID)
    log.info("hotplug_device_made", target=str(target), device=_numbers(rdev))


def allow_device(pid: int, rdev: int, *, devices: Path, proc: Path = Path("/proc")) -> None:
    """`b major:minor rwm` in the devices cgroup of `pid` and every cgroup below it."""
    top = devices / _devices_path(pid, proc=proc).lstrip("/")
    if not (top / "devices.allow").is_file():
        raise HandlerError(
            f"no cgroup v1 devices controller at {top}: hotplugging a block device needs "
            "one (cgroup v2 device programs are not updated by kubevirt-py)"
        )
    rule = f"b {_numbers(rdev)} rwm"
    for here, _, _ in os.walk(top):
        try:
            Path(here, "devices.allow").write_text(rule)
        except OSError as e:
            raise HandlerError(f"allow {rule} in {here}: {e.strerror}") from e
    log.info("hotplug_device_allowed", cgroup=str(top), rule=rule)


def _devices_path(pid: int, *, proc: Path) -> str:
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError as e:
        raise HandlerError(f"the launcher's cgroups (pid {pid}): {e.strerror}") from e
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "devices" in controllers.split(","):
            return path
    raise HandlerError(
        f"pid {pid} is in no cgroup v1 devices controller (cgroup v2 device programs are "
        "not updated by kubevirt-py)"
    )


def _numbers(rdev: int) -> str:
    return f"{os.major(rdev)}:{os.minor(rdev)}"
