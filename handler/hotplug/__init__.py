"""The handler's hotplug mounter: hotplugged volumes made reachable in the running
launcher pod, attached to the guest, and detached and unmounted again.

The controller runs an attachment pod per hotplugged volume on the VMI's node and marks
its volumeStatus entry AttachedToNode (with the pod's UID); from there, on each reconcile
of a Running VMI:

    AttachedToNode → bind-mount the claim's disk into the launcher pod → MountedToPod
                   → attach_volume on the launcher                   → Ready (target)

A volume gone from the spec (or marked Detaching) is detached: detach_volume until the
guest lets go, or — a guest that ignores the unplug, a launcher that fails — until the
deadline, then unmounted anyway and reported (a Warning event); its entry is dropped and
the controller deletes the attachment pod. A VMI that ends releases every mount
(`release`), so deleting a VMI never waits for a guest. One module per volume source
finds the source's disk on the node (SOURCES, keyed by the model's typed source).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from handler import commands
from handler.errors import HandlerError, SyncError
from handler.hotplug import block, memdump, pvc
from handler.hotplug.mounts import BindMounts, MountPort
from handler.launchers import LauncherPort, launcher_socket
from handler.netns import Launcher, launcher_process
from shared import podlayout
from shared.model import VirtualMachineInstance
from shared.model.meta import utc_now
from shared.model.volumes import DEFAULT_HOTPLUG_BUS, PersistentVolumeClaimSource
from shared.model.volumestatus import VolumePhase, VolumeReason, VolumeStatus
from shared.wire.launcher_api import AttachVolumeArgs

log = structlog.get_logger("handler.hotplug")

# (typed source, its volumeStatus entry, pods dir) → the disk file on this node.
DiskSource = Callable[[Any, VolumeStatus, Path], Path]


def _pvc(source: PersistentVolumeClaimSource, entry: VolumeStatus, pods_dir: Path) -> Path:
    return pvc.disk_source(source, entry, pods_dir=pods_dir)


SOURCES: Mapping[type[Any], DiskSource] = {PersistentVolumeClaimSource: _pvc}
ATTACHING = frozenset({VolumePhase.ATTACHED_TO_NODE, VolumePhase.MOUNTED_TO_POD})


@dataclass(frozen=True, slots=True, kw_only=True)
class HotplugOptions:
    detach_deadline: float = 30.0  # how long a guest may keep a removed disk
    retry: float = 2.0  # revisit while a volume is on its way


@dataclass(slots=True)
class Outcome:
    """One pass: the volumeStatus wanted, when to look again, and volumes given up on
    (name, why) for a Warning event."""

    volume_status: tuple[VolumeStatus, ...]
    revisit: float | None = None
    forced: list[tuple[str, str]] = field(default_factory=list)


def _give_device(source: Path, target: Path, launcher: Launcher) -> None:
    block.give_device(source, target, launcher, devices=block.devices_hierarchy())


# A Block claim's device → the launcher pod's node at `target` (allowed in its cgroup).
GiveDevice = Callable[[Path, Path, Launcher], None]


class HotplugVolumes:
    """Hotplug state of this node's VMIs (deadlines only; the rest is in volumeStatus)."""

    def __init__(
        self,
        *,
        pods_dir: Path,
        mounts: MountPort | None = None,
        options: HotplugOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        give_device: GiveDevice = _give_device,
        launcher_of: Callable[[Path], Launcher] = launcher_process,
        wall: Callable[[], datetime] = utc_now,
    ) -> None:
        self._pods_dir = pods_dir
        self._give_device = give_device
        self._launcher_of = launcher_of
        self._mounts = mounts if mounts is not None else BindMounts()
        self._o = options or HotplugOptions()
        self._clock = clock
        self._wall = wall
        self._detaching: dict[tuple[str, str], float] = {}

    def wanted(self, vmi: VirtualMachineInstance) -> bool:
        """Anything to do: an entry with an attachment pod, or a hotplugged volume."""
        return any(e.hotplug_volume for e in vmi.status.volume_status)

    async def sync(
        self, vmi: VirtualMachineInstance, launcher: LauncherPort, *, pod_uid: str
    ) -> Outcome:
        out = Outcome(volume_status=())
        kept = []
        for entry in vmi.status.volume_status:
            new = await self._entry(vmi, entry, launcher, pod_uid=pod_uid, out=out)
            if new is not None:
                kept.append(new)
        out.volume_status = tuple(kept)
        return out

    def release(self, vmi_uid: str, pod_uid: str | None) -> None:
        """Every hotplug mount of a launcher pod undone (its VMI ended or left)."""
        for key in [k for k in self._detaching if k[0] == vmi_uid]:
            del self._detaching[key]
        if not pod_uid:
            return
        folder = self._pods_dir / podlayout.hotplug_disks_on_node(pod_uid)
        for disk in sorted(folder.iterdir()) if folder.is_dir() else ():
            if self._mounts.is_mounted(disk):
                try:
                    self._mounts.unmount(disk)
                except HandlerError as exc:
                    log.warning("hotplug_unmount_failed", disk=str(disk), error=str(exc))

    async def _entry(
        self,
        vmi: VirtualMachineInstance,
        entry: VolumeStatus,
        launcher: LauncherPort,
        *,
        pod_uid: str,
        out: Outcome,
    ) -> VolumeStatus | None:
        name = entry.name or ""
        if entry.hotplug_volume is None or not name:
            return entry  # a volume the pod was made with: not hotplug's
        volume = vmi.spec.volume(name)
        target = self._pods_dir / podlayout.hotplug_disks_on_node(pod_uid)
        target = target / podlayout.hotplug_disk_file(name)
        if volume is None or not volume.is_hotplug or entry.phase is VolumePhase.DETACHING:
            return await self._detach(vmi, entry, launcher, target=target, out=out)
        if volume.memory_dump is not None or entry.phase not in ATTACHING:
            return await self._dump(vmi, entry, launcher, target=target, out=out)
        try:
            self._mount(vmi, entry, target, pod_uid=pod_uid)
        except (HandlerError, OSError) as exc:
            out.revisit = self._o.retry
            return _with(entry, reason=VolumeReason.MOUNT_FAILED, message=str(exc))
        mounted = _with(
            entry,
            phase=VolumePhase.MOUNTED_TO_POD,
            reason=VolumeReason.MOUNTED_TO_POD,
            message=f"Volume {name} has been mounted in virt-launcher pod",
        )
        try:
            reply = await commands.attach_volume(launcher, _attach_args(vmi, name))
        except SyncError as exc:
            out.revisit = self._o.retry
            return _with(mounted, reason=VolumeReason.ATTACH_FAILED, message=exc.message)
        return dataclasses.replace(
            _with(
                mounted,
                phase=VolumePhase.READY,
                reason=VolumeReason.READY,
                message=f"Successfully attach hotplugged volume {name} to VM",
            ),
            target=reply.target,
        )

    async def _dump(
        self,
        vmi: VirtualMachineInstance,
        entry: VolumeStatus,
        launcher: LauncherPort,
        *,
        target: Path,
        out: Outcome,
    ) -> VolumeStatus:
        """A memory dump volume's next step (memdump.py); any other entry as it is."""
        volume = vmi.spec.volume(entry.name or "")
        if volume is None or volume.memory_dump is None:
            return entry
        ctx = memdump.DumpContext(
            pods_dir=self._pods_dir, mounts=self._mounts, target=target, now=self._wall()
        )
        new, again = await memdump.sync_entry(vmi, entry, launcher, ctx)
        if again:
            out.revisit = self._o.retry
        return new

    def _mount(
        self, vmi: VirtualMachineInstance, entry: VolumeStatus, target: Path, *, pod_uid: str
    ) -> None:
        volume = vmi.spec.volume(entry.name or "")
        source = volume.source() if volume is not None else None
        finder = SOURCES.get(type(source)) if source is not None else None
        if finder is None:
            raise HandlerError(f"volume {entry.name!r} has no source that can be hotplugged")
        if block.is_block(entry):
            device = block.device_source(entry, pods_dir=self._pods_dir)
            launcher = self._launcher_of(launcher_socket(self._pods_dir, pod_uid))
            self._give_device(device, target, launcher)
            return
        disk = finder(source, entry, self._pods_dir)
        self._mounts.bind(disk, target)

    async def _detach(
        self,
        vmi: VirtualMachineInstance,
        entry: VolumeStatus,
        launcher: LauncherPort,
        *,
        target: Path,
        out: Outcome,
    ) -> VolumeStatus | None:
        name = entry.name or ""
        holds = entry.phase is not None and entry.phase.mounted
        if not holds and not self._mounts.is_mounted(target):
            return entry  # never reached the pod: the controller drops it with its pod
        if entry.memory_dump_volume is not None:  # the guest never had it: only unmount
            self._mounts.unmount(target)
            log.info("memory_dump_volume_removed", volume=name)
            return None
        key = (vmi.uid, name)
        started = self._detaching.setdefault(key, self._clock())
        try:
            reply = await commands.detach_volume(launcher, name)
            attached, why = reply.attached, f"the guest did not release {reply.target}"
        except SyncError as exc:
            attached, why = True, exc.message
        if attached and self._clock() - started < self._o.detach_deadline:
            out.revisit = self._o.retry
            return _with(
                entry, phase=VolumePhase.DETACHING, reason=VolumeReason.DETACHING, message=why
            )
        self._mounts.unmount(target)
        del self._detaching[key]
        if attached:
            out.forced.append((name, why))
        log.info("hotplug_volume_removed", volume=name, forced=attached)
        return None


def _with(entry: VolumeStatus, **changes: Any) -> VolumeStatus:
    return dataclasses.replace(entry, **changes)


def _attach_args(vmi: VirtualMachineInstance, name: str) -> AttachVolumeArgs:
    disk = next((d for d in vmi.spec.domain.devices.disks if d.name == name), None)
    volume = vmi.spec.volume(name)
    claim = volume.claim if volume is not None else None
    # A cdrom's media go into the device the domain was defined with (its bus, sata or
    # scsi, is already set): the launcher inserts them in place and ignores `bus`.
    bus = disk.bus if disk is not None and not disk.is_cdrom else None
    return AttachVolumeArgs(
        volume=name,
        bus=bus or DEFAULT_HOTPLUG_BUS,
        serial=disk.serial if disk is not None else None,
        readonly=bool(claim and claim.read_only),
    )
