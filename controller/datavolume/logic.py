"""The DataVolume controller's decisions, without I/O.

    plan_datavolume(dv, claim, pod) → what to create or delete, and the status CDI would show

A DataVolume makes a claim of its own name (owned by it) and one worker pod (CDI's
importer / clone source / upload server) that fills the claim's disk.img (filesystem) or
device (block). The phases follow the pod:

    no claim ─────────────▶ Pending           (the claim is made, and the pod but for a clone)
    no pod ───────────────▶ ImportScheduled   (CloneScheduled, UploadScheduled; pod made)
    pod Pending ──────────▶ ImportScheduled   (an image that cannot be pulled: Failed)
    pod Running ──────────▶ ImportInProgress  (CloneInProgress, UploadReady)
    pod Succeeded ────────▶ Succeeded, progress 100.0% (the pod is deleted); so is a pod
                            whose containers all exited 0 (CDI reads the importer's
                            terminated state too; the phase comes after the teardown)
    pod Failed ───────────▶ Failed, the pod's termination message as the reason

Bad input (no source, two sources, a source kubevirt-py does not import, no size) fails at
once with the field named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared.model.datavolume import (
    PROGRESS_DONE,
    PROGRESS_UNKNOWN,
    DataVolume,
    DataVolumeCondition,
    DataVolumeConditionType,
    DataVolumePhase,
    DataVolumeStatus,
)
from shared.model.datavolume_spec import SourceKind, SpecError, Target, target

IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)


class Reason(StrEnum):
    """Ready/Running condition reasons (CDI's where it has one)."""

    INVALID = "InvalidSpec"
    CLAIM_PENDING = "Pending"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    COMPLETED = "Completed"
    IMAGE_PULL = "ImagePullFailed"
    ERROR = "Error"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPod:
    """The parts of the worker pod the controller decides on."""

    name: str
    phase: str = "Pending"
    # The worker container's termination message (or reason and exit code).
    failure: str | None = None
    image_pull: str | None = None  # "ErrImagePull: ...", while an image cannot be pulled
    ready: bool = False
    # Every container terminated with exit code 0: the work is done, though the kubelet may
    # report the pod's phase Succeeded only after tearing the pod down (seconds later).
    finished: bool = False

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WorkerPod:
        status = raw.get("status") or {}
        containers = [
            *(status.get("initContainerStatuses") or ()),
            *(status.get("containerStatuses") or ()),
        ]
        return cls(
            name=str((raw.get("metadata") or {}).get("name") or ""),
            phase=str(status.get("phase") or "Pending"),
            failure=_failure(containers),
            image_pull=_image_pull(containers),
            ready=any(bool(c.get("ready")) for c in status.get("containerStatuses") or ()),
            finished=_finished(status.get("containerStatuses") or ()),
        )


def _finished(containers: Sequence[Mapping[str, Any]]) -> bool:
    exits = [((c.get("state") or {}).get("terminated") or {}).get("exitCode") for c in containers]
    return bool(exits) and all(code == 0 for code in exits)


def _image_pull(containers: list[Mapping[str, Any]]) -> str | None:
    for c in containers:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return f"{waiting['reason']}: {waiting.get('message') or c.get('image') or ''}"
    return None


def _failure(containers: list[Mapping[str, Any]]) -> str | None:
    for c in containers:
        term = (c.get("state") or {}).get("terminated") or {}
        if term and term.get("exitCode") not in (0, None):
            message = str(term.get("message") or "").strip()
            code, why = term.get("exitCode"), term.get("reason")
            return message or f"{c.get('name')} exited {code} ({why})"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimView:
    """The DataVolume's claim as the controller sees it."""

    name: str
    phase: str
    volume_mode: str
    owned: bool  # controlled by this DataVolume
    # Made with a PersistentVolumeClaim dataSource: the CSI driver clones, no worker pod.
    csi_clone: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class DVPlan:
    """One sync's actions and the status to write."""

    create_claim: bool = False
    create_pod: bool = False
    delete_pod: bool = False
    status: DataVolumeStatus


SCHEDULED = {
    SourceKind.CLONE: DataVolumePhase.CLONE_SCHEDULED,
    SourceKind.UPLOAD: DataVolumePhase.UPLOAD_SCHEDULED,
}
RUNNING = {
    SourceKind.CLONE: DataVolumePhase.CLONE_IN_PROGRESS,
    SourceKind.UPLOAD: DataVolumePhase.UPLOAD_READY,
}


def plan_datavolume(
    dv: DataVolume,
    *,
    claim: ClaimView | None,
    pod: WorkerPod | None,
    now: str,
) -> DVPlan:
    """What to do next (nothing once Succeeded or Failed: CDI does not import twice)."""
    if dv.phase.is_final():
        return DVPlan(status=dv.status, delete_pod=pod is not None)
    try:
        want = target(dv)
    except SpecError as e:
        return DVPlan(status=_failed(dv, str(e), Reason.INVALID, now))
    if claim is None:
        # The worker pod with its claim (it waits for the claim to bind): a sync later would
        # cost a poll interval. A clone waits: the claim may be the CSI driver's to fill.
        with_pod = want.kind is not SourceKind.CLONE
        status = _status(dv, DataVolumePhase.PENDING, now=now)
        return DVPlan(create_claim=True, create_pod=with_pod, status=status)
    if not claim.owned:
        message = f"claim {dv.namespace}/{claim.name} exists and is not this DataVolume's"
        return DVPlan(status=_failed(dv, message, Reason.ERROR, now))
    return _fill(dv, want, claim, pod, now)


def _fill(
    dv: DataVolume, want: Target, claim: ClaimView, pod: WorkerPod | None, now: str
) -> DVPlan:
    """The claim exists: the CSI driver or the worker pod fills it."""
    if claim.csi_clone:
        return _csi_clone(dv, claim, now)
    if pod is None:
        phase = SCHEDULED.get(want.kind, DataVolumePhase.IMPORT_SCHEDULED)
        return DVPlan(create_pod=True, status=_status(dv, phase, now=now, bound=claim))
    return _follow_pod(dv, want, claim, pod, now)


def _csi_clone(dv: DataVolume, claim: ClaimView, now: str) -> DVPlan:
    """A CSI clone is done when its claim is Bound (the driver copied the volume)."""
    if claim.phase == "Bound":
        done = _status(dv, DataVolumePhase.SUCCEEDED, now=now, bound=claim, done=True)
        return DVPlan(status=done)
    if claim.phase == "Lost":
        message = f"claim {dv.namespace}/{claim.name} is Lost"
        return DVPlan(status=_failed(dv, message, Reason.ERROR, now))
    phase = DataVolumePhase.CLONE_IN_PROGRESS
    return DVPlan(status=_status(dv, phase, now=now, bound=claim, running=True))


def _follow_pod(dv: DataVolume, want: Target, claim: ClaimView, pod: WorkerPod, now: str) -> DVPlan:
    if pod.phase == "Succeeded" or pod.finished:
        status = _status(dv, DataVolumePhase.SUCCEEDED, now=now, bound=claim, done=True)
        return DVPlan(delete_pod=True, status=status)
    if pod.phase == "Failed" or pod.failure is not None:
        message = pod.failure or "the worker pod failed"
        return DVPlan(delete_pod=True, status=_failed(dv, message, Reason.ERROR, now))
    if pod.image_pull is not None:
        message = f"the source image cannot be pulled: {pod.image_pull}"
        return DVPlan(delete_pod=True, status=_failed(dv, message, Reason.IMAGE_PULL, now))
    if pod.phase == "Running" and (want.kind is not SourceKind.UPLOAD or pod.ready):
        phase = RUNNING.get(want.kind, DataVolumePhase.IMPORT_IN_PROGRESS)
        return DVPlan(status=_status(dv, phase, now=now, bound=claim, running=True))
    phase = SCHEDULED.get(want.kind, DataVolumePhase.IMPORT_SCHEDULED)
    return DVPlan(status=_status(dv, phase, now=now, bound=claim))


def _status(
    dv: DataVolume,
    phase: DataVolumePhase,
    *,
    now: str,
    bound: ClaimView | None = None,
    running: bool = False,
    done: bool = False,
) -> DataVolumeStatus:
    is_bound = bound is not None and bound.phase == "Bound"
    conditions = (
        _cond(dv, DataVolumeConditionType.BOUND, is_bound, "Bound" if is_bound else "Pending", now),
        _cond(dv, DataVolumeConditionType.READY, done, Reason.COMPLETED if done else phase, now),
        _cond(dv, DataVolumeConditionType.RUNNING, running, phase if running else "", now),
    )
    return dataclasses.replace(
        dv.status,
        phase=phase,
        progress=PROGRESS_DONE if done else (dv.status.progress or PROGRESS_UNKNOWN),
        claim_name=dv.name,
        conditions=conditions,
    )


def _failed(dv: DataVolume, message: str, reason: str, now: str) -> DataVolumeStatus:
    conditions = (
        _cond(dv, DataVolumeConditionType.BOUND, _is(dv, "Bound"), "", now),
        _cond(dv, DataVolumeConditionType.READY, False, reason, now, message=message),
        _cond(dv, DataVolumeConditionType.RUNNING, False, reason, now, message=message),
    )
    return dataclasses.replace(
        dv.status,
        phase=DataVolumePhase.FAILED,
        progress=dv.status.progress or PROGRESS_UNKNOWN,
        conditions=conditions,
    )


def _is(dv: DataVolume, type_: str) -> bool:
    cond = dv.status.condition(type_)
    return cond is not None and cond.status == "True"


def _cond(
    dv: DataVolume, type_: str, value: bool, reason: str, now: str, *, message: str = ""
) -> DataVolumeCondition:
    status = "True" if value else "False"
    old = dv.status.condition(type_)
    since = old.last_transition_time if old is not None and old.status == status else now
    return DataVolumeCondition(
        type=type_,
        status=status,
        reason=str(reason) or None,
        message=message or None,
        last_transition_time=since,
        last_heartbeat_time=since,
    )
