"""spec.domain of a VirtualMachineInstance: CPU, memory, resources, devices, firmware.

Container objects (cpu, memory, resources, devices, …) default to empty instances so the
daemons can walk `vmi.spec.domain.devices.disks` without None checks; objects whose
presence is the meaning (disk vs cdrom, masquerade vs bridge, kernelBoot) are Optional.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.model._codec import Model, json_name
from shared.model.devopts import BlockSize, DHCPOptions, IOThreads
from shared.model.downwardmetrics import DownwardMetricsDevice
from shared.model.features import FeatureAPIC, FeatureHyperv, FeatureKVM, HyperVPassthrough
from shared.model.filesystems import Filesystem
from shared.model.firmware import Firmware, KernelBoot
from shared.model.guestdevices import (
    Chassis,
    Clock,
    Input,
    PanicDevice,
    SoundDevice,
    VideoDevice,
    Watchdog,
)
from shared.model.noderes import NUMA, Hugepages, Realtime
from shared.model.quantity import parse_bytes, parse_millis


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUFeature(Model):
    """domain.cpu.features[]: a CPU feature and its libvirt policy (unset: require)."""

    name: str | None = None
    policy: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CPU(Model):
    """domain.cpu: topology and model (host-model, host-passthrough or a named QEMU CPU
    model; unset: the launcher's default); unset counts are 1."""

    sockets: int | None = None
    cores: int | None = None
    threads: int | None = None
    model: str | None = None
    # The ceiling of a live sockets change (KubeVirt's CPU hotplug); unset: no hotplug.
    max_sockets: int | None = None
    features: tuple[CPUFeature, ...] = ()
    # dedicated CPUs, emulator thread, guest NUMA, realtime (shared/model/noderes.py)
    dedicated_cpu_placement: bool | None = None
    isolate_emulator_thread: bool | None = None
    numa: NUMA | None = None
    realtime: Realtime | None = None

    def vcpus(self) -> int:
        """sockets * cores * threads, each defaulting to 1."""
        return (self.sockets or 1) * (self.cores or 1) * (self.threads or 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory(Model):
    """domain.memory: the guest-visible memory; maxGuest is the ceiling of a live raise
    (KubeVirt's memory hotplug, a virtio-mem device); unset: no hotplug."""

    guest: str | int | None = None
    max_guest: str | int | None = None
    hugepages: Hugepages | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceList(Model):
    """A Kubernetes ResourceList; resources other than memory and cpu stay in `extra`."""

    memory: str | int | None = None
    cpu: str | int | None = None

    def memory_bytes(self) -> int | None:
        """memory in bytes, or None when unset; raises QuantityError when malformed."""
        return None if self.memory is None else parse_bytes(self.memory)

    def cpu_millis(self) -> int | None:
        """cpu in millicores, or None when unset; raises QuantityError when malformed."""
        return None if self.cpu is None else parse_millis(self.cpu)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceRequirements(Model):
    """domain.resources; overcommitGuestOverhead: the launcher's overhead goes into the
    memory limit only, not the request the scheduler counts (KubeVirt's meaning)."""

    requests: ResourceList = field(default_factory=ResourceList)
    limits: ResourceList = field(default_factory=ResourceList)
    overcommit_guest_overhead: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskTarget(Model):
    """disks[].disk: a plain disk (pciAddress: where a virtio disk sits, 0000:00:0a.0)."""

    bus: str | None = None
    readonly: bool | None = None
    pci_address: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CDRomTarget(Model):
    """disks[].cdrom: a CD-ROM (read-only unless readonly is false; tray open or closed,
    KubeVirt's default closed)."""

    bus: str | None = None
    readonly: bool | None = None
    tray: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LunTarget(Model):
    """disks[].lun: SCSI passthrough of a Block claim's device (launcher/lun.py); the bus
    is scsi (KubeVirt's `reservation` is refused)."""

    bus: str | None = None
    readonly: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Disk(Model):
    """domain.devices.disks[]: paired by name with spec.volumes[]."""

    name: str | None = None
    disk: DiskTarget | None = None
    cdrom: CDRomTarget | None = None
    lun: LunTarget | None = None
    tag: str | None = None  # in the config drive's device metadata (launcher/devtags.py)
    boot_order: int | None = None
    serial: str | None = None
    # Options (launcher/diskxml.py): cache, io, errorPolicy as libvirt's driver attributes.
    cache: str | None = None
    io: str | None = None
    error_policy: str | None = None
    block_size: BlockSize | None = None
    shareable: bool | None = None
    dedicated_io_thread: bool | None = field(default=None, metadata=json_name("dedicatedIOThread"))

    @property
    def bus(self) -> str | None:
        """The bus of whichever target is set."""
        target = self.disk or self.cdrom or self.lun
        return target.bus if target is not None else None

    @property
    def is_cdrom(self) -> bool:
        """True for cdrom devices."""
        return self.cdrom is not None

    @property
    def effective_bus(self) -> str:
        """The bus, or the default when unset (sata for a cdrom, scsi for a lun, virtio
        otherwise)."""
        default = "sata" if self.is_cdrom else "scsi" if self.lun is not None else "virtio"
        return self.bus or default


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfaceMasquerade(Model):
    """interfaces[].masquerade: NAT behind the pod IP (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfaceBridge(Model):
    """interfaces[].bridge: the guest takes the pod interface (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfacePasstBinding(Model):
    """interfaces[].passtBinding: passt (user-mode, the pod's address) in front of the guest
    (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginBinding(Model):
    """interfaces[].binding: a network binding plugin the KubeVirt CR registers, by name
    (shared/model/binding.py)."""

    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfacePort(Model):
    """interfaces[].ports[]: a guest port masquerade forwards from the pod's IP."""

    name: str | None = None
    protocol: str | None = None  # TCP (default) or UDP
    port: int = 0


# Binding methods KubeVirt knows; masquerade, bridge, passtBinding and binding are typed here.
UNTYPED_BINDINGS = ("slirp", "sriov", "passt", "macvtap")
PASST_PLUGIN = "passt"  # KubeVirt's passt binding plugin: run as passtBinding is


@dataclass(frozen=True, slots=True, kw_only=True)
class Interface(Model):
    """domain.devices.interfaces[]: paired by name with spec.networks[]."""

    name: str | None = None
    masquerade: InterfaceMasquerade | None = None
    bridge: InterfaceBridge | None = None
    passt_binding: InterfacePasstBinding | None = None
    binding: PluginBinding | None = None  # a network binding plugin (shared/netbinding.py)
    model: str | None = None
    mac_address: str | None = None
    ports: tuple[InterfacePort, ...] = ()
    pci_address: str | None = None
    acpi_index: int | None = None
    boot_order: int | None = None
    state: str | None = None  # up or down (LinkState); changed live on a running VM
    dhcp_options: DHCPOptions | None = None
    tag: str | None = None  # in the config drive's device metadata (launcher/devtags.py)

    def bindings(self) -> tuple[str, ...]:
        """Wire names of every binding method set on this interface."""
        typed = (
            ("masquerade", self.masquerade),
            ("bridge", self.bridge),
            ("passtBinding", self.passt_binding),
            ("binding", self.binding),
        )
        found = [key for key, value in typed if value is not None]
        found += [key for key in UNTYPED_BINDINGS if self.extra.get(key) is not None]
        return tuple(found)

    def uses_passt(self) -> bool:
        """passt in front of the guest: `passtBinding`, or KubeVirt's `passt` plugin."""
        plugin = self.binding.name if self.binding is not None else None
        return self.passt_binding is not None or plugin == PASST_PLUGIN


@dataclass(frozen=True, slots=True, kw_only=True)
class Rng(Model):
    """devices.rng: a virtio-rng device fed from the launcher's /dev/urandom (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TPM(Model):
    """devices.tpm: an emulated TPM 2.0 (swtpm, started by libvirt); `{}` enables it,
    `enabled: false` disables it; `persistent: true` keeps its state in the VM's state
    claim (shared/vmstate.py) across restarts."""

    enabled: bool | None = None
    persistent: bool | None = None

    @property
    def on(self) -> bool:
        """enabled, true when unset."""
        return self.enabled is not False


@dataclass(frozen=True, slots=True, kw_only=True)
class Devices(Model):
    """domain.devices (autoattachPodInterface/GraphicsDevice stay in `extra`)."""

    disks: tuple[Disk, ...] = ()
    interfaces: tuple[Interface, ...] = ()
    rng: Rng | None = None
    block_multi_queue: bool | None = None  # queues = vCPUs on virtio disks
    network_interface_multiqueue: bool | None = None  # queues = vCPUs on virtio NICs
    # shared/model/guestdevices.py
    inputs: tuple[Input, ...] = ()
    watchdog: Watchdog | None = None
    panic_devices: tuple[PanicDevice, ...] = ()
    video: VideoDevice | None = None
    sound: SoundDevice | None = None
    autoattach_mem_balloon: bool | None = None
    autoattach_input_device: bool | None = None
    autoattach_serial_console: bool | None = None
    log_serial_console: bool | None = None
    tpm: TPM | None = None
    use_virtio_transitional: bool | None = None  # launcher/transitional.py
    disable_hotplug: bool | None = None  # no hotplugged disks, no spare root ports
    # a virtio-vsock device (handler/vsock.py: its CID)
    autoattach_vsock: bool | None = field(default=None, metadata=json_name("autoattachVSOCK"))
    downward_metrics: DownwardMetricsDevice | None = None  # the vhostmd channel
    filesystems: tuple[Filesystem, ...] = ()  # virtiofs shares (shared/model/filesystems.py)

    def disk(self, name: str) -> Disk | None:
        """The disk with this name, if any."""
        return next((d for d in self.disks if d.name == name), None)

    def interface(self, name: str) -> Interface | None:
        """The interface with this name, if any."""
        return next((i for i in self.interfaces if i.name == name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureState(Model):
    """A domain feature switch; enabled defaults to true, as in KubeVirt."""

    enabled: bool | None = None

    @property
    def on(self) -> bool:
        """enabled, true when unset."""
        return self.enabled is not False


@dataclass(frozen=True, slots=True, kw_only=True)
class Features(Model):
    """domain.features (the KVM-only ones: shared/model/features.py)."""

    smm: FeatureState | None = None
    acpi: FeatureState | None = None
    apic: FeatureAPIC | None = None
    hyperv: FeatureHyperv | None = None
    kvm: FeatureKVM | None = None
    pvspinlock: FeatureState | None = None
    hyperv_passthrough: HyperVPassthrough | None = None

    @property
    def smm_on(self) -> bool:
        """SMM is asked for (smm set and not disabled)."""
        return self.smm is not None and self.smm.on


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine(Model):
    """domain.machine."""

    type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainSpec(Model):
    """spec.domain."""

    cpu: CPU = field(default_factory=CPU)
    memory: Memory = field(default_factory=Memory)
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    devices: Devices = field(default_factory=Devices)
    firmware: Firmware = field(default_factory=Firmware)
    machine: Machine = field(default_factory=Machine)
    features: Features = field(default_factory=Features)
    io_threads_policy: str | None = None  # IOThreadsPolicy
    io_threads: IOThreads | None = None
    clock: Clock | None = None
    chassis: Chassis | None = None

    def guest_memory(self) -> str | int | None:
        """The guest memory quantity: memory.guest, else resources.requests.memory."""
        if self.memory.guest is not None:
            return self.memory.guest
        return self.resources.requests.memory

    def guest_memory_bytes(self) -> int | None:
        """Guest memory in bytes (memory.guest, else requests.memory), None when neither."""
        quantity = self.guest_memory()
        return None if quantity is None else parse_bytes(quantity)

    def vcpus(self) -> int:
        """The guest's vCPU count from the CPU topology."""
        return self.cpu.vcpus()

    @property
    def kernel_boot(self) -> KernelBoot | None:
        """firmware.kernelBoot, if set."""
        return self.firmware.kernel_boot
