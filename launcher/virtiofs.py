"""devices.filesystems in the domain: a vhost-user-fs device per filesystem, connected to
the virtiofsd its `virtiofs-<name>` container runs (controller/services/virtiofs.py) on a
socket in the shared emptyDir (shared/virtiofs.py), tagged with the filesystem's name, so
the guest mounts it with `mount -t virtiofs <name> <dir>`. vhost-user needs the guest's
memory shared with that other process: `<memoryBacking>` gets `<access mode='shared'/>`
(memfd-backed unless hugepages back it already), as KubeVirt does.

The sidecar may start after the launcher: the start waits for each socket (a bounded wait,
then the start fails naming the filesystem and its container)."""

from __future__ import annotations

import asyncio
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import DiskFailure
from shared import virtiofs
from shared.model import VirtualMachineInstance

QUEUE_SIZE = 1024  # KubeVirt's
SOCKET_WAIT = 60.0  # seconds: the sidecar's image is the launcher's, already on the node
POLL = 0.2


@dataclass(frozen=True, slots=True, kw_only=True)
class FilesystemPlan:
    """One virtiofs share: the guest's tag and virtiofsd's socket."""

    tag: str
    socket: Path


async def prepare(vmi: VirtualMachineInstance) -> tuple[FilesystemPlan, ...]:
    """The VMI's filesystems, once each virtiofsd listens."""
    filesystems = plans(vmi)
    await wait_sockets(filesystems)
    return filesystems


def plans(vmi: VirtualMachineInstance) -> tuple[FilesystemPlan, ...]:
    """The VMI's filesystems, in spec order."""
    return tuple(
        FilesystemPlan(tag=fs.name or "", socket=Path(str(virtiofs.socket_path(fs.name or ""))))
        for fs in vmi.spec.domain.devices.filesystems
    )


async def wait_sockets(
    filesystems: tuple[FilesystemPlan, ...], *, timeout: float = SOCKET_WAIT
) -> None:
    """Return once every virtiofsd listens; DiskFailure naming the first that does not."""
    deadline = time.monotonic() + timeout
    for i, fs in enumerate(filesystems):
        while not fs.socket.is_socket():
            if time.monotonic() >= deadline:
                field = f"spec.domain.devices.filesystems[{i}]"
                raise DiskFailure(
                    f"{field}: no virtiofsd socket at {fs.socket} after {timeout:.0f} s "
                    f"(container {virtiofs.container_name(fs.tag)})"
                )
            await asyncio.sleep(POLL)


def render_backing(dom: ET.Element, filesystems: tuple[FilesystemPlan, ...]) -> None:
    """Guest memory shared with virtiofsd: memfd, or the hugepages already asked for."""
    if not filesystems:
        return
    backing = dom.find("memoryBacking")
    if backing is None:
        backing = ET.SubElement(dom, "memoryBacking")
        ET.SubElement(backing, "source", type="memfd")
    ET.SubElement(backing, "access", mode="shared")


def render_devices(devices: ET.Element, filesystems: tuple[FilesystemPlan, ...]) -> None:
    """A <filesystem> per share, on its virtiofsd's socket."""
    for fs in filesystems:
        el = ET.SubElement(devices, "filesystem", type="mount")
        ET.SubElement(el, "driver", type="virtiofs", queue=str(QUEUE_SIZE))
        ET.SubElement(el, "source", socket=str(fs.socket))
        ET.SubElement(el, "target", dir=fs.tag)
        ET.SubElement(el, "alias", name=f"ua-{fs.tag}")
