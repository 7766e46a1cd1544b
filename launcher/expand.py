"""Claim disks grown under the running guest (KubeVirt's ExpandDisks).

The handler sends each claim volume's capacity (its claim's status.capacity, which grows
when the claim is expanded). For each such disk of the live domain:

- a file (a Filesystem claim's disk.img, or a hotplugged one's): the size it may have is
  the capacity, aligned down to 1 MiB as KubeVirt aligns it; the file is grown (sparse)
  first, then QEMU is told (libvirt blockResize), which tells the guest;
- a block device (a Block claim): the size it may have is the device's own, which the
  kubelet grows (NodeExpandVolume) once the volume has grown; blockResize to it.

A disk whose guest-visible size is already at least that is left alone: nothing is ever
shrunk, and a repeated call changes nothing. Read-only disks are not touched.
"""

from __future__ import annotations

import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from launcher.devstats import ALIAS_PREFIX
from launcher.errors import DiskFailure
from shared.wire.expand import ExpandDisksArgs, ExpandDisksReply

log = structlog.get_logger("launcher.expand")

ALIGNMENT = 1 << 20  # KubeVirt aligns a file disk's possible size down to 1 MiB


class ExpandVirt(Protocol):
    """What expansion needs of libvirt (launcher.virt.Virt; fakes in unit tests)."""

    async def domain_xml(self, name: str) -> str: ...
    async def block_capacity(self, name: str, target: str) -> int: ...
    async def block_resize(self, name: str, target: str, size: int) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveDisk:
    """One disk of the live domain, as expansion sees it."""

    volume: str  # the VMI's disk (= volume) name, from the alias
    target: str  # vda …
    path: Path
    block: bool
    readonly: bool


def live_disks(xml: str) -> Iterator[LiveDisk]:
    """The domain's disks that are ours (aliased) and backed by a file or a device."""
    for disk in ET.fromstring(xml).iterfind("devices/disk"):
        alias, target, source = disk.find("alias"), disk.find("target"), disk.find("source")
        name = alias.get("name", "") if alias is not None else ""
        if not name.startswith(ALIAS_PREFIX) or target is None or source is None:
            continue
        path = source.get("dev") or source.get("file")
        if not path or not target.get("dev"):
            continue
        yield LiveDisk(
            volume=name.removeprefix(ALIAS_PREFIX),
            target=str(target.get("dev")),
            path=Path(path),
            block=disk.get("type") == "block",
            readonly=disk.find("readonly") is not None,
        )


def device_size(path: Path) -> int:
    """A block device's size in bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def possible_size(disk: LiveDisk, capacity: int) -> int:
    """The size the disk may have: the device's for a block disk, else the claim's
    capacity aligned down to 1 MiB."""
    if disk.block:
        return device_size(disk.path)
    return capacity // ALIGNMENT * ALIGNMENT


def grow_file(path: Path, size: int) -> None:
    """Make the (sparse) file at least `size` bytes long; never shorten it."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise DiskFailure(f"{path} is not a regular file: it cannot be grown")
    if st.st_size < size:
        os.truncate(path, size)


class DiskExpander:
    """Grows the claim disks of one domain to what their claims offer."""

    def __init__(self, *, virt: ExpandVirt, domain: Callable[[], str]) -> None:
        self._virt = virt
        self._domain = domain

    async def expand(self, args: ExpandDisksArgs) -> ExpandDisksReply:
        name = self._domain()
        expanded: dict[str, int] = {}
        for disk in live_disks(await self._virt.domain_xml(name)):
            capacity = args.capacities.get(disk.volume)
            if capacity is None or disk.readonly:
                continue
            current = await self._virt.block_capacity(name, disk.target)
            try:
                wanted = possible_size(disk, capacity)
                if wanted <= current:
                    continue
                if not disk.block:
                    grow_file(disk.path, wanted)
            except OSError as exc:
                raise DiskFailure(f"volume {disk.volume}: cannot grow {disk.path}: {exc}") from exc
            await self._virt.block_resize(name, disk.target, wanted)
            log.info("disk_expanded", volume=disk.volume, was=current, size=wanted)
            expanded[disk.volume] = wanted
        return ExpandDisksReply(expanded=expanded)
