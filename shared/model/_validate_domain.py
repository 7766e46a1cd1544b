"""Validation of spec.domain: CPU, memory, disks and direct kernel boot."""

from __future__ import annotations

import re

from shared.model._validate_common import (
    Errors,
    ValidationLimits,
    check_abs_path,
    check_image,
    check_name,
    check_pull_secret,
    check_quantity,
    check_unique_names,
)
from shared.model.domain import Disk, DomainSpec
from shared.model.errors import QuantityError
from shared.model.quantity import format_bytes, parse_millis
from shared.model.vmi import VMISpec

DISK_BUSES = frozenset({"virtio", "sata", "scsi", "usb"})
# Disks per bus that libvirt and QEMU take on the launcher's machine (pc): libvirt adds
# PCI bridges, AHCI and SCSI controllers and USB hubs as needed up to these counts, which
# tests/integration/launcher/test_many_disks.py boots at once. Names go past vdz/sdz
# (vdaa …); sata, scsi and usb disks share the sd names.
DISK_BUS_LIMITS: dict[str, int] = {"virtio": 64, "sata": 24, "scsi": 28, "usb": 4}
# virtio-blk carries at most 20 bytes of serial.
_SERIAL = re.compile(r"[A-Za-z0-9_.+-]{1,20}")
# QEMU machine type names (pc, q35, pc-q35-9.2, pc-i440fx-rhel7.6.0, virt, …).
MACHINE_TYPE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def validate_cpu(errs: Errors, path: str, domain: DomainSpec, limits: ValidationLimits) -> None:
    """Topology counts ≥ 1, total vCPUs within limits, CPU quantities well formed."""
    cpu = domain.cpu
    for name, count in (("sockets", cpu.sockets), ("cores", cpu.cores), ("threads", cpu.threads)):
        if count is not None and count < 1:
            errs.add(f"{path}.cpu.{name}", "must be at least 1", count)
    if domain.vcpus() > limits.max_vcpus:
        errs.add(
            f"{path}.cpu",
            f"sockets*cores*threads = {domain.vcpus()} exceeds the maximum of {limits.max_vcpus}",
            domain.vcpus(),
        )
    _validate_max_sockets(errs, path, domain, limits)
    for kind, res in (("requests", domain.resources.requests), ("limits", domain.resources.limits)):
        if res.cpu is None:
            continue
        cpu_path = f"{path}.resources.{kind}.cpu"
        try:
            if parse_millis(res.cpu) < 0:
                errs.add(cpu_path, "must not be negative", res.cpu)
        except QuantityError as e:
            errs.add(cpu_path, f"is not a valid quantity: {e.message}", res.cpu)


def _validate_max_sockets(
    errs: Errors, path: str, domain: DomainSpec, limits: ValidationLimits
) -> None:
    """maxSockets (the ceiling of a live sockets change) ≥ sockets, its vCPUs within limits."""
    cpu = domain.cpu
    if cpu.max_sockets is None:
        return
    if cpu.max_sockets < 1:
        errs.add(f"{path}.cpu.maxSockets", "must be at least 1", cpu.max_sockets)
        return
    if (cpu.sockets or 1) > cpu.max_sockets:
        errs.add(
            f"{path}.cpu.sockets",
            f"is greater than the maximum sockets allowed ({path}.cpu.maxSockets"
            f" = {cpu.max_sockets})",
            cpu.sockets,
        )
    most = cpu.max_sockets * (cpu.cores or 1) * (cpu.threads or 1)
    if most > limits.max_vcpus:
        errs.add(
            f"{path}.cpu.maxSockets",
            f"maxSockets*cores*threads = {most} exceeds the maximum of {limits.max_vcpus}",
            cpu.max_sockets,
        )


def _validate_max_guest(errs: Errors, path: str, domain: DomainSpec, guest: int | None) -> None:
    """maxGuest (the ceiling of a live memory raise) well formed and ≥ memory.guest."""
    max_path = f"{path}.memory.maxGuest"
    most = check_quantity(errs, max_path, domain.memory.max_guest)
    if most is None or guest is None:
        return
    if guest > most:
        errs.add(
            f"{path}.memory.guest",
            f"is greater than the maximum guest memory allowed ({max_path}"
            f" = {domain.memory.max_guest})",
            domain.memory.guest,
        )


def validate_memory(
    errs: Errors, path: str, domain: DomainSpec, limits: ValidationLimits, *, required: bool = True
) -> None:
    """Guest memory present (unless an instancetype gives it: `required` false), positive,
    within [min, max], not above the memory limit."""
    guest_path = f"{path}.memory.guest"
    req_path = f"{path}.resources.requests.memory"
    lim_path = f"{path}.resources.limits.memory"
    guest = check_quantity(errs, guest_path, domain.memory.guest)
    request = check_quantity(errs, req_path, domain.resources.requests.memory)
    limit = check_quantity(errs, lim_path, domain.resources.limits.memory)
    _validate_max_guest(errs, path, domain, guest)
    if domain.guest_memory() is None:
        if required:
            errs.add(req_path, f"memory is required: set {guest_path} or {req_path}")
        return
    if domain.memory.guest is not None:
        effective, eff_path = guest, guest_path
    else:
        effective, eff_path = request, req_path
    if effective is not None:
        if effective < limits.min_memory:
            errs.add(eff_path, f"must be at least {format_bytes(limits.min_memory)}")
        if effective > limits.max_memory:
            errs.add(eff_path, f"must be at most {format_bytes(limits.max_memory)}")
    if guest is not None and limit is not None and guest > limit:
        errs.add(guest_path, f"must not exceed {lim_path}", domain.memory.guest)
    if request is not None and limit is not None and request > limit:
        errs.add(req_path, f"must not exceed {lim_path}", domain.resources.requests.memory)


def _validate_disk(errs: Errors, path: str, disk: Disk, spec: VMISpec) -> None:
    check_name(errs, f"{path}.name", disk.name)
    kinds = (("disk", disk.disk), ("cdrom", disk.cdrom), ("lun", disk.lun))
    targets = [k for k, v in kinds if v is not None]
    if len(targets) > 1:
        errs.add(path, f"must set at most one of disk, cdrom, lun (found {', '.join(targets)})")
    for kind, target in (("disk", disk.disk), ("cdrom", disk.cdrom)):
        if target is None or target.bus is None:
            continue
        bus_path = f"{path}.{kind}.bus"
        if target.bus not in DISK_BUSES:
            errs.add(bus_path, f"must be one of {', '.join(sorted(DISK_BUSES))}", target.bus)
        elif kind == "cdrom" and target.bus == "virtio":
            errs.add(bus_path, "a cdrom cannot use the virtio bus", target.bus)
    if disk.boot_order is not None and disk.boot_order < 1:
        errs.add(f"{path}.bootOrder", "must be at least 1", disk.boot_order)
    if disk.serial is not None and not _SERIAL.fullmatch(disk.serial):
        errs.add(f"{path}.serial", "must be 1-20 of A-Z a-z 0-9 _ . + -", disk.serial)
    if disk.name and spec.volume(disk.name) is None and not disk.is_cdrom:
        # A cdrom without a volume is an empty tray (KubeVirt's declarative inject/eject).
        errs.add(
            f"{path}.name",
            f"no volume named {disk.name!r} in spec.volumes (only a cdrom may have none: "
            "an empty tray; a disk's volume cannot be ejected)",
            disk.name,
        )


def _check_bus_limits(errs: Errors, disks_path: str, disks: tuple[Disk, ...]) -> None:
    """Report the first disk past its bus's limit, naming the count and the limit."""
    counts: dict[str, int] = {}
    for i, disk in enumerate(disks):
        bus = disk.effective_bus
        if bus not in DISK_BUS_LIMITS:
            continue
        counts[bus] = counts.get(bus, 0) + 1
        limit = DISK_BUS_LIMITS[bus]
        if counts[bus] == limit + 1:
            kind = "cdrom" if disk.is_cdrom else "disk"
            total = sum(1 for d in disks if d.effective_bus == bus)
            errs.add(
                f"{disks_path}[{i}].{kind}.bus",
                f"{total} disks on the {bus} bus: at most {limit} are supported",
                bus,
            )


def validate_disks(errs: Errors, path: str, spec: VMISpec) -> None:
    """Names unique labels, one target, known bus, per-bus limits, boot order unique, a
    volume each."""
    disks = spec.domain.devices.disks
    disks_path = f"{path}.domain.devices.disks"
    for i, disk in enumerate(disks):
        _validate_disk(errs, f"{disks_path}[{i}]", disk, spec)
    _check_bus_limits(errs, disks_path, disks)
    check_unique_names(errs, disks_path, [d.name for d in disks])
    seen: dict[int, int] = {}
    for i, disk in enumerate(disks):
        order = disk.boot_order
        if order is None or order < 1:
            continue
        if order in seen:
            errs.add(
                f"{disks_path}[{i}].bootOrder",
                f"duplicate bootOrder {order} (also {disks_path}[{seen[order]}])",
                order,
            )
        else:
            seen[order] = i


def validate_kernel_boot(errs: Errors, path: str, domain: DomainSpec) -> None:
    """kernelBoot needs a container image and a kernel or initrd at clean absolute paths."""
    kb = domain.firmware.kernel_boot
    if kb is None:
        return
    kb_path = f"{path}.firmware.kernelBoot"
    container = kb.container
    if container is None:
        errs.add(f"{kb_path}.container", "is required")
        return
    c_path = f"{kb_path}.container"
    check_image(errs, f"{c_path}.image", container.image)
    check_pull_secret(errs, f"{c_path}.imagePullSecret", container.image_pull_secret)
    if not container.kernel_path and not container.initrd_path:
        errs.add(c_path, "must set kernelPath, initrdPath or both")
    check_abs_path(errs, f"{c_path}.kernelPath", container.kernel_path, required=False)
    check_abs_path(errs, f"{c_path}.initrdPath", container.initrd_path, required=False)
    if kb.kernel_args is not None and any(ch in kb.kernel_args for ch in "\n\r\t\0"):
        errs.add(f"{kb_path}.kernelArgs", "must be a single line", kb.kernel_args)


def validate_machine(errs: Errors, path: str, domain: DomainSpec) -> None:
    """machine.type, when set, is a plain QEMU machine type name (no markup, no spaces);
    an empty one means the default, as in KubeVirt (its examples write `type: ""`)."""
    machine_type = domain.machine.type
    if machine_type and not MACHINE_TYPE.fullmatch(machine_type):
        errs.add(
            f"{path}.machine.type",
            "must be a QEMU machine type: 1-64 of a-z 0-9 . _ -, starting with a letter or digit",
            machine_type,
        )
