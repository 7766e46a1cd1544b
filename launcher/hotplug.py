"""Hotplugged volumes: their disks attached to and detached from the running domain.

The handler bind-mounts a hotplugged claim's disk into the pod's hotplug-disks dir
(shared/podlayout.py), then asks `attach_volume`; the disk becomes the bus's next free
device (alias `ua-<volume>`, as every disk of ours). `detach_volume` asks the guest to let
go and reports whether the domain still holds the disk: a guest may ignore an unplug, and
the handler decides when to stop waiting. A volume whose disk is a cdrom the domain was
defined with (its tray empty) is inserted as media instead, and ejected on detach, the
cdrom staying (launcher/cdrom.py). Both are idempotent, so a handler that
restarted, or a reply lost on the way, is simply asked again.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from launcher import cdrom, domxml
from launcher.errors import DiskFailure
from launcher.plan import device_name
from shared import podlayout
from shared.wire.launcher_api import AttachVolumeArgs, DetachVolumeArgs, VolumeReply

log = structlog.get_logger("launcher.hotplug")

PREFIXES = {"virtio": "vd", "scsi": "sd"}
MAX_DEVICES = 26 * 27  # vda … vdzz: more than either bus takes


class HotplugVirt(Protocol):
    """What hotplug needs of libvirt (launcher.virt.Virt; fakes in unit tests)."""

    async def xml(self, name: str) -> str: ...
    async def attach_device(self, name: str, xml: str) -> None: ...
    async def detach_device(self, name: str, xml: str) -> None: ...
    async def update_device(self, name: str, xml: str) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HotplugConfig:
    disks_dir: Path = Path(podlayout.HOTPLUG_DISKS_DIR)
    detach_wait: float = 10.0  # how long detach_volume waits for the guest
    poll: float = 0.5


class Hotplug:
    """Attaches and detaches hotplugged disks of one domain."""

    def __init__(
        self, *, virt: HotplugVirt, domain: Callable[[], str], config: HotplugConfig
    ) -> None:
        self._virt = virt
        self._domain = domain
        self._config = config
        self._lock = asyncio.Lock()

    async def attach(self, args: AttachVolumeArgs) -> VolumeReply:
        async with self._lock:
            devices = await self._devices()
            found = _by_alias(devices, args.volume)
            path = self._config.disks_dir / podlayout.hotplug_disk_file(args.volume)
            if found is not None and cdrom.is_cdrom(found):
                return await self._insert(found, args.volume, path)
            if found is not None:
                return VolumeReply(target=_target(found), attached=True)
            device = _check(path, args.volume)
            plan = domxml.DiskPlan(
                alias=args.volume,
                device=domxml.DiskDevice.DISK,
                bus=args.bus,
                target=next_free(devices, args.bus),
                source=path,
                format="raw",
                block=device,
                readonly=args.readonly,
                serial=args.serial,
            )
            await self._virt.attach_device(self._domain(), domxml.disk_xml(plan))
            log.info("volume_attached", volume=args.volume, target=plan.target, bus=args.bus)
            return VolumeReply(target=plan.target, attached=True)

    async def _insert(self, found: ET.Element, volume: str, path: Path) -> VolumeReply:
        """A cdrom of the domain (declared, its tray empty): the volume goes in as media."""
        target = _target(found)
        if cdrom.media(found) == str(path):
            return VolumeReply(target=target, attached=True)
        block = _check(path, volume)
        await self._virt.update_device(self._domain(), cdrom.insert_xml(found, path, block=block))
        log.info("cdrom_inserted", volume=volume, target=target)
        return VolumeReply(target=target, attached=True)

    async def _eject(self, found: ET.Element, volume: str) -> VolumeReply:
        """The cdrom stays, its tray emptied; still holding media if the guest locked it."""
        target = _target(found)
        if cdrom.media(found) is not None:
            await self._virt.update_device(self._domain(), cdrom.eject_xml(found))
            found = _by_alias(await self._devices(), volume) or found
        held = cdrom.media(found) is not None
        log.info("cdrom_ejected", volume=volume, target=target, held=held)
        return VolumeReply(target=target, attached=held)

    async def detach(self, args: DetachVolumeArgs) -> VolumeReply:
        async with self._lock:
            found = _by_alias(await self._devices(), args.volume)
            if found is None:
                return VolumeReply(target=None, attached=False)
            if cdrom.is_cdrom(found):
                return await self._eject(found, args.volume)
            target = _target(found)
            await self._virt.detach_device(self._domain(), ET.tostring(found, encoding="unicode"))
            loop = asyncio.get_running_loop()
            ends = loop.time() + self._config.detach_wait
            while _by_alias(await self._devices(), args.volume) is not None:
                if loop.time() >= ends:
                    log.warning("volume_detach_ignored", volume=args.volume, target=target)
                    return VolumeReply(target=target, attached=True)
                await asyncio.sleep(self._config.poll)
            log.info("volume_detached", volume=args.volume, target=target)
            return VolumeReply(target=target, attached=False)

    async def _devices(self) -> ET.Element:
        root = ET.fromstring(await self._virt.xml(self._domain()))
        devices = root.find("devices")
        return devices if devices is not None else ET.Element("devices")


def _check(path: Path, volume: str) -> bool:
    """Whether the volume's disk is a block device (a Block claim: the handler made its
    node) rather than a file; DiskFailure when neither is there."""
    device = path.is_block_device()
    if not (device or path.is_file()):
        raise DiskFailure(f"hotplugged volume {volume!r}: {path} is not there")
    return device


def _by_alias(devices: ET.Element, volume: str) -> ET.Element | None:
    for disk in devices.findall("disk"):
        alias = disk.find("alias")
        if alias is not None and alias.get("name") == f"ua-{volume}":
            return disk
    return None


def _target(disk: ET.Element) -> str | None:
    target = disk.find("target")
    return target.get("dev") if target is not None else None


def next_free(devices: ET.Element, bus: str) -> str:
    """The first device name of the bus's prefix no disk of the domain uses."""
    used = {_target(d) for d in devices.findall("disk")}
    prefix = PREFIXES[bus]
    for index in range(MAX_DEVICES):
        name = device_name(prefix, index)
        if name not in used:
            return name
    raise DiskFailure(f"no free {bus} device name left")
