"""The VMI controller's plan for one sync (`VMIPlan`) and the failed state it may write:
what logic.py, blocked.py and the node controller build plans and failures from."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from controller.transitions import vmi_condition, with_phases
from shared.launcherpod import LauncherPod
from shared.model import (
    ConditionReason,
    ConditionStatus,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
    parse_time,
)


class FailureReason(enum.StrEnum):
    """status.reason (and the Synchronized condition's reason) of VMIs the controller fails."""

    INVALID_SPEC = "InvalidSpec"
    POD_FAILED = "PodFailed"
    POD_TERMINATING = "PodTerminating"
    POD_NOT_EXISTS = "PodNotExists"
    UNSCHEDULABLE = "Unschedulable"
    POD_REJECTED = "PodRejected"  # not a failure yet: another launcher pod follows
    NODE_UNRESPONSIVE = "NodeUnresponsive"
    LAUNCHER_DIED = str(ConditionReason.LAUNCHER_DIED)  # the handler writes it too


@dataclass(frozen=True, slots=True, kw_only=True)
class VMIPlan:
    """What one sync of one VMI does: pod writes, then metadata and status writes."""

    status: VMIStatus
    create_pod: bool = False
    # Which launcher pod of the VMI to create (0: the first; n: after n kubelet refusals),
    # so its name differs from the refused ones', and a retried create stays idempotent.
    pod_attempt: int = 0
    delete_pods: tuple[LauncherPod, ...] = ()
    # Label changes: value None removes the label.
    labels: Mapping[str, str | None] = field(default_factory=dict)
    # True: the finalizer must be present; False: absent; None: leave it.
    finalizer: bool | None = None
    requeue_after: float | None = None


def failed(status: VMIStatus, reason: FailureReason, message: str, now: datetime) -> VMIStatus:
    """`status` moved to Failed with the reason in status.reason and a Synchronized condition."""
    status = with_phases(status, [VMIPhase.FAILED], now)
    status = vmi_condition(
        status,
        VMIConditionType.SYNCHRONIZED,
        ConditionStatus.FALSE,
        reason=reason,
        message=message,
        now=now,
    )
    return dataclasses.replace(status, reason=str(reason))


def parse_or(text: str | None, default: datetime) -> datetime:
    """`text` parsed as a Kubernetes timestamp; `default` when it is missing or bad."""
    if not text:
        return default
    try:
        return parse_time(text)
    except ValueError:
        return default
