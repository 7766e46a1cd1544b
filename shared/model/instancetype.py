"""instancetype.kubevirt.io/v1beta1: instancetypes (the CPU and memory a VM gets) and
preferences (the defaults a VM's template falls back on), namespaced and cluster-wide.

The subset typed here is the subset kubevirt-py honours:
- instancetype: spec.cpu.guest (vCPUs, laid out as sockets as KubeVirt's default
  preferSockets does), spec.memory.guest;
- preference: spec.devices.preferredDiskBus, preferredCdromBus, preferredInterfaceModel,
  spec.machine.preferredMachineType.
Everything else stays in `extra` (KubeVirt fields such as cpu.dedicatedCPUPlacement or
preferredCPUTopology are not honoured; `unsupported_instancetype_fields` names them).
A VM names them in spec.instancetype / spec.preference (`InstancetypeMatcher`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model
from shared.model.meta import ObjectMeta

INSTANCETYPE_GROUP = "instancetype.kubevirt.io"
INSTANCETYPE_VERSION = "v1beta1"
INSTANCETYPE_API_VERSION = f"{INSTANCETYPE_GROUP}/{INSTANCETYPE_VERSION}"


@dataclass(frozen=True, slots=True, kw_only=True)
class InstancetypeMatcher(Model):
    """VM spec.instancetype / spec.preference: which object, and the revision captured."""

    name: str | None = None
    kind: str | None = None
    revision_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUInstancetype(Model):
    """instancetype spec.cpu."""

    guest: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryInstancetype(Model):
    """instancetype spec.memory."""

    guest: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InstancetypeSpec(Model):
    """The spec of a VirtualMachine(Cluster)Instancetype."""

    cpu: CPUInstancetype = field(default_factory=CPUInstancetype)
    memory: MemoryInstancetype = field(default_factory=MemoryInstancetype)


@dataclass(frozen=True, slots=True, kw_only=True)
class DevicePreferences(Model):
    """preference spec.devices."""

    preferred_disk_bus: str | None = None
    preferred_cdrom_bus: str | None = None
    preferred_interface_model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MachinePreferences(Model):
    """preference spec.machine."""

    preferred_machine_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferenceSpec(Model):
    """The spec of a VirtualMachine(Cluster)Preference."""

    devices: DevicePreferences = field(default_factory=DevicePreferences)
    machine: MachinePreferences = field(default_factory=MachinePreferences)


@dataclass(frozen=True, slots=True, kw_only=True)
class InstancetypeObject(Model):
    """What the four instancetype.kubevirt.io kinds share."""

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    SINGULAR: ClassVar[str] = ""
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = field(default_factory=ObjectMeta)


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineInstancetype(InstancetypeObject):
    """instancetype.kubevirt.io/v1beta1 VirtualMachineInstancetype (vminstancetype)."""

    KIND: ClassVar[str] = "VirtualMachineInstancetype"
    PLURAL: ClassVar[str] = "virtualmachineinstancetypes"
    SINGULAR: ClassVar[str] = "virtualmachineinstancetype"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("vminstancetype", "vminstancetypes", "vmf", "vmfs")

    spec: InstancetypeSpec = field(default_factory=InstancetypeSpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineClusterInstancetype(InstancetypeObject):
    """instancetype.kubevirt.io/v1beta1 VirtualMachineClusterInstancetype (vmcf)."""

    KIND: ClassVar[str] = "VirtualMachineClusterInstancetype"
    PLURAL: ClassVar[str] = "virtualmachineclusterinstancetypes"
    SINGULAR: ClassVar[str] = "virtualmachineclusterinstancetype"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = (
        "vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs",
    )  # fmt: skip
    NAMESPACED: ClassVar[bool] = False

    spec: InstancetypeSpec = field(default_factory=InstancetypeSpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachinePreference(InstancetypeObject):
    """instancetype.kubevirt.io/v1beta1 VirtualMachinePreference (vmpref)."""

    KIND: ClassVar[str] = "VirtualMachinePreference"
    PLURAL: ClassVar[str] = "virtualmachinepreferences"
    SINGULAR: ClassVar[str] = "virtualmachinepreference"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("vmpref", "vmprefs", "vmp", "vmps")

    spec: PreferenceSpec = field(default_factory=PreferenceSpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineClusterPreference(InstancetypeObject):
    """instancetype.kubevirt.io/v1beta1 VirtualMachineClusterPreference (vmclusterpref)."""

    KIND: ClassVar[str] = "VirtualMachineClusterPreference"
    PLURAL: ClassVar[str] = "virtualmachineclusterpreferences"
    SINGULAR: ClassVar[str] = "virtualmachineclusterpreference"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("vmclusterpref", "vmclusterprefs", "vmcp", "vmcps")
    NAMESPACED: ClassVar[bool] = False

    spec: PreferenceSpec = field(default_factory=PreferenceSpec)


INSTANCETYPE_KINDS: tuple[type[InstancetypeObject], ...] = (
    VirtualMachineInstancetype,
    VirtualMachineClusterInstancetype,
    VirtualMachinePreference,
    VirtualMachineClusterPreference,
)
# The kind a matcher without `kind` means (KubeVirt's defaults: the cluster-wide ones).
DEFAULT_INSTANCETYPE_KIND = VirtualMachineClusterInstancetype.KIND
DEFAULT_PREFERENCE_KIND = VirtualMachineClusterPreference.KIND
INSTANCETYPE_KIND_NAMES = (VirtualMachineInstancetype.KIND, VirtualMachineClusterInstancetype.KIND)
PREFERENCE_KIND_NAMES = (VirtualMachinePreference.KIND, VirtualMachineClusterPreference.KIND)


def kind_class(kind: str) -> type[InstancetypeObject] | None:
    """The model class of an instancetype.kubevirt.io kind name, None when unknown."""
    return next((c for c in INSTANCETYPE_KINDS if kind == c.KIND), None)
