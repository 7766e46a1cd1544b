"""instancetype.kubevirt.io/v1beta1: instancetypes (the CPU and memory a VM gets) and
preferences (the defaults a VM's template falls back on), namespaced and cluster-wide.

Every field of KubeVirt v1.8's v1beta1 API is typed (the preference's in
shared.model.preference). shared.instancetypes applies them to a VM's VMI, as KubeVirt's
pkg/instancetype does; the kubevirt.io/v1 objects they hand over whole (hugepages, NUMA,
GPUs, …) are `VMIPart`s, checked where the VMI takes them: an instancetype or preference
is admitted as written, and a VM whose VMI would carry a field kubevirt-py does not
honour is refused naming the instancetype field.
A VM names them in spec.instancetype / spec.preference (`InstancetypeMatcher`), or has
them inferred from a volume's labels (`inferFromVolume`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.meta import ObjectMeta
from shared.model.preference import (
    DevicePreferences,
    MachinePreferences,
    PreferenceSpec,
    VMIPart,
)

__all__ = ["DevicePreferences", "MachinePreferences", "PreferenceSpec", "VMIPart"]

INSTANCETYPE_GROUP = "instancetype.kubevirt.io"
INSTANCETYPE_VERSION = "v1beta1"
INSTANCETYPE_API_VERSION = f"{INSTANCETYPE_GROUP}/{INSTANCETYPE_VERSION}"
# A volume's labels naming the instancetype and preference a VM infers from it.
DEFAULT_INSTANCETYPE_LABEL = f"{INSTANCETYPE_GROUP}/default-instancetype"
DEFAULT_INSTANCETYPE_KIND_LABEL = f"{INSTANCETYPE_GROUP}/default-instancetype-kind"
DEFAULT_PREFERENCE_LABEL = f"{INSTANCETYPE_GROUP}/default-preference"
DEFAULT_PREFERENCE_KIND_LABEL = f"{INSTANCETYPE_GROUP}/default-preference-kind"


class InferFailurePolicy(enum.StrEnum):
    """VM spec.instancetype/preference.inferFromVolumeFailurePolicy."""

    REJECT = "Reject"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True, kw_only=True)
class InstancetypeMatcher(Model):
    """VM spec.instancetype / spec.preference: which object, and the revision captured;
    or the volume whose labels name it (resolved at VM admission, then cleared)."""

    name: str | None = None
    kind: str | None = None
    revision_name: str | None = None
    infer_from_volume: str | None = None
    infer_from_volume_failure_policy: InferFailurePolicy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUInstancetype(Model):
    """instancetype spec.cpu."""

    guest: int | None = None
    model: str | None = None
    dedicated_cpu_placement: bool | None = field(
        default=None, metadata=json_name("dedicatedCPUPlacement")
    )
    numa: VMIPart | None = None
    isolate_emulator_thread: bool | None = None
    realtime: VMIPart | None = None
    max_sockets: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryInstancetype(Model):
    """instancetype spec.memory."""

    guest: str | int | None = None
    hugepages: VMIPart | None = None
    overcommit_percent: int | None = None
    max_guest: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InstancetypeSpec(Model):
    """The spec of a VirtualMachine(Cluster)Instancetype."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None
    cpu: CPUInstancetype = field(default_factory=CPUInstancetype)
    memory: MemoryInstancetype = field(default_factory=MemoryInstancetype)
    gpus: tuple[VMIPart, ...] = ()
    host_devices: tuple[VMIPart, ...] = ()
    io_threads_policy: str | None = None
    io_threads: VMIPart | None = None
    launch_security: VMIPart | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)


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
