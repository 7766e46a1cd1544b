"""snapshot.kubevirt.io/v1beta1: VirtualMachineSnapshot, VirtualMachineSnapshotContent and
VirtualMachineRestore, as KubeVirt's API (kubevirt.io/api v1.8.2) has them; the fields
kubevirt-py acts on are typed, the rest stays in `extra` (and admission refuses what is not
honoured).

    snapshot ──controller──▶ content (the VM copy + one VolumeSnapshot per claim)
    restore ──controller──▶ claims from those VolumeSnapshots + the VM spec written back

Shared because the controller (controller/snapshot/) acts on them and admission
(virt_api/admission) checks them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.meta import ObjectMeta
from shared.model.objects import KubeObject
from shared.model.vm import VMSpec

SNAPSHOT_GROUP = "snapshot.kubevirt.io"
SNAPSHOT_VERSION = "v1beta1"
SNAPSHOT_API_VERSION = f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}"
DEFAULT_FAILURE_DEADLINE = 300.0  # KubeVirt's DefaultFailureDeadline: 5m
VM_KIND = "VirtualMachine"
VM_API_GROUP = "kubevirt.io"


class SnapshotPhase(enum.StrEnum):
    """VirtualMachineSnapshotPhase."""

    UNSET = ""
    IN_PROGRESS = "InProgress"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    DELETING = "Deleting"
    UNKNOWN = "Unknown"

    def is_final(self) -> bool:
        """Succeeded or Failed: nothing more is done (but deletion)."""
        return self in (SnapshotPhase.SUCCEEDED, SnapshotPhase.FAILED)


class Indication(enum.StrEnum):
    """What the snapshot of a running VM could promise (status.indications)."""

    ONLINE = "Online"
    NO_GUEST_AGENT = "NoGuestAgent"
    GUEST_AGENT = "GuestAgent"
    QUIESCE_TIMEOUT = "QuiesceTimeout"
    PAUSED = "Paused"


class SnapshotConditionType(enum.StrEnum):
    """The condition types of snapshots, contents and restores."""

    READY = "Ready"
    PROGRESSING = "Progressing"
    FAILURE = "Failure"


class DeletionPolicy(enum.StrEnum):
    """spec.deletionPolicy: the content goes with the snapshot (Delete) or stays."""

    DELETE = "Delete"
    RETAIN = "Retain"


class TargetReadinessPolicy(enum.StrEnum):
    """spec.targetReadinessPolicy of a restore onto a VM that is running."""

    STOP_TARGET = "StopTarget"
    WAIT_GRACE_PERIOD = "WaitGracePeriod"
    FAIL_IMMEDIATE = "FailImmediate"
    WAIT_EVENTUALLY = "WaitEventually"


class VolumeRestorePolicy(enum.StrEnum):
    """spec.volumeRestorePolicy: the restored claims' names."""

    RANDOMIZE_NAMES = "RandomizeNames"
    IN_PLACE = "InPlace"
    PREFIX_TARGET_NAME = "PrefixTargetName"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalObjectRef(Model):
    """corev1.TypedLocalObjectReference (source of a snapshot, target of a restore)."""

    api_group: str | None = None
    kind: str | None = None
    name: str | None = None

    def is_vm(self) -> bool:
        """A kubevirt.io VirtualMachine (the only kind served)."""
        return self.kind == VM_KIND and self.api_group in (None, "", VM_API_GROUP)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotError(Model):
    """status.error: when and why."""

    time: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotCondition(Model):
    """A condition (Ready, Progressing, Failure)."""

    type: SnapshotConditionType | str | None = None
    status: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceIndication(Model):
    """status.sourceIndications[]: an indication with its explanation."""

    indication: Indication | str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotVolumes(Model):
    """status.snapshotVolumes: the volumes snapshotted and those left out."""

    included_volumes: tuple[str, ...] = ()
    excluded_volumes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotSpec(Model):
    """VirtualMachineSnapshotSpec."""

    source: LocalObjectRef = field(default_factory=LocalObjectRef)
    deletion_policy: DeletionPolicy | None = None
    failure_deadline: str | None = None  # a Go duration ("5m0s"); "0" never fails


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotStatus(Model):
    """VirtualMachineSnapshotStatus."""

    source_uid: str | None = field(default=None, metadata=json_name("sourceUID"))
    virtual_machine_snapshot_content_name: str | None = None
    creation_time: str | None = None
    phase: SnapshotPhase | None = None
    ready_to_use: bool | None = None
    error: SnapshotError | None = None
    conditions: tuple[SnapshotCondition, ...] = ()
    indications: tuple[Indication | str, ...] = ()
    source_indications: tuple[SourceIndication, ...] = ()
    snapshot_volumes: SnapshotVolumes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineSnapshot(KubeObject):
    """snapshot.kubevirt.io/v1beta1 VirtualMachineSnapshot (vmsnapshot)."""

    KIND: ClassVar[str] = "VirtualMachineSnapshot"
    PLURAL: ClassVar[str] = "virtualmachinesnapshots"

    spec: SnapshotSpec = field(default_factory=SnapshotSpec)
    status: SnapshotStatus = field(default_factory=SnapshotStatus)

    @property
    def phase(self) -> SnapshotPhase:
        return self.status.phase or SnapshotPhase.UNSET


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotVM(Model):
    """The VirtualMachine as it was: metadata (name, labels, annotations) and spec."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: VMSpec = field(default_factory=VMSpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentSource(Model):
    """SourceSpec: what was snapshotted."""

    virtual_machine: SnapshotVM | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupClaim(Model):
    """The claim a volume was on: its name, labels and spec (to make it again)."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeBackup(Model):
    """One snapshotted volume: its name in the VM, its claim, its VolumeSnapshot.
    The claim's spec stays in `persistentVolumeClaim.extra["spec"]` (a core PVC spec)."""

    volume_name: str | None = None
    persistent_volume_claim: BackupClaim = field(default_factory=BackupClaim)
    volume_snapshot_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentSpec(Model):
    """VirtualMachineSnapshotContentSpec."""

    virtual_machine_snapshot_name: str | None = None
    source: ContentSource = field(default_factory=ContentSource)
    volume_backups: tuple[VolumeBackup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeSnapshotState(Model):
    """status.volumeSnapshotStatus[]: one VolumeSnapshot's progress."""

    volume_snapshot_name: str | None = None
    creation_time: str | None = None
    ready_to_use: bool | None = None
    error: SnapshotError | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentStatus(Model):
    """VirtualMachineSnapshotContentStatus."""

    creation_time: str | None = None
    ready_to_use: bool | None = None
    error: SnapshotError | None = None
    volume_snapshot_status: tuple[VolumeSnapshotState, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineSnapshotContent(KubeObject):
    """snapshot.kubevirt.io/v1beta1 VirtualMachineSnapshotContent (vmsnapshotcontent)."""

    KIND: ClassVar[str] = "VirtualMachineSnapshotContent"
    PLURAL: ClassVar[str] = "virtualmachinesnapshotcontents"

    spec: ContentSpec = field(default_factory=ContentSpec)
    status: ContentStatus = field(default_factory=ContentStatus)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreSpec(Model):
    """VirtualMachineRestoreSpec (volumeRestoreOverrides and patches stay in extra)."""

    target: LocalObjectRef = field(default_factory=LocalObjectRef)
    virtual_machine_snapshot_name: str | None = None
    target_readiness_policy: TargetReadinessPolicy | None = None
    volume_restore_policy: VolumeRestorePolicy | None = None
    volume_ownership_policy: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeRestore(Model):
    """status.restores[]: one volume made again from its VolumeSnapshot."""

    volume_name: str | None = None
    persistent_volume_claim: str | None = None
    volume_snapshot_name: str | None = None
    data_volume_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreStatus(Model):
    """VirtualMachineRestoreStatus."""

    restores: tuple[VolumeRestore, ...] = ()
    restore_time: str | None = None
    deleted_data_volumes: tuple[str, ...] = ()
    complete: bool | None = None
    conditions: tuple[SnapshotCondition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineRestore(KubeObject):
    """snapshot.kubevirt.io/v1beta1 VirtualMachineRestore (vmrestore)."""

    KIND: ClassVar[str] = "VirtualMachineRestore"
    PLURAL: ClassVar[str] = "virtualmachinerestores"

    spec: RestoreSpec = field(default_factory=RestoreSpec)
    status: RestoreStatus = field(default_factory=RestoreStatus)
