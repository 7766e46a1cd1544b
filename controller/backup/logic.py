"""What the backup controller decides, without I/O: refusals, the checkpoint names, the
base of an incremental backup, the target pod, and the status (KubeVirt's conditions).

    no Progressing yet → Initializing (the target pod on the VMI's node, then Start)
    Progressing=True   → the launcher's job: Running / Completed / Failed
    Done=True          → final (reason Completed, or why it failed or was refused)
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import Any

from shared import podlayout
from shared.labels import APP_LABEL, CREATED_BY_LABEL
from shared.model import VirtualMachineInstance, VMIPhase, format_time
from shared.model.backup import (
    BACKUP_API_VERSION,
    BackupCondition,
    BackupConditionType,
    BackupStatus,
    BackupType,
    BackupVolumeInfo,
    VirtualMachineBackup,
    VirtualMachineBackupTracker,
    is_tracker_ref,
)
from shared.wire.backup import BackupReply, JobState

TARGET_APP = "backup-target"
TARGET_MOUNT = "/target"
SLEEP_FOREVER = "2147483647"
FALLBACK = "full backup instead of incremental"


class Reason(enum.StrEnum):
    """The reasons of the conditions this controller writes."""

    WAITING_FOR_TARGET = "WaitingForTarget"
    IN_PROGRESS = "BackupInProgress"
    COMPLETED = "Completed"
    FAILED = "BackupFailed"
    SOURCE_NOT_FOUND = "SourceNotFound"
    CBT_NOT_ENABLED = "ChangedBlockTrackingNotEnabled"
    NOT_RUNNING = "VirtualMachineNotRunning"
    MIGRATING = "MigrationInProgress"
    TARGET_NOT_FOUND = "TargetClaimNotFound"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A backup that cannot be made, and why (it ends Done with this reason)."""

    reason: Reason
    message: str


def vm_name(backup: VirtualMachineBackup, tracker: VirtualMachineBackupTracker | None) -> str:
    """The VM the backup is of: the source's, or its tracker's."""
    if is_tracker_ref(backup.spec.source):
        return (tracker.spec.source.name or "") if tracker else ""
    return backup.spec.source.name or ""


def base_checkpoint(
    backup: VirtualMachineBackup, tracker: VirtualMachineBackupTracker | None
) -> str | None:
    """The tracker's latest checkpoint, unless there is none or a full backup is forced."""
    if tracker is None or backup.spec.force_full_backup:
        return None
    latest = tracker.status.latest_checkpoint
    return latest.name if latest is not None and latest.name else None


def checkpoint_name(
    backup: VirtualMachineBackup, tracker: VirtualMachineBackupTracker | None, now: datetime
) -> str:
    """A new checkpoint: the tracker's name (else the backup's) and a timestamp, as
    KubeVirt names them."""
    prefix = tracker.name if tracker is not None else backup.name
    return f"{prefix}-{now:%Y%m%d%H%M%S}"


def running_refusal(vmi: VirtualMachineInstance | None, vm: str) -> Refusal | None:
    """Only a running VM is backed up (KubeVirt's online backups), never mid-migration."""
    if vmi is None or vmi.status.phase != VMIPhase.RUNNING or not vmi.status.node_name:
        message = f"VirtualMachine {vm} is not running: only running VMs are backed up"
        return Refusal(reason=Reason.NOT_RUNNING, message=message)
    state = vmi.status.migration_state
    if state is not None and state.start_timestamp and not state.completed:
        message = f"VirtualMachine {vm} is migrating: backups and migrations are exclusive"
        return Refusal(reason=Reason.MIGRATING, message=message)
    return None


def target_pod_name(backup: VirtualMachineBackup) -> str:
    """The target pod of one backup (stable, so a create is idempotent)."""
    return f"{TARGET_APP}-{backup.uid}"


def target_pod(
    backup: VirtualMachineBackup, *, node: str, image: str, pull_policy: str
) -> dict[str, Any]:
    """A pod that makes the kubelet mount the target claim on the VMI's node (the handler
    hands the mount to the launcher); owned by the backup, deleted once it is done."""
    on_node = {"key": "metadata.name", "operator": "In", "values": [node]}
    required = {"nodeSelectorTerms": [{"matchFields": [on_node]}]}
    container = {
        "name": "target",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": [podlayout.LAUNCHER_BUSYBOX, "sleep", SLEEP_FOREVER],
        "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
        "volumeMounts": [{"name": "target", "mountPath": TARGET_MOUNT}],
    }
    owner = {
        "apiVersion": BACKUP_API_VERSION,
        "kind": VirtualMachineBackup.KIND,
        "name": backup.name,
        "uid": backup.uid,
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": target_pod_name(backup),
            "namespace": backup.namespace,
            "labels": {APP_LABEL: TARGET_APP, CREATED_BY_LABEL: backup.uid},
            "ownerReferences": [owner],
        },
        "spec": {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
            },
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "containers": [container],
            "volumes": [
                {
                    "name": "target",
                    "persistentVolumeClaim": {"claimName": backup.spec.pvc_name or ""},
                }
            ],
        },
    }


def with_condition(
    status: BackupStatus,
    kind: BackupConditionType,
    *,
    true: bool,
    reason: str,
    message: str,
    now: datetime,
) -> BackupStatus:
    """`status` with one condition set (its transition time kept when its status holds)."""
    value = "True" if true else "False"
    old = status.condition(kind)
    if old is not None and (old.status, old.reason, old.message) == (value, reason, message):
        return status
    kept = old.last_transition_time if old is not None and old.status == value else None
    cond = BackupCondition(
        type=kind,
        status=value,
        reason=reason,
        message=message,
        last_probe_time=None,
        last_transition_time=kept or format_time(now),
    )
    others = tuple(c for c in status.conditions if c.type != kind)
    return dataclasses.replace(status, conditions=(*others, cond))


def done(status: BackupStatus, *, reason: Reason, message: str, now: datetime) -> BackupStatus:
    """Final: Done=True with the reason; Progressing and Initializing False."""
    for kind in (BackupConditionType.INITIALIZING, BackupConditionType.PROGRESSING):
        old = status.condition(kind)
        if old is not None:
            status = with_condition(
                status, kind, true=False, reason=str(reason), message=old.message or "", now=now
            )
    return with_condition(
        status, BackupConditionType.DONE, true=True, reason=str(reason), message=message, now=now
    )


def started(
    status: BackupStatus, reply: BackupReply, *, incremental_asked: bool, now: datetime
) -> BackupStatus:
    """The job runs: its type, checkpoint and volumes; Initializing False, Progressing
    True (saying why a backup asked to be incremental is full)."""
    incremental = any(v.incremental for v in reply.volumes)
    volumes = tuple(
        BackupVolumeInfo(volume_name=v.volume, disk_target=v.target) for v in reply.volumes
    )
    message = "the launcher's backup job runs"
    if incremental_asked and not incremental:
        message = f"{FALLBACK}: {reply.full_reason or 'no base'}"
    status = dataclasses.replace(
        status,
        type=BackupType.INCREMENTAL if incremental else BackupType.FULL,
        checkpoint_name=reply.checkpoint,
        included_volumes=volumes,
    )
    status = with_condition(
        status,
        BackupConditionType.INITIALIZING,
        true=False,
        reason=str(Reason.IN_PROGRESS),
        message="",
        now=now,
    )
    return with_condition(
        status,
        BackupConditionType.PROGRESSING,
        true=True,
        reason=str(Reason.IN_PROGRESS),
        message=message,
        now=now,
    )


def finished(status: BackupStatus, reply: BackupReply, *, now: datetime) -> BackupStatus | None:
    """Done once the job is final (None while it runs)."""
    if reply.state is JobState.RUNNING:
        return None
    if reply.state is JobState.COMPLETED:
        kind = status.type or BackupType.FULL
        message = f"{kind} backup of {len(status.included_volumes)} volume(s) completed"
        progress = status.condition(BackupConditionType.PROGRESSING)
        if progress is not None and (progress.message or "").startswith(FALLBACK):
            message = f"{message}; {progress.message}"
        return done(status, reason=Reason.COMPLETED, message=message, now=now)
    message = f"the backup job failed: {reply.message}"
    return done(status, reason=Reason.FAILED, message=message, now=now)


def is_started(status: BackupStatus) -> bool:
    """Progressing=True: the launcher's job was started."""
    cond = status.condition(BackupConditionType.PROGRESSING)
    return cond is not None and cond.status == "True"
