"""The Ready condition of a VMI with a readinessProbe: its launcher pod's Ready condition
(the kubelet runs the probe as the pod's, controller/services/probes.py), as KubeVirt's
controller copies it. The handler leaves Ready to the controller for such VMIs while the
guest runs, and still says False when the guest is paused or shutting down."""

from __future__ import annotations

from datetime import datetime

from controller.transitions import vmi_condition
from shared.launcherpod import LauncherPod
from shared.model import (
    ConditionReason,
    ConditionStatus,
    VMICondition,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
    format_time,
)

NOT_READY = "PodNotReady"
# Ready=False reasons the handler sets, which a passing probe must not override.
HANDLER_REASONS = frozenset({str(ConditionReason.POD_TERMINATING), "Paused"})


def with_probe_readiness(status: VMIStatus, pod: LauncherPod, now: datetime) -> VMIStatus:
    """`status` with Ready following the launcher pod's readiness while Running."""
    if status.phase_or_unset is not VMIPhase.RUNNING:
        return status
    current = status.condition(VMIConditionType.READY)
    if current is not None and not current.is_true and str(current.reason) in HANDLER_REASONS:
        return status
    if pod.ready:
        if current is not None and current.is_true:
            return status
        ready = VMICondition(type=VMIConditionType.READY, status=ConditionStatus.TRUE,
                             last_transition_time=format_time(now))  # fmt: skip
        return status.with_condition(ready)
    reason = pod.not_ready_reason or NOT_READY
    message = f"the launcher pod {pod.name} is not ready (readiness probe)"
    return vmi_condition(status, VMIConditionType.READY, ConditionStatus.FALSE,
                         reason=reason, message=message, now=now)  # fmt: skip
