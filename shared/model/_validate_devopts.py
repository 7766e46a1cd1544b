"""Validation of the disk and interface options (shared/model/devopts.py): cache, io,
errorPolicy, blockSize, shareable, dedicatedIOThread, ioThreadsPolicy; an interface's
pciAddress, acpiIndex, bootOrder, state and dhcpOptions. Each bad value names its field.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from shared.model._validate_common import Errors
from shared.model._validate_nichotplug import validate_unplug
from shared.model.devopts import (
    BlockSize,
    CustomBlockSize,
    DHCPOptions,
    DiskCache,
    DiskErrorPolicy,
    DiskIO,
    IOThreadsPolicy,
    LinkState,
)
from shared.model.domain import Disk, Interface
from shared.model.vmi import VMISpec

# KubeVirt's PCI address form: domain:bus:slot.function, hex.
PCI_ADDRESS = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]")
BLOCK_SIZE_MIN, BLOCK_SIZE_MAX = 512, 2 * 1024 * 1024
DISCARD_GRANULARITY_MAX = 2**32 - 2  # QEMU's uint32 property (2**32 - 1: its "default")
SATA_DISCARD_GRANULARITY = (0, 512)  # QEMU's IDE devices take no other
ACPI_INDEX_MAX = 16383  # libvirt's ceiling
PRIVATE_OPTIONS = range(224, 255)  # DHCP's site-specific options (RFC 2132)
MAX_POOL_THREADS = 64


def _one_of(errs: Errors, path: str, value: str | None, allowed: Iterable[str]) -> None:
    names = [str(a) for a in allowed]
    if value is not None and value not in names:
        errs.add(path, f"must be one of {', '.join(names)}", value)


def _block_size(errs: Errors, path: str, block: BlockSize, *, bus: str) -> None:
    if (block.custom is None) == (block.match_volume is None):
        errs.add(path, "must set exactly one of custom, matchVolume")
        return
    custom = block.custom
    if custom is None:
        return
    _discard_granularity(errs, f"{path}.custom.discardGranularity", custom, bus=bus)
    for key, size in (("logical", custom.logical), ("physical", custom.physical)):
        if size is None:
            errs.add(f"{path}.custom.{key}", "is required")
        elif not BLOCK_SIZE_MIN <= size <= BLOCK_SIZE_MAX or size & (size - 1):
            errs.add(
                f"{path}.custom.{key}",
                f"must be a power of 2 from {BLOCK_SIZE_MIN} to {BLOCK_SIZE_MAX}",
                size,
            )
    logical, physical = custom.logical, custom.physical
    if logical and physical and logical > physical:
        errs.add(f"{path}.custom.logical", f"must not exceed physical ({physical})", logical)


def _discard_granularity(errs: Errors, path: str, custom: CustomBlockSize, *, bus: str) -> None:
    """KubeVirt's rule (a multiple of the logical size) and QEMU's (a uint32; 512 on IDE)."""
    granularity = custom.discard_granularity
    if granularity is None:
        return
    if not 0 <= granularity <= DISCARD_GRANULARITY_MAX:
        errs.add(path, f"must be from 0 to {DISCARD_GRANULARITY_MAX}", granularity)
    elif custom.logical and granularity % custom.logical:
        errs.add(path, f"must be a multiple of the logical size ({custom.logical})", granularity)
    elif bus == "sata" and granularity not in SATA_DISCARD_GRANULARITY:
        errs.add(path, "must be 0 or 512 on the sata bus (QEMU's IDE)", granularity)


def validate_disk_options(errs: Errors, path: str, disk: Disk) -> None:
    """One disk's options."""
    _one_of(errs, f"{path}.cache", disk.cache, DiskCache)
    _one_of(errs, f"{path}.io", disk.io, DiskIO)
    _one_of(errs, f"{path}.errorPolicy", disk.error_policy, DiskErrorPolicy)
    if disk.block_size is not None:
        _block_size(errs, f"{path}.blockSize", disk.block_size, bus=disk.effective_bus)
    if disk.io == DiskIO.NATIVE and disk.cache not in (None, DiskCache.NONE):
        errs.add(f"{path}.io", "native needs cache none (O_DIRECT)", disk.io)
    if disk.shareable and disk.cache not in (None, DiskCache.NONE):
        errs.add(f"{path}.cache", "a shareable disk must use cache none", disk.cache)
    if disk.dedicated_io_thread and disk.effective_bus != "virtio":
        errs.add(f"{path}.dedicatedIOThread", "needs the virtio bus", disk.dedicated_io_thread)
    if disk.disk is not None and (address := disk.disk.pci_address) is not None:
        if not PCI_ADDRESS.fullmatch(address):
            errs.add(f"{path}.disk.pciAddress", "must be a PCI address like 0000:00:0a.0", address)
        elif disk.effective_bus != "virtio":
            errs.add(f"{path}.disk.pciAddress", "is only for the virtio bus", address)
    if disk.cdrom is not None and disk.cdrom.tray not in (None, "open", "closed"):
        errs.add(f"{path}.cdrom.tray", "must be open or closed", disk.cdrom.tray)


def validate_io_threads(errs: Errors, path: str, spec: VMISpec) -> None:
    """ioThreadsPolicy and ioThreads.supplementalPoolThreadCount go together."""
    domain = spec.domain
    policy = domain.io_threads_policy
    _one_of(errs, f"{path}.ioThreadsPolicy", policy, IOThreadsPolicy)
    count = domain.io_threads.supplemental_pool_thread_count if domain.io_threads else None
    if policy == IOThreadsPolicy.SUPPLEMENTAL_POOL and count is None:
        errs.add(
            f"{path}.ioThreads.supplementalPoolThreadCount",
            "is required with ioThreadsPolicy supplementalPool",
        )
    if count is None:
        return
    if policy != IOThreadsPolicy.SUPPLEMENTAL_POOL:
        errs.add(
            f"{path}.ioThreads.supplementalPoolThreadCount",
            "needs ioThreadsPolicy supplementalPool",
            count,
        )
    elif not 1 <= count <= MAX_POOL_THREADS:
        errs.add(
            f"{path}.ioThreads.supplementalPoolThreadCount",
            f"must be from 1 to {MAX_POOL_THREADS}",
            count,
        )


def _dhcp_options(errs: Errors, path: str, options: DHCPOptions) -> None:
    for i, server in enumerate(options.ntp_servers):
        try:
            ipaddress.IPv4Address(server)
        except ValueError:
            errs.add(f"{path}.ntpServers[{i}]", "must be an IPv4 address", server)
    seen: set[int] = set()
    for i, private in enumerate(options.private_options):
        opt_path = f"{path}.privateOptions[{i}]"
        if private.option is None or private.option not in PRIVATE_OPTIONS:
            errs.add(f"{opt_path}.option", "must be from 224 to 254", private.option)
        elif private.option in seen:
            errs.add(f"{opt_path}.option", "is given twice", private.option)
        seen.add(private.option or 0)
        if private.value is None or not 0 < len(private.value.encode()) <= 255:
            errs.add(f"{opt_path}.value", "must be 1-255 bytes", private.value)
    for key, text in (
        ("bootFileName", options.boot_file_name),
        ("tftpServerName", options.tftp_server_name),
    ):
        if text is not None and not 0 < len(text.encode()) <= 255:
            errs.add(f"{path}.{key}", "must be 1-255 bytes", text)


def validate_interface_options(errs: Errors, path: str, iface: Interface) -> None:
    """One interface's options."""
    if iface.pci_address is not None and not PCI_ADDRESS.fullmatch(iface.pci_address):
        errs.add(f"{path}.pciAddress", "must be a PCI address like 0000:00:0a.0", iface.pci_address)
    if iface.acpi_index is not None and not 1 <= iface.acpi_index <= ACPI_INDEX_MAX:
        errs.add(f"{path}.acpiIndex", f"must be from 1 to {ACPI_INDEX_MAX}", iface.acpi_index)
    if iface.boot_order is not None and iface.boot_order < 1:
        errs.add(f"{path}.bootOrder", "must be at least 1", iface.boot_order)
    _one_of(errs, f"{path}.state", iface.state, LinkState)
    if iface.dhcp_options is not None:
        _dhcp_options(errs, f"{path}.dhcpOptions", iface.dhcp_options)


def _duplicates(errs: Errors, items: Sequence[tuple[str, object]], what: str) -> None:
    seen: dict[object, str] = {}
    for where, value in items:
        if value is None:
            continue
        if value in seen:
            errs.add(where, f"duplicate {what} {value} (also {seen[value]})", value)
        else:
            seen[value] = where


def validate_device_options(errs: Errors, path: str, spec: VMISpec) -> None:
    """Every disk's and interface's options, then what must be unique across them."""
    devices = spec.domain.devices
    disks_path = f"{path}.domain.devices.disks"
    ifaces_path = f"{path}.domain.devices.interfaces"
    for i, disk in enumerate(devices.disks):
        validate_disk_options(errs, f"{disks_path}[{i}]", disk)
    for i, iface in enumerate(devices.interfaces):
        validate_interface_options(errs, f"{ifaces_path}[{i}]", iface)
    validate_io_threads(errs, f"{path}.domain", spec)
    validate_unplug(errs, ifaces_path, spec)
    ifaces = list(enumerate(devices.interfaces))
    addresses = [(f"{disks_path}[{i}].disk.pciAddress", _lower(d.disk.pci_address))
                 for i, d in enumerate(devices.disks) if d.disk is not None]  # fmt: skip
    addresses += [(f"{ifaces_path}[{i}].pciAddress", _lower(x.pci_address)) for i, x in ifaces]
    _duplicates(errs, addresses, "pciAddress")
    _duplicates(errs, [(f"{ifaces_path}[{i}].acpiIndex", x.acpi_index) for i, x in ifaces],
                "acpiIndex")  # fmt: skip
    # Disks' own duplicates are reported by validate_disks; here interfaces against both.
    boot = [(f"{disks_path}[{i}].bootOrder", d.boot_order) for i, d in enumerate(devices.disks)]
    boot += [(f"{ifaces_path}[{i}].bootOrder", x.boot_order) for i, x in ifaces]
    _duplicates_beyond(errs, boot, first_owned=len(devices.disks))


def _lower(address: str | None) -> str | None:
    return address.lower() if address else None


def _duplicates_beyond(
    errs: Errors, items: Sequence[tuple[str, object]], *, first_owned: int
) -> None:
    """Duplicate boot orders, reporting only entries from index `first_owned` on."""
    seen: dict[object, str] = {}
    for n, (where, value) in enumerate(items):
        if value is None:
            continue
        if value in seen and n >= first_owned:
            errs.add(where, f"duplicate bootOrder {value} (also {seen[value]})", value)
        seen.setdefault(value, where)
