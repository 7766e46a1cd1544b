"""instancetype.kubevirt.io/v1beta1 preference specs: every field of KubeVirt v1.8's
VirtualMachinePreferenceSpec (kubevirt.io/api instancetype/v1beta1).

A preference is a set of defaults a VM's template falls back on (shared.instancetypes
applies them). Its scalar fields are typed and validated here; the kubevirt.io/v1 objects
it hands to the VMI whole (an Rng, an EFI, a TPM, a clock offset, …) are `VMIPart`s: the
VMI's own admission checks them once they are applied, and a VM whose VMI would carry a
field kubevirt-py does not honour is refused naming the preference field.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.model._codec import Model, json_name


@dataclass(frozen=True, slots=True, kw_only=True)
class VMIPart(Model):
    """A kubevirt.io/v1 object an instancetype or preference hands to the VMI whole
    (hugepages, NUMA, GPUs, an Rng, a TPM, …): its keys are checked where the VMI takes
    it (the VMI's admission), not in the instancetype.kubevirt.io object."""


class PreferredCPUTopology(enum.StrEnum):
    """preference spec.cpu.preferredCPUTopology (the prefer* spellings are deprecated)."""

    PREFER_CORES = "preferCores"
    PREFER_SOCKETS = "preferSockets"
    PREFER_THREADS = "preferThreads"
    PREFER_SPREAD = "preferSpread"
    PREFER_ANY = "preferAny"
    CORES = "cores"
    SOCKETS = "sockets"
    THREADS = "threads"
    SPREAD = "spread"
    ANY = "any"


class SpreadAcross(enum.StrEnum):
    """preference spec.cpu.spreadOptions.across."""

    SOCKETS_CORES_THREADS = "SocketsCoresThreads"
    SOCKETS_CORES = "SocketsCores"
    CORES_THREADS = "CoresThreads"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpreadOptions(Model):
    """preference spec.cpu.spreadOptions."""

    across: SpreadAcross | None = None
    ratio: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUPreferences(Model):
    """preference spec.cpu."""

    preferred_cpu_topology: PreferredCPUTopology | None = field(
        default=None, metadata=json_name("preferredCPUTopology")
    )
    spread_options: SpreadOptions | None = None
    preferred_cpu_features: tuple[VMIPart, ...] = field(
        default=(), metadata=json_name("preferredCPUFeatures")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DevicePreferences(Model):
    """preference spec.devices."""

    preferred_autoattach_graphics_device: bool | None = None
    preferred_autoattach_mem_balloon: bool | None = None
    preferred_autoattach_pod_interface: bool | None = None
    preferred_autoattach_serial_console: bool | None = None
    preferred_autoattach_input_device: bool | None = None
    preferred_disable_hotplug: bool | None = None
    preferred_virtual_gpu_options: VMIPart | None = field(
        default=None, metadata=json_name("preferredVirtualGPUOptions")
    )
    preferred_sound_model: str | None = None
    preferred_use_virtio_transitional: bool | None = None
    preferred_input_bus: str | None = None
    preferred_input_type: str | None = None
    preferred_disk_bus: str | None = None
    preferred_lun_bus: str | None = None
    preferred_cdrom_bus: str | None = None
    preferred_disk_dedicated_io_thread: bool | None = None
    preferred_disk_cache: str | None = None
    preferred_disk_io: str | None = field(default=None, metadata=json_name("preferredDiskIO"))
    preferred_disk_block_size: VMIPart | None = None
    preferred_interface_model: str | None = None
    preferred_rng: VMIPart | None = None
    preferred_block_multi_queue: bool | None = None
    preferred_network_interface_multi_queue: bool | None = None
    preferred_tpm: VMIPart | None = field(default=None, metadata=json_name("preferredTPM"))
    preferred_interface_masquerade: VMIPart | None = None
    preferred_panic_device_model: str | None = None
    preferred_video_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeaturePreferences(Model):
    """preference spec.features."""

    preferred_acpi: VMIPart | None = None
    preferred_apic: VMIPart | None = None
    preferred_hyperv: VMIPart | None = None
    preferred_kvm: VMIPart | None = None
    preferred_pvspinlock: VMIPart | None = None
    preferred_smm: VMIPart | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FirmwarePreferences(Model):
    """preference spec.firmware (preferredUseEfi and preferredUseSecureBoot deprecated)."""

    preferred_use_bios: bool | None = None
    preferred_use_bios_serial: bool | None = None
    preferred_use_efi: bool | None = None
    preferred_use_secure_boot: bool | None = None
    preferred_efi: VMIPart | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MachinePreferences(Model):
    """preference spec.machine."""

    preferred_machine_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockPreferences(Model):
    """preference spec.clock."""

    preferred_clock_offset: VMIPart | None = None
    preferred_timer: VMIPart | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumePreferences(Model):
    """preference spec.volumes."""

    preferred_storage_class_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUPreferenceRequirement(Model):
    """preference spec.requirements.cpu: the fewest vCPUs the preference accepts."""

    guest: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPreferenceRequirement(Model):
    """preference spec.requirements.memory: the least guest memory it accepts."""

    guest: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferenceRequirements(Model):
    """preference spec.requirements, enforced at VM admission."""

    cpu: CPUPreferenceRequirement | None = None
    memory: MemoryPreferenceRequirement | None = None
    architecture: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferenceSpec(Model):
    """The spec of a VirtualMachine(Cluster)Preference."""

    clock: ClockPreferences = field(default_factory=ClockPreferences)
    cpu: CPUPreferences = field(default_factory=CPUPreferences)
    devices: DevicePreferences = field(default_factory=DevicePreferences)
    features: FeaturePreferences = field(default_factory=FeaturePreferences)
    firmware: FirmwarePreferences = field(default_factory=FirmwarePreferences)
    machine: MachinePreferences = field(default_factory=MachinePreferences)
    volumes: VolumePreferences = field(default_factory=VolumePreferences)
    preferred_subdomain: str | None = None
    preferred_termination_grace_period_seconds: int | None = None
    requirements: PreferenceRequirements | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    prefer_spread_socket_to_core_ratio: int | None = None
    preferred_architecture: str | None = None


PREFERENCE_CLASSES: tuple[type[Model], ...] = (
    PreferenceSpec,
    ClockPreferences,
    CPUPreferences,
    SpreadOptions,
    DevicePreferences,
    FeaturePreferences,
    FirmwarePreferences,
    MachinePreferences,
    VolumePreferences,
    PreferenceRequirements,
    CPUPreferenceRequirement,
    MemoryPreferenceRequirement,
)
