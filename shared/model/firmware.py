"""spec.domain.firmware of a VirtualMachineInstance: the boot loader (bios or efi), direct
kernel boot from a container image, the SMBIOS system identity and ACPI tables."""

from __future__ import annotations

from dataclasses import dataclass

from shared.model._codec import Model
from shared.model.enums import PullPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelBootContainer(Model):
    """firmware.kernelBoot.container: the image holding the kernel and initrd."""

    image: str | None = None
    kernel_path: str | None = None
    initrd_path: str | None = None
    image_pull_policy: PullPolicy | None = None
    image_pull_secret: str | None = None  # a Secret the launcher pod pulls the image with


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelBoot(Model):
    """firmware.kernelBoot: direct kernel boot."""

    container: KernelBootContainer | None = None
    kernel_args: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EFI(Model):
    """bootloader.efi: UEFI (OVMF); secureBoot defaults to true, as in KubeVirt;
    `persistent: true` keeps the NVRAM in the VM's state claim (shared/vmstate.py)."""

    secure_boot: bool | None = None
    persistent: bool | None = None

    @property
    def secure(self) -> bool:
        """secureBoot, true when unset."""
        return self.secure_boot is not False


@dataclass(frozen=True, slots=True, kw_only=True)
class BIOS(Model):
    """bootloader.bios: SeaBIOS, the default; useSerial sends its output to the serial
    console too (`<bios useserial='yes'>`)."""

    use_serial: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Bootloader(Model):
    """firmware.bootloader: bios (the default) or efi."""

    bios: BIOS | None = None
    efi: EFI | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ACPI(Model):
    """firmware.acpi: extra ACPI tables from Secret volumes (their key `slic.bin` /
    `msdm.bin`), Windows' OEM activation; the volume has no disk."""

    slic_name_ref: str | None = None
    msdm_name_ref: str | None = None

    def refs(self) -> tuple[tuple[str, str], ...]:
        """(field, volume name) of the tables set."""
        pairs = (("slicNameRef", self.slic_name_ref), ("msdmNameRef", self.msdm_name_ref))
        return tuple((f, name) for f, name in pairs if name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Firmware(Model):
    """domain.firmware: boot loader, direct kernel boot, the SMBIOS identity and ACPI
    tables."""

    uuid: str | None = None
    serial: str | None = None
    bootloader: Bootloader | None = None
    kernel_boot: KernelBoot | None = None
    acpi: ACPI | None = None

    def acpi_volumes(self) -> frozenset[str]:
        """The volumes firmware.acpi names (diskless: their files are tables)."""
        return frozenset(name for _, name in self.acpi.refs()) if self.acpi else frozenset()

    @property
    def efi(self) -> EFI | None:
        """bootloader.efi, if set."""
        return self.bootloader.efi if self.bootloader is not None else None
