"""CPU and memory hotplug on the running domain (KubeVirt's way, in place).

vCPUs: the domain starts with maxSockets' worth of vCPUs of which the spec's are online
(`<vcpu current=…>`); `setVcpusFlags` brings the count up (or down). Memory: the domain
starts with a virtio-mem device of maxGuest - guest (launcher.domxml) with nothing
requested; raising the guest memory raises the device's `<requested>` size, and the guest's
virtio-mem driver plugs it block by block (its `<current>` follows). Memory is never
unplugged (KubeVirt does not either: a lower request is refused). Both are idempotent: the
handler asks again until the reply shows the domain where it wants it.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Protocol

import structlog

from launcher.domxml import MEMORY_DEVICE_ALIAS
from launcher.errors import InvalidSpec, LibvirtFailure
from shared.wire.resources import HotplugResourcesArgs, ResourcesReply

log = structlog.get_logger("launcher.resources")


class ResourcesVirt(Protocol):
    """What hotplug of CPU and memory needs of libvirt (launcher.virt.Virt; fakes in tests)."""

    async def xml(self, name: str) -> str: ...
    async def set_vcpus(self, name: str, count: int) -> None: ...
    async def update_device(self, name: str, xml: str) -> None: ...


# libvirt's complaint after a vCPU hot-add under single-threaded TCG (launcher/tcgthreads.py):
# all vCPUs run on one thread, so it cannot tell their thread ids apart; the vCPU is in.
TID_UNREPORTED = "didn't report thread id for vcpu"

_SCALE = {"KiB": 1, "k": 1, "MiB": 1024, "M": 1024, "GiB": 1024 * 1024, "G": 1024 * 1024}


def _size(text: str, unit: str | None) -> int:
    """A libvirt size in KiB (libvirt writes KiB in its own XML)."""
    return int(text) * _SCALE.get(unit or "KiB", 1)


def _kib(el: ET.Element | None) -> int | None:
    if el is None or el.text is None:
        return None
    return _size(el.text, el.get("unit"))


def memory_device(root: ET.Element) -> ET.Element | None:
    """The domain's virtio-mem device (ours, by its alias)."""
    for mem in root.iterfind("devices/memory"):
        alias = mem.find("alias")
        named = alias is not None and alias.get("name") == MEMORY_DEVICE_ALIAS
        if mem.get("model") == "virtio-mem" and named:
            return mem
    return None


def observe(xml: str) -> ResourcesReply:
    """What a (live) domain XML says about its vCPUs and memory."""
    root = ET.fromstring(xml)
    vcpu = root.find("vcpu")
    most = int(vcpu.text or "1") if vcpu is not None else 1
    online = int(vcpu.get("current", most)) if vcpu is not None else most
    cell = root.find("cpu/numa/cell")
    if cell is not None:
        boot = _size(cell.get("memory", "0"), cell.get("unit"))
    else:
        boot = _kib(root.find("memory")) or 0
    mem = memory_device(root)
    if mem is None:
        return ResourcesReply(vcpus=online, max_vcpus=most, memory_boot_kib=boot)
    requested = _kib(mem.find("target/requested")) or 0
    current = _kib(mem.find("target/current"))
    return ResourcesReply(
        vcpus=online,
        max_vcpus=most,
        memory_boot_kib=boot,
        memory_requested_kib=boot + requested,
        memory_current_kib=boot + (current if current is not None else requested),
    )


def resized_memory_xml(device: ET.Element, requested_kib: int) -> str:
    """The virtio-mem device with a new requested size (updateDeviceFlags' argument)."""
    copy = ET.fromstring(ET.tostring(device, encoding="unicode"))
    target = copy.find("target")
    if target is None:
        raise InvalidSpec("the virtio-mem device has no target")
    for tag in ("current", "address"):  # read-only in an update
        for el in target.findall(tag):
            target.remove(el)
    requested = target.find("requested")
    if requested is None:
        requested = ET.SubElement(target, "requested")
    requested.text = str(requested_kib)
    requested.set("unit", "KiB")
    return ET.tostring(copy, encoding="unicode")


def _check(args: HotplugResourcesArgs, have: ResourcesReply, block_kib: int) -> int | None:
    """The virtio-mem requested size to set (None: leave it); InvalidSpec when out of bounds."""
    if args.vcpus > have.max_vcpus:
        raise InvalidSpec(
            f"{args.vcpus} vCPUs asked, the domain has room for {have.max_vcpus}",
            {"fields": [{"path": "spec.domain.cpu.sockets", "message": "above maxSockets"}]},
        )
    if args.memory_kib is None or args.memory_kib == have.memory_requested_kib:
        return None
    if have.memory_requested_kib is None:
        raise InvalidSpec(
            "the domain has no virtio-mem device (no maxGuest above the guest memory at boot)",
            {"fields": [{"path": "spec.domain.memory.guest", "message": "not hot-pluggable"}]},
        )
    want = (args.memory_kib - have.memory_boot_kib) // block_kib * block_kib
    if want + have.memory_boot_kib < have.memory_requested_kib:
        raise InvalidSpec(
            "guest memory is not unplugged live",
            {"fields": [{"path": "spec.domain.memory.guest", "message": "lower than plugged"}]},
        )
    return want


class Resources:
    """Applies vCPU counts and guest memory sizes to the launcher's one domain."""

    def __init__(self, *, virt: ResourcesVirt, domain: Callable[[], str]) -> None:
        self._virt = virt
        self._domain = domain
        self._lock = asyncio.Lock()

    async def _set_vcpus(self, count: int) -> None:
        """setVcpusFlags; libvirt's thread-id complaint under single-threaded TCG is not a
        failure (the live XML read afterwards says what the domain has)."""
        try:
            await self._virt.set_vcpus(self._domain(), count)
        except LibvirtFailure as e:
            if TID_UNREPORTED not in str(e):
                raise
            log.info("vcpu_thread_ids_shared", vcpus=count, libvirt=str(e))

    async def apply(self, args: HotplugResourcesArgs) -> ResourcesReply:
        async with self._lock:
            root = ET.fromstring(await self._virt.xml(self._domain()))
            have = observe(ET.tostring(root, encoding="unicode"))
            device = memory_device(root)
            block = _kib(device.find("target/block")) if device is not None else None
            requested = _check(args, have, block or 2048)
            if args.vcpus != have.vcpus:
                await self._set_vcpus(args.vcpus)
                log.info("vcpus_hotplugged", vcpus=args.vcpus, was=have.vcpus)
            if requested is not None and device is not None:
                await self._virt.update_device(
                    self._domain(), resized_memory_xml(device, requested)
                )
                log.info("memory_hotplug_requested", requested_kib=requested)
            if args.vcpus == have.vcpus and requested is None:
                return have
            return observe(await self._virt.xml(self._domain()))
