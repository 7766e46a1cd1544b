"""A disk's options in the domain XML (KubeVirt's disk fields): cache, io and errorPolicy
on the driver, blockSize as <blockio>, shareable, virtio-blk queues (blockMultiQueue) and
the disk's I/O thread (dedicatedIOThread, ioThreadsPolicy).

I/O threads, as KubeVirt assigns them on libvirt 9.0 (which maps one thread per disk):
- `shared` (or no policy but some dedicated disk): thread 1 for every virtio disk that is
  not dedicated, one thread of its own for each dedicated disk;
- `auto`: a pool of min(2 x vCPUs, virtio disks) threads; dedicated disks take one each
  while the pool lasts, the others share the rest round-robin;
- `supplementalPool`: a pool of `supplementalPoolThreadCount` threads, virtio disks
  round-robin over it.
"""

from __future__ import annotations

import fcntl
import os
import struct
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from launcher.nicxml import pci_attributes
from shared.model import Disk
from shared.model.devopts import DiskIO, IOThreadsPolicy

BLKSSZGET, BLKPBSZGET = 0x1268, 0x127B
LOGICAL_DEFAULT = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockIO:
    logical: int
    physical: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskOptions:
    """What a disk's driver and device carry beyond its source and target."""

    io: str | None = None
    error_policy: str | None = None
    blockio: BlockIO | None = None
    shareable: bool = False
    queues: int | None = None  # virtio-blk queues (blockMultiQueue)
    iothread: int | None = None  # 1-based
    dedicated: bool = False  # dedicatedIOThread asked for
    pci_address: str | None = None  # disk.pciAddress: 0000:00:0a.0
    tray: str | None = None  # cdrom.tray: open or closed
    # blockSize.custom.discardGranularity: a QEMU property override (launcher/qemuns.py)
    discard_granularity: int | None = None


def options_of(
    disk: Disk, *, source: Path, block: bool, vcpus: int, multi_queue: bool
) -> DiskOptions:
    """A disk's options from its spec (`source` read for blockSize.matchVolume)."""
    virtio = disk.effective_bus == "virtio"
    size = disk.block_size
    blockio = None
    discard = None
    if size is not None and size.custom is not None:
        discard = size.custom.discard_granularity
        blockio = BlockIO(
            logical=size.custom.logical or LOGICAL_DEFAULT,
            physical=size.custom.physical or LOGICAL_DEFAULT,
        )
    elif size is not None and size.match_volume is not None and size.match_volume.enabled:
        blockio = volume_block_size(source, block=block)
    return DiskOptions(
        io=disk.io,
        error_policy=disk.error_policy,
        blockio=blockio,
        shareable=bool(disk.shareable),
        queues=vcpus if multi_queue and virtio and not disk.is_cdrom else None,
        dedicated=bool(disk.dedicated_io_thread) and virtio,
        pci_address=disk.disk.pci_address if disk.disk is not None else None,
        tray=disk.cdrom.tray if disk.cdrom is not None else None,
        discard_granularity=discard,
    )


def volume_block_size(source: Path, *, block: bool) -> BlockIO:
    """The sizes of a block device (its logical and physical sectors), or of a file (512
    logical, the file system's block as physical), as KubeVirt's matchVolume reads them."""
    if block:
        fd = os.open(source, os.O_RDONLY)
        try:
            logical = _ioctl_int(fd, BLKSSZGET)
            physical = _ioctl_int(fd, BLKPBSZGET)
        finally:
            os.close(fd)
        return BlockIO(logical=logical, physical=max(physical, logical))
    fs_block = os.statvfs(source).f_bsize
    return BlockIO(logical=LOGICAL_DEFAULT, physical=max(fs_block, LOGICAL_DEFAULT))


def _ioctl_int(fd: int, request: int) -> int:
    out = fcntl.ioctl(fd, request, struct.pack("I", 0))
    return int(struct.unpack("I", out)[0])


def assign_threads(
    plans: Sequence[tuple[bool, DiskOptions]], *, policy: str | None, pool: int | None, vcpus: int
) -> tuple[int, list[DiskOptions]]:
    """(thread count, each disk's options with its thread) for (is_virtio, options) pairs."""
    dedicated = sum(1 for virtio, o in plans if virtio and o.dedicated)
    virtio_disks = sum(1 for virtio, _ in plans if virtio)
    if policy == IOThreadsPolicy.SUPPLEMENTAL_POOL:
        count = max(1, pool or 1)
    elif policy == IOThreadsPolicy.AUTO:
        count = max(1, min(2 * vcpus, virtio_disks))
    elif policy == IOThreadsPolicy.SHARED or dedicated:
        count = 1 + dedicated
    else:
        return 0, [o for _, o in plans]
    out: list[DiskOptions] = []
    shared_ids = _shared_ids(policy, count=count, dedicated=dedicated)
    next_own, turn = count - dedicated + 1, 0
    for virtio, o in plans:
        if not virtio:
            out.append(o)
        elif o.dedicated and policy != IOThreadsPolicy.SUPPLEMENTAL_POOL and next_own <= count:
            out.append(replace(o, iothread=next_own))
            next_own += 1
        else:
            out.append(replace(o, iothread=shared_ids[turn % len(shared_ids)]))
            turn += 1
    return count, out


def _shared_ids(policy: str | None, *, count: int, dedicated: int) -> list[int]:
    """The threads non-dedicated disks rotate over: all but the dedicated ones (at least 1)."""
    if policy == IOThreadsPolicy.SUPPLEMENTAL_POOL:
        return list(range(1, count + 1))
    return list(range(1, max(1, count - dedicated) + 1))


def render(el: ET.Element, driver: ET.Element, options: DiskOptions) -> None:
    """The options onto a <disk> element and its <driver>."""
    if options.io and options.io != DiskIO.DEFAULT:  # default: QEMU's own choice
        driver.set("io", options.io)
    if options.error_policy:
        driver.set("error_policy", options.error_policy)
    if options.queues:
        driver.set("queues", str(options.queues))
    if options.iothread:
        driver.set("iothread", str(options.iothread))
    if options.shareable:
        ET.SubElement(el, "shareable")
    if options.blockio is not None:
        ET.SubElement(
            el,
            "blockio",
            logical_block_size=str(options.blockio.logical),
            physical_block_size=str(options.blockio.physical),
        )
    if options.tray and (target := el.find("target")) is not None:
        target.set("tray", options.tray)
    if options.pci_address:
        ET.SubElement(el, "address", pci_attributes(options.pci_address))
