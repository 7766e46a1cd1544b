"""Launcher pods that never ran: which were replaced, and when a blocked one is.

A kubelet that cannot create a launcher pod's container for a device resource (its
device plugin dropped, "devices.kubevirt.io/tun: no device plugin is registered") keeps
the pod Pending and retries; the handler's plugins register again within seconds, so the
pod gets `START_GRACE` to start. After that it is deleted and another launcher pod
(the next attempt, annotated with its number) takes its place, as for pods the kubelet
refused at admission; the fifth launcher pod that could not start fails the VMI with the
reason. A pod deleted for a later attempt is superseded: it no longer counts as the VMI's
launcher while it terminates. Here too: the plans for a VMI whose launcher pods were
refused (`plan_after_rejection`) or are blocked (`plan_blocked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.transitions import vmi_condition, with_phases
from controller.vmi.plan import FailureReason, VMIPlan, failed, parse_or
from shared.launcherpod import LauncherPod, PodPhase
from shared.model import (
    ConditionStatus,
    VirtualMachineInstance,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
    parse_time,
)

START_GRACE = 20.0
# Launcher pods refused by kubelets (never ran) are replaced, as a ReplicaSet replaces its
# failed pods, after 2, 4, 8, 16 s; the fifth refusal fails the VMI.
MAX_REJECTED_PODS = 5
REJECTION_BACKOFF = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockedStart:
    """What to do about a launcher pod blocked on a device: wait, or replace it."""

    message: str
    wait: float | None  # seconds still granted; None: replace (or fail) now
    attempts: int  # launcher pods of the VMI that could not start, this one included


def next_attempt(rejected: Sequence[LauncherPod]) -> int:
    """The attempt number of the launcher pod that follows `rejected` ones."""
    return max(len(rejected), max((p.attempt + 1 for p in rejected), default=0))


def superseded(pod: LauncherPod, launchers: Sequence[LauncherPod]) -> bool:
    """Deleted while a later attempt exists: replaced, not the VMI's launcher any more."""
    return pod.deleting and any(p.attempt > pod.attempt for p in launchers)


def blocked_start(
    pod: LauncherPod, rejected: Sequence[LauncherPod], *, now: datetime
) -> BlockedStart | None:
    """None unless `pod` is Pending with a container the kubelet cannot create for a device."""
    if pod.start_blocked is None or pod.deleting or pod.phase != PodPhase.PENDING:
        return None
    created = parse_time(pod.created) if pod.created else None
    waited = (now - created).total_seconds() if created is not None else 0.0
    message = f"launcher pod {pod.name} cannot start: {pod.start_blocked}"
    attempts = max(next_attempt(rejected), pod.attempt) + 1
    wait = START_GRACE - waited if waited < START_GRACE else None
    return BlockedStart(message=message, wait=wait, attempts=attempts)


def plan_after_rejection(
    vmi: VirtualMachineInstance, rejected: Sequence[LauncherPod], *, now: datetime
) -> VMIPlan:
    """Every launcher pod so far was refused by a kubelet: another one after a backoff
    (Synchronized=False, PodRejected, says why), or Failed at the fifth refusal."""
    last = rejected[-1]
    attempt = next_attempt(rejected)
    if attempt >= MAX_REJECTED_PODS:
        message = f"{last.describe_failure()} ({len(rejected)} launcher pods refused by kubelets)"
        return VMIPlan(status=failed(vmi.status, FailureReason.POD_FAILED, message, now))
    status = with_phases(vmi.status, [VMIPhase.PENDING, VMIPhase.SCHEDULING], now)
    status = _another_follows(status, last.describe_failure(), now)
    backoff = REJECTION_BACKOFF * 2 ** (len(rejected) - 1)
    waited = (now - parse_or(last.created, now)).total_seconds()
    if waited < backoff:
        return VMIPlan(status=status, requeue_after=backoff - waited)
    return VMIPlan(status=status, create_pod=True, pod_attempt=attempt)


def plan_blocked(
    vmi: VirtualMachineInstance,
    scheduling: VMIStatus,
    doomed: tuple[LauncherPod, ...],
    blocked: BlockedStart,
    *,
    now: datetime,
) -> VMIPlan:
    """A launcher pod its kubelet cannot start for a device: waited for a grace, then
    replaced by the next attempt (Synchronized=False, PodRejected), or the VMI Failed with
    the reason once MAX_REJECTED_PODS launcher pods could not start."""
    if blocked.wait is not None:
        return VMIPlan(status=scheduling, delete_pods=doomed[1:], requeue_after=blocked.wait)
    if blocked.attempts >= MAX_REJECTED_PODS:
        message = f"{blocked.message} ({blocked.attempts} launcher pods could not start)"
        status = failed(vmi.status, FailureReason.POD_FAILED, message, now)
        return VMIPlan(status=status, delete_pods=doomed)
    status = _another_follows(scheduling, blocked.message, now)
    return VMIPlan(status=status, delete_pods=doomed, create_pod=True, pod_attempt=blocked.attempts)


def _another_follows(status: VMIStatus, why: str, now: datetime) -> VMIStatus:
    """Synchronized=False, PodRejected: why the launcher pod never ran; another follows."""
    return vmi_condition(
        status,
        VMIConditionType.SYNCHRONIZED,
        ConditionStatus.FALSE,
        reason=FailureReason.POD_REJECTED,
        message=f"{why}; another launcher pod follows",
        now=now,
    )
