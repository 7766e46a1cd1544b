"""backup.kubevirt.io/v1alpha1: VirtualMachineBackup and VirtualMachineBackupTracker, as
KubeVirt's API (kubevirt.io/api v1.8.2, backup/v1alpha1) has them.

    backup (source: VM) ──────────controller──▶ full backup into spec.pvcName
    backup (source: tracker) ──controller──▶ incremental from the tracker's latest
                                              checkpoint (full when it has none or
                                              forceFullBackup), then the tracker records
                                              the new checkpoint

Shared because the controller (controller/backup/) acts on them, admission
(virt_api/admission/backups.py) checks them and the launcher's command takes their names.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model
from shared.model.objects import KubeObject
from shared.model.snapshot import VM_API_GROUP, VM_KIND, LocalObjectRef

BACKUP_GROUP = "backup.kubevirt.io"
BACKUP_VERSION = "v1alpha1"
BACKUP_API_VERSION = f"{BACKUP_GROUP}/{BACKUP_VERSION}"
TRACKER_KIND = "VirtualMachineBackupTracker"
# KubeVirt's feature gate behind both kinds and changed block tracking.
INCREMENTAL_BACKUP_GATE = "IncrementalBackup"


class BackupMode(enum.StrEnum):
    """spec.mode: Push (into a claim; the default) or Pull (an endpoint; not served)."""

    PUSH = "Push"
    PULL = "Pull"


class BackupType(enum.StrEnum):
    """status.type: what the backup holds."""

    FULL = "Full"
    INCREMENTAL = "Incremental"


class BackupConditionType(enum.StrEnum):
    """KubeVirt's backup condition types (the ones kubevirt-py sets are the first three)."""

    INITIALIZING = "Initializing"
    PROGRESSING = "Progressing"
    DONE = "Done"
    EXPORT_INITIATED = "ExportInitiated"
    EXPORT_READY = "ExportReady"
    DELETING = "Deleting"
    ABORTING = "Aborting"


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupVolumeInfo(Model):
    """A volume in a backup: its name in the VMI spec and its disk target then."""

    volume_name: str | None = None
    disk_target: str | None = None
    data_endpoint: str | None = None
    map_endpoint: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupCheckpoint(Model):
    """A libvirt checkpoint a backup made: its name, when, and the disks it covers."""

    name: str | None = None
    creation_time: str | None = None
    volumes: tuple[BackupVolumeInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupCondition(Model):
    """A condition (Initializing, Progressing, Done …)."""

    type: BackupConditionType | str | None = None
    status: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerSpec(Model):
    """VirtualMachineBackupTrackerSpec: the VM whose checkpoints it tracks."""

    source: LocalObjectRef = field(default_factory=LocalObjectRef)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerStatus(Model):
    """VirtualMachineBackupTrackerStatus."""

    latest_checkpoint: BackupCheckpoint | None = None
    checkpoint_redefinition_required: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineBackupTracker(KubeObject):
    """backup.kubevirt.io/v1alpha1 VirtualMachineBackupTracker (vmbackuptracker)."""

    KIND: ClassVar[str] = TRACKER_KIND
    PLURAL: ClassVar[str] = "virtualmachinebackuptrackers"

    spec: TrackerSpec = field(default_factory=TrackerSpec)
    status: TrackerStatus = field(default_factory=TrackerStatus)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupSpec(Model):
    """VirtualMachineBackupSpec."""

    source: LocalObjectRef = field(default_factory=LocalObjectRef)
    mode: BackupMode | str | None = None
    pvc_name: str | None = None
    skip_quiesce: bool | None = None
    force_full_backup: bool | None = None
    token_secret_ref: str | None = None
    ttl_duration: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupStatus(Model):
    """VirtualMachineBackupStatus."""

    type: BackupType | str | None = None
    conditions: tuple[BackupCondition, ...] = ()
    checkpoint_name: str | None = None
    endpoint_cert: str | None = None
    included_volumes: tuple[BackupVolumeInfo, ...] = ()

    def condition(self, kind: BackupConditionType) -> BackupCondition | None:
        """The condition of `kind`, if set."""
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def done(self) -> bool:
        """Done=True: nothing more is done for this backup (it succeeded or failed)."""
        cond = self.condition(BackupConditionType.DONE)
        return cond is not None and cond.status == "True"


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineBackup(KubeObject):
    """backup.kubevirt.io/v1alpha1 VirtualMachineBackup (vmbackup)."""

    KIND: ClassVar[str] = "VirtualMachineBackup"
    PLURAL: ClassVar[str] = "virtualmachinebackups"

    spec: BackupSpec = field(default_factory=BackupSpec)
    status: BackupStatus = field(default_factory=BackupStatus)


def is_tracker_ref(ref: LocalObjectRef) -> bool:
    """A backup.kubevirt.io VirtualMachineBackupTracker reference."""
    return ref.kind == TRACKER_KIND and ref.api_group == BACKUP_GROUP


def is_vm_ref(ref: LocalObjectRef) -> bool:
    """A kubevirt.io VirtualMachine reference (apiGroup required, as KubeVirt's CEL rule)."""
    return ref.kind == VM_KIND and ref.api_group == VM_API_GROUP
