"""clone.kubevirt.io/v1beta1 VirtualMachineClone, as KubeVirt's API (kubevirt.io/api v1.8.2)
has it: a source VM (or VirtualMachineSnapshot) copied into a target VM through a snapshot
and a restore (controller/snapshot/clone.py)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.objects import KubeObject
from shared.model.snapshot import LocalObjectRef, SnapshotCondition

CLONE_GROUP = "clone.kubevirt.io"
CLONE_VERSION = "v1beta1"
CLONE_API_VERSION = f"{CLONE_GROUP}/{CLONE_VERSION}"
SNAPSHOT_KIND = "VirtualMachineSnapshot"


class ClonePhase(enum.StrEnum):
    """VirtualMachineClonePhase."""

    UNSET = ""
    SNAPSHOT_IN_PROGRESS = "SnapshotInProgress"
    CREATING_TARGET_VM = "CreatingTargetVM"
    RESTORE_IN_PROGRESS = "RestoreInProgress"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    def is_final(self) -> bool:
        return self in (ClonePhase.SUCCEEDED, ClonePhase.FAILED)


class VolumeNamePolicy(enum.StrEnum):
    """spec.volumeNamePolicy: the target's claims' names."""

    RANDOMIZE_NAMES = "RandomizeNames"
    PREFIX_TARGET_NAME = "PrefixTargetName"


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateFilters(Model):
    """spec.template: which labels and annotations of the VM template are copied."""

    annotation_filters: tuple[str, ...] = ()
    label_filters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CloneSpec(Model):
    """VirtualMachineCloneSpec."""

    source: LocalObjectRef | None = None
    target: LocalObjectRef | None = None
    annotation_filters: tuple[str, ...] = ()
    label_filters: tuple[str, ...] = ()
    template: TemplateFilters = field(default_factory=TemplateFilters)
    new_mac_addresses: Mapping[str, str] = field(default_factory=dict)
    new_sm_bios_serial: str | None = field(default=None, metadata=json_name("newSMBiosSerial"))
    patches: tuple[str, ...] = ()
    volume_name_policy: VolumeNamePolicy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CloneStatus(Model):
    """VirtualMachineCloneStatus."""

    creation_time: str | None = None
    phase: ClonePhase | None = None
    conditions: tuple[SnapshotCondition, ...] = ()
    snapshot_name: str | None = None
    restore_name: str | None = None
    target_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineClone(KubeObject):
    """clone.kubevirt.io/v1beta1 VirtualMachineClone (vmclone)."""

    KIND: ClassVar[str] = "VirtualMachineClone"
    PLURAL: ClassVar[str] = "virtualmachineclones"

    spec: CloneSpec = field(default_factory=CloneSpec)
    status: CloneStatus = field(default_factory=CloneStatus)

    @property
    def phase(self) -> ClonePhase:
        return self.status.phase or ClonePhase.UNSET
