"""What a VirtualMachineSnapshot needs, decided from what the caches and the API show (pure).

    volumes_of(vm, claims)       → which volumes get a VolumeSnapshot, which are left out
    content_body / volume_snapshot_body → the objects to create
    snapshot_status(...)         → phase, readyToUse, conditions, indications, error

KubeVirt's design: one VolumeSnapshot per claim (persistentVolumeClaim and dataVolume
volumes), named `vmsnapshot-<snapshot uid>-volume-<volume>`, under a content object
`vmsnapshot-content-<snapshot uid>` that holds the VM as it was. Volumes that live and die
with the VMI (containerDisk, cloud-init, emptyDisk, configMap …) are excluded, as KubeVirt
does. A running VM is snapshotted online: its guest's filesystems are frozen through the
guest agent (when one is connected) only while the VolumeSnapshots are created.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.duration import go_duration
from shared.model import VirtualMachine, format_time, parse_time
from shared.model.snapshot import (
    DEFAULT_FAILURE_DEADLINE,
    SNAPSHOT_API_VERSION,
    DeletionPolicy,
    Indication,
    SnapshotCondition,
    SnapshotConditionType,
    SnapshotError,
    SnapshotPhase,
    SnapshotStatus,
    SnapshotVolumes,
    VirtualMachineSnapshot,
    VirtualMachineSnapshotContent,
)
from shared.naming import SUBDOMAIN, fit

VOLUME_SNAPSHOT_API_VERSION = "snapshot.storage.k8s.io/v1"
DEFAULT_SNAPSHOT_CLASS = "snapshot.storage.kubernetes.io/is-default-class"
# The claim spec fields a restore makes the claim again with (not volumeName, dataSource).
CLAIM_SPEC_KEEP = ("accessModes", "resources", "storageClassName", "volumeMode")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimInfo:
    """A claim a volume mounts, as read: its spec and the VolumeSnapshotClass for it."""

    name: str
    exists: bool
    spec: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    snapshot_class: str | None = None  # None: no VolumeSnapshotClass for its driver
    storage_class: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Backup:
    """One volume to snapshot."""

    volume: str
    claim: ClaimInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumePlan:
    """The volumes snapshotted and left out, or why the VM cannot be snapshotted."""

    backups: tuple[Backup, ...] = ()
    excluded: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class VSState:
    """A VolumeSnapshot's status as read."""

    name: str
    ready: bool = False
    creation_time: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Online:
    """The source VM's VMI, as far as the snapshot cares."""

    running: bool = False
    agent: bool = False
    frozen: bool = False


def content_name(snapshot: VirtualMachineSnapshot) -> str:
    return fit(f"vmsnapshot-content-{snapshot.uid}", limit=SUBDOMAIN)


def volume_snapshot_name(snapshot_uid: str, volume: str) -> str:
    return fit(f"vmsnapshot-{snapshot_uid}-volume-{volume}", limit=SUBDOMAIN)


def claim_names(vm: VirtualMachine) -> dict[str, str]:
    """volume name → claim name, for the VM's claim-backed volumes (in spec order)."""
    out: dict[str, str] = {}
    for v in vm.spec.template.spec.volumes:
        claim = v.claim
        if v.name and claim is not None and claim.claim_name:
            out[v.name] = claim.claim_name
    return out


def volumes_of(vm: VirtualMachine, claims: Mapping[str, ClaimInfo]) -> VolumePlan:
    """Which volumes are snapshotted; an error naming the first that cannot be."""
    by_volume = claim_names(vm)
    excluded = tuple(v.name or "" for v in vm.spec.template.spec.volumes if v.name not in by_volume)
    backups = []
    for volume, claim_name in by_volume.items():
        info = claims.get(claim_name) or ClaimInfo(name=claim_name, exists=False)
        if not info.exists:
            return VolumePlan(error=f"volume {volume}: claim {claim_name} does not exist")
        if info.snapshot_class is None:
            return VolumePlan(
                error=f"volume {volume}: claim {claim_name} (StorageClass "
                f"{info.storage_class or '<none>'}) has no VolumeSnapshotClass for its driver"
            )
        backups.append(Backup(volume=volume, claim=info))
    return VolumePlan(backups=tuple(backups), excluded=excluded)


def pick_snapshot_class(provisioner: str | None, classes: list[Mapping[str, Any]]) -> str | None:
    """The VolumeSnapshotClass of the driver (the default one first)."""
    mine = [c for c in classes if provisioner and c.get("driver") == provisioner]
    mine.sort(key=lambda c: _annotation(c, DEFAULT_SNAPSHOT_CLASS) != "true")
    return str(mine[0]["metadata"]["name"]) if mine else None


def _annotation(obj: Mapping[str, Any], name: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(name)


def owner_ref(obj: Any, *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to a model object (GC removes what it owns)."""
    return {
        "apiVersion": obj.api_version or SNAPSHOT_API_VERSION,
        "kind": obj.KIND,
        "name": obj.name,
        "uid": obj.uid,
        "controller": controller,
        "blockOwnerDeletion": False,
    }


def content_body(
    snapshot: VirtualMachineSnapshot, vm: VirtualMachine, plan: VolumePlan
) -> dict[str, Any]:
    """The VirtualMachineSnapshotContent: the VM as it is and one backup per volume."""
    retain = snapshot.spec.deletion_policy is DeletionPolicy.RETAIN
    meta = vm.metadata
    vm_meta: dict[str, Any] = {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid}
    if meta.labels:
        vm_meta["labels"] = dict(meta.labels)
    if meta.annotations:
        vm_meta["annotations"] = dict(meta.annotations)
    backups = [
        {
            "volumeName": b.volume,
            "persistentVolumeClaim": {
                "metadata": {
                    "name": b.claim.name,
                    **({"labels": dict(b.claim.labels)} if b.claim.labels else {}),
                },
                "spec": {k: b.claim.spec[k] for k in CLAIM_SPEC_KEEP if k in b.claim.spec},
            },
            "volumeSnapshotName": volume_snapshot_name(snapshot.uid, b.volume),
        }
        for b in plan.backups
    ]
    return {
        "apiVersion": SNAPSHOT_API_VERSION,
        "kind": VirtualMachineSnapshotContent.KIND,
        "metadata": {
            "name": content_name(snapshot),
            "namespace": snapshot.namespace,
            **({} if retain else {"ownerReferences": [owner_ref(snapshot)]}),
        },
        "spec": {
            "virtualMachineSnapshotName": snapshot.name,
            "source": {"virtualMachine": {"metadata": vm_meta, "spec": vm.spec.to_dict()}},
            "volumeBackups": backups,
        },
    }


def volume_snapshot_body(
    content: VirtualMachineSnapshotContent, *, backup: Backup, snapshot_uid: str
) -> dict[str, Any]:
    """The CSI VolumeSnapshot of one claim, owned by the content."""
    return {
        "apiVersion": VOLUME_SNAPSHOT_API_VERSION,
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": volume_snapshot_name(snapshot_uid, backup.volume),
            "namespace": content.namespace,
            "ownerReferences": [owner_ref(content)],
        },
        "spec": {
            "source": {"persistentVolumeClaimName": backup.claim.name},
            "volumeSnapshotClassName": backup.claim.snapshot_class,
        },
    }


def vs_state(raw: Mapping[str, Any]) -> VSState:
    """A VolumeSnapshot's readiness and error."""
    status = raw.get("status") or {}
    error = status.get("error") or {}
    return VSState(
        name=str((raw.get("metadata") or {}).get("name") or ""),
        ready=status.get("readyToUse") is True,
        creation_time=status.get("creationTime"),
        error=str(error.get("message") or "the VolumeSnapshot failed") if error else None,
    )


def failure_deadline(snapshot: VirtualMachineSnapshot) -> float:
    """Seconds the snapshot may take (0: forever); KubeVirt's default 5m."""
    raw = snapshot.spec.failure_deadline
    if raw is None:
        return DEFAULT_FAILURE_DEADLINE
    try:
        return go_duration(raw)
    except ValueError:
        return DEFAULT_FAILURE_DEADLINE  # admission refuses it; never fail on it here


def deadline_passed(snapshot: VirtualMachineSnapshot, now: datetime) -> bool:
    """True once creation + failureDeadline is behind us."""
    limit = failure_deadline(snapshot)
    created = snapshot.metadata.creation_timestamp
    if limit <= 0 or not created:
        return False
    return now > parse_time(created) + timedelta(seconds=limit)


def freeze_budget(snapshot: VirtualMachineSnapshot, now: datetime, *, cap: float) -> float:
    """How long the freeze may take: `cap`, or less when the failureDeadline comes first
    (a freeze the agent does not answer fails the snapshot by its deadline, not later)."""
    limit = failure_deadline(snapshot)
    created = snapshot.metadata.creation_timestamp
    if limit <= 0 or not created:
        return cap
    left = (parse_time(created) + timedelta(seconds=limit) - now).total_seconds()
    return max(0.0, min(cap, left))


def indications(online: Online) -> tuple[Indication, ...]:
    """Online, with GuestAgent (frozen for the snapshot) or NoGuestAgent (crash-consistent)."""
    if not online.running:
        return ()
    return (
        Indication.ONLINE,
        Indication.GUEST_AGENT if online.agent else Indication.NO_GUEST_AGENT,
    )


def with_condition(
    conds: tuple[SnapshotCondition, ...], new: SnapshotCondition, now: str
) -> tuple[SnapshotCondition, ...]:
    """`new` in place of its type, its transition time kept while the status holds."""
    old = next((c for c in conds if c.type == new.type), None)
    since = old.last_transition_time if old is not None and old.status == new.status else now
    stamped = dataclasses.replace(new, last_transition_time=since)
    rest = tuple(c for c in conds if c.type != new.type)
    return (*rest, stamped) if old is None else tuple(stamped if c is old else c for c in conds)


def conditions_for(
    conds: tuple[SnapshotCondition, ...], *, phase: SnapshotPhase, message: str, now: str
) -> tuple[SnapshotCondition, ...]:
    """Progressing and Ready as KubeVirt sets them for a phase."""
    progressing = phase is SnapshotPhase.IN_PROGRESS
    ready = phase is SnapshotPhase.SUCCEEDED
    reason = {
        SnapshotPhase.IN_PROGRESS: "Operation in progress",
        SnapshotPhase.SUCCEEDED: "Operation complete",
        SnapshotPhase.FAILED: "Operation failed",
    }.get(phase, str(phase))
    for type_, on in (
        (SnapshotConditionType.PROGRESSING, progressing),
        (SnapshotConditionType.READY, ready),
    ):
        cond = SnapshotCondition(
            type=type_,
            status="True" if on else "False",
            reason=reason,
            message=message or None,
        )
        conds = with_condition(conds, cond, now)
    return conds


def snapshot_status(
    snapshot: VirtualMachineSnapshot,
    *,
    vm: VirtualMachine | None,
    online: Online,
    plan: VolumePlan,
    states: Mapping[str, VSState],
    error: str = "",
    now: datetime,
) -> SnapshotStatus:
    """The snapshot's status from what was done and read (`error`: this sync's failure)."""
    stamp = format_time(now)
    old = snapshot.status
    names = [volume_snapshot_name(snapshot.uid, b.volume) for b in plan.backups]
    vs_error = next((s.error for n in names if (s := states.get(n)) and s.error), None)
    ready = not error and not plan.error and all(n in states and states[n].ready for n in names)
    failure = error or plan.error or vs_error or ""
    if failure:
        phase = SnapshotPhase.FAILED
    elif ready:
        phase = SnapshotPhase.SUCCEEDED
    else:
        phase = SnapshotPhase.IN_PROGRESS
    created = [s.creation_time for n in names if (s := states.get(n)) and s.creation_time]
    status = dataclasses.replace(
        old,
        source_uid=vm.uid if vm is not None else old.source_uid,
        virtual_machine_snapshot_content_name=content_name(snapshot) if not plan.error else None,
        phase=phase,
        ready_to_use=ready,
        creation_time=old.creation_time
        or (max(created) if ready and created else (stamp if ready else None)),
        indications=old.indications or indications(online),
        snapshot_volumes=SnapshotVolumes(
            included_volumes=tuple(b.volume for b in plan.backups), excluded_volumes=plan.excluded
        ),
        error=SnapshotError(time=stamp, message=failure) if failure else old.error,
        conditions=conditions_for(old.conditions, phase=phase, message=failure, now=stamp),
    )
    return status


def failed_status(snapshot: VirtualMachineSnapshot, message: str, now: datetime) -> SnapshotStatus:
    """Failed for a reason found before any volume was looked at (source missing …)."""
    stamp = format_time(now)
    return dataclasses.replace(
        snapshot.status,
        phase=SnapshotPhase.FAILED,
        ready_to_use=False,
        error=SnapshotError(time=stamp, message=message),
        conditions=conditions_for(
            snapshot.status.conditions, phase=SnapshotPhase.FAILED, message=message, now=stamp
        ),
    )
