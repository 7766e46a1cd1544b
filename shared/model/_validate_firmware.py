"""Validation of the guest's platform: boot loader (BIOS / EFI, secure boot and SMM),
SMBIOS identity (firmware.uuid, firmware.serial, chassis) and the CPU model.

KubeVirt's rules: secure boot (the default once efi is set) needs SMM enabled; bios and
efi exclude each other. Ours on top: secure boot needs a q35 machine (libvirt's rule for
a secure flash; admission defaults the machine type to q35 for it), and under emulation
(TCG) the CPU model must be one TCG can run.
"""

from __future__ import annotations

import re
import uuid

from shared.model._validate_common import Errors, ValidationLimits
from shared.model.domain import DomainSpec
from shared.model.vmi import VMISpec

# What QEMU 7.2 under TCG reports usable (libvirt domcapabilities, virttype qemu;
# tests/integration/launcher/test_firmware.py checks this list against the host's).
TCG_CPU_MODELS = frozenset(
    {
        "486", "pentium", "pentium2", "pentium3", "qemu32", "qemu64", "kvm32", "kvm64",
        "coreduo", "core2duo", "n270", "athlon", "Conroe", "Penryn", "Nehalem", "Westmere",
        "Opteron_G1", "Opteron_G2",
    }
)  # fmt: skip
HOST_MODEL = "host-model"
HOST_PASSTHROUGH = "host-passthrough"
# libvirt / QEMU CPU model names (Skylake-Client-IBRS, Opteron_G2, 486, …).
_CPU_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# SMBIOS strings: printable ASCII, as QEMU passes them to the guest.
_SMBIOS_TEXT = re.compile(r"[\x20-\x7e]{1,255}")
_Q35 = re.compile(r"q35|pc-q35-[0-9a-z._-]+")


def is_q35(machine_type: str) -> bool:
    """q35 or a versioned pc-q35-* machine type."""
    return bool(_Q35.fullmatch(machine_type))


def validate_cpu_model(
    errs: Errors, path: str, domain: DomainSpec, limits: ValidationLimits
) -> None:
    """cpu.model is host-model, host-passthrough or a CPU model name; under emulation
    only what TCG runs (no host-passthrough, named models TCG reports usable)."""
    model = domain.cpu.model
    if model is None:
        return
    where = f"{path}.cpu.model"
    if not _CPU_MODEL.fullmatch(model):
        errs.add(where, "must be host-model, host-passthrough or a CPU model name", model)
        return
    if not limits.emulation:
        return
    if model == HOST_PASSTHROUGH:
        errs.add(where, "host-passthrough cannot run under emulation (TCG): no host CPU", model)
    elif model != HOST_MODEL and model not in TCG_CPU_MODELS:
        usable = ", ".join(sorted(TCG_CPU_MODELS, key=str.lower))
        errs.add(where, f"cannot run under emulation (TCG); usable models: {usable}", model)


def validate_firmware(errs: Errors, path: str, domain: DomainSpec) -> None:
    """One boot loader; secure boot with SMM on a q35 machine; a UUID; SMBIOS serial."""
    fw = domain.firmware
    fw_path = f"{path}.firmware"
    if fw.uuid is not None:
        try:
            ok = str(uuid.UUID(fw.uuid)) == fw.uuid.lower()
        except ValueError:
            ok = False
        if not ok:
            errs.add(f"{fw_path}.uuid", "must be a UUID (8-4-4-4-12 hex digits)", fw.uuid)
    if fw.serial is not None and not _SMBIOS_TEXT.fullmatch(fw.serial):
        errs.add(f"{fw_path}.serial", "must be 1-255 printable ASCII characters", fw.serial)
    chassis = domain.chassis.entries() if domain.chassis is not None else ()
    for name, value in chassis:
        if not _SMBIOS_TEXT.fullmatch(value):
            errs.add(f"{path}.chassis.{name}", "must be 1-255 printable ASCII characters", value)
    boot = fw.bootloader
    if boot is None:
        return
    if boot.bios is not None and boot.efi is not None:
        errs.add(f"{fw_path}.bootloader", "must set at most one of bios, efi")
    efi = boot.efi
    if efi is None or not efi.secure:
        return
    secure_path = f"{fw_path}.bootloader.efi.secureBoot"
    if not domain.features.smm_on:
        errs.add(
            secure_path,
            f"EFI secure boot needs SMM: set {path}.features.smm.enabled (or secureBoot false)",
            efi.secure_boot,
        )
    machine = domain.machine.type
    if machine and not is_q35(machine):
        errs.add(
            f"{path}.machine.type",
            "EFI secure boot needs a q35 machine type (q35 or pc-q35-*)",
            machine,
        )


def validate_acpi(errs: Errors, path: str, spec: VMISpec) -> None:
    """firmware.acpi: each table names a Secret volume of the VMI that no disk uses (its
    file is the table); MSDM is refused: the libvirt here (9.0) knows only SLIC."""
    acpi = spec.domain.firmware.acpi
    if acpi is None:
        return
    acpi_path = f"{path}.domain.firmware.acpi"
    disks = {d.name for d in spec.domain.devices.disks}
    volumes = {v.name: v for v in spec.volumes if v.name}
    for field, name in acpi.refs():
        where = f"{acpi_path}.{field}"
        if field == "msdmNameRef":
            errs.add(where, "the MSDM table needs a newer libvirt than these nodes' 9.0", name)
        volume = volumes.get(name)
        if volume is None:
            errs.add(where, f"no volume named {name!r} in {path}.volumes", name)
        elif volume.secret is None:
            errs.add(where, f"volume {name!r} must be a Secret volume", name)
        elif name in disks:
            errs.add(where, f"volume {name!r} is an ACPI table and cannot be a disk too", name)
