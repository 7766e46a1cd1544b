"""What the domain XML builder (launcher/domxml.py) renders: the fully resolved plan of a
domain (paths on disk, sizes in KiB) and of its disks and interfaces. launcher.plan
resolves a VMI into one; domxml re-exports these names."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from launcher import pinning, virtiofs
from launcher.diskxml import DiskOptions
from launcher.guestxml import GuestExtras
from launcher.nicxml import NicOptions
from launcher.passt import PasstInterface


class DiskDevice(StrEnum):
    DISK = "disk"
    CDROM = "cdrom"
    LUN = "lun"  # SCSI passthrough (launcher/lun.py)


class NetBackend(StrEnum):
    """user: QEMU's built-in NAT + DHCP (masquerade where the node cannot wire the pod);
    ethernet: a tap device (the one virt-handler made in the pod, when `tap` is named)."""

    USER = "user"
    ETHERNET = "ethernet"


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskPlan:
    alias: str
    device: DiskDevice
    bus: str
    target: str
    source: Path | None  # None: a cdrom without media
    format: str
    readonly: bool = False
    boot_order: int | None = None
    serial: str | None = None
    shared: bool = False  # on storage the migration target opens too (not copied)
    cache: str | None = None
    block: bool = False  # `source` is a block device: <disk type='block'>
    options: DiskOptions = field(default_factory=DiskOptions)  # launcher/diskxml.py


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfacePlan:
    alias: str
    backend: NetBackend
    model: str
    mac: str | None = None
    tap: str | None = None  # precreated by virt-handler: opened as is (managed='no')
    options: NicOptions = field(default_factory=NicOptions)  # launcher/nicxml.py


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    sockets: int = 1
    cores: int = 1
    threads: int = 1

    @property
    def vcpus(self) -> int:
        return self.sockets * self.cores * self.threads


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHotplugPlan:
    """KubeVirt's memory hotplug: the boot memory in one NUMA cell (virtio-mem needs one)
    and a virtio-mem device of maxGuest - boot, of which `requested` is plugged."""

    max_kib: int  # maxGuest
    requested_kib: int  # guest - boot memory (0 at start)
    block_kib: int = 2048

    def device_size_kib(self, boot_kib: int) -> int:
        return self.max_kib - boot_kib


MEMORY_DEVICE_ALIAS = "ua-memory-hotplug"


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelPlan:
    kernel: Path | None
    initrd: Path | None
    cmdline: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FirmwarePlan:
    """UEFI: the read-only code flash and this VM's variable store, made by libvirt from
    the template when absent."""

    loader: Path
    nvram: Path
    nvram_template: Path
    secure: bool


class CpuMode(StrEnum):
    HOST_MODEL = "host-model"
    HOST_PASSTHROUGH = "host-passthrough"


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainPlan:
    name: str
    uuid: str
    namespace: str
    vmi_name: str
    virt_type: str
    machine: str
    memory_kib: int
    topology: Topology
    kernel: KernelPlan | None
    disks: tuple[DiskPlan, ...]
    interfaces: tuple[InterfacePlan, ...]
    serial_log: Path
    console_socket: Path
    agent_socket: Path
    partition: str | None = None
    vnc_socket: Path | None = None  # None: no graphics device (autoattachGraphicsDevice false)
    emulator: Path = Path("/usr/bin/qemu-system-x86_64")
    tb_cache_mib: int | None = 32
    firmware: FirmwarePlan | None = None  # None: SeaBIOS
    smm: bool = False
    bios_serial: bool = False  # SeaBIOS's output on the serial console (bios.useSerial)
    # host-model, host-passthrough or a CPU model name; None: libvirt's default for TCG,
    # host-model for KVM.
    cpu_model: str | None = None
    cpu_features: tuple[tuple[str, str], ...] = ()  # (name, libvirt policy)
    rng: bool = False
    tpm: bool = False  # an emulated TPM 2.0 (launcher/tpm.py)
    tpm_persistent: bool = False  # its state in the VM's state claim (launcher/vmstate.py)
    passt: tuple[PasstInterface, ...] = ()  # started by the launcher (launcher/passt.py)
    # SMBIOS system uuid (then also the domain's <uuid>) and serial; None: not set.
    smbios_uuid: str | None = None
    smbios_serial: str | None = None
    smbios_chassis: tuple[tuple[str, str], ...] = ()  # domain.chassis: (entry name, value)
    acpi_tables: tuple[tuple[str, Path], ...] = ()  # firmware.acpi: (table type, file)
    # CPU hotplug: the topology counts maxSockets sockets, of which this many vCPUs are
    # online (`<vcpu current=…>`); None: all of them.
    vcpus_current: int | None = None
    memory_hotplug: MemoryHotplugPlan | None = None
    iothreads: int = 0  # I/O threads (launcher/diskxml.py)
    pcie_root_ports: int = 0  # q35's root ports (launcher/nicxml.py)
    # clock, features, inputs, watchdog, panic, video, sound, balloon (launcher/guestxml.py)
    extras: GuestExtras = field(default_factory=GuestExtras)
    # dedicated CPUs, hugepages, guest NUMA (launcher/pinning.py); None: none asked
    pinning: pinning.PinningPlan | None = None
    filesystems: tuple[virtiofs.FilesystemPlan, ...] = ()  # launcher/virtiofs.py

    @property
    def domain_uuid(self) -> str:
        """The guest-visible UUID: firmware.uuid when given, else the VMI's UID."""
        return self.smbios_uuid or self.uuid

    @property
    def has_sysinfo(self) -> bool:
        return (
            self.smbios_uuid is not None
            or self.smbios_serial is not None
            or bool(self.smbios_chassis)
        )
