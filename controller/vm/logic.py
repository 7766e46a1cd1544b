"""VM decisions: (VM, its VMI, now) → create or delete the VMI, and the VM's new status.

Order of precedence in one sync (KubeVirt's):
1. a VM being deleted takes its VMI with it;
2. a VMI of the same name that the VM does not own is never touched (Failure condition);
3. status.stateChangeRequests (what start/stop/restart write) are served first, in order:
   Stop{uid} deletes that VMI and is dropped once it is gone; Start creates the VMI (a
   final one is deleted first) and is dropped once it exists;
4. with no request pending, the run strategy decides:
   Always          keep a VMI; a final one is deleted and recreated
   RerunOnFailure  keep a VMI; a Failed one is recreated, a Succeeded one stays
   Once            create a VMI when there is none; a final one stays
   Manual          only requests create or delete
   Halted          no VMI
Failed VMIs of Always/RerunOnFailure count as crash-loop failures: recreation waits
base·2^(n-1) seconds (capped), shown as CrashLoopBackOff; a VMI that reaches Running
resets the count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.transitions import vm_condition
from shared.labels import POD_SCHEDULED, UNSCHEDULABLE_REASON
from shared.model import (
    ConditionReason,
    ConditionStatus,
    PrintableStatus,
    RunStrategy,
    StartFailure,
    StateChangeAction,
    StateChangeRequest,
    VirtualMachine,
    VirtualMachineInstance,
    VMCondition,
    VMConditionType,
    VMIConditionType,
    VMIPhase,
    VMStatus,
    format_time,
    parse_time,
)

RESTARTING = frozenset({RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE})
STARTING_PHASES = frozenset(
    {VMIPhase.UNSET, VMIPhase.PENDING, VMIPhase.SCHEDULING, VMIPhase.SCHEDULED}
)
VMI_NOT_EXISTS = "VMINotExists"
VMI_NOT_OWNED = "VMINotOwned"


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Crash-loop backoff: base·2^(failures-1) seconds, at most `cap`."""

    base: float = 10.0
    cap: float = 300.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures."""
        return float(min(self.cap, self.base * 2.0 ** max(0, failures - 1)))


@dataclass(frozen=True, slots=True, kw_only=True)
class VMPlan:
    """What one sync of one VM does."""

    status: VMStatus
    create_vmi: bool = False
    # UID of the VMI to delete (a precondition, so a newer VMI of the same name survives).
    delete_vmi_uid: str | None = None
    requeue_after: float | None = None


@dataclass(frozen=True, slots=True)
class _Step:
    """The action part of a plan before the status is rendered."""

    create: bool = False
    delete: bool = False
    requests: tuple[StateChangeRequest, ...] = ()
    wait: float | None = None


def plan_vm(
    vm: VirtualMachine, vmi: VirtualMachineInstance | None, *, now: datetime, backoff: Backoff
) -> VMPlan:
    """The plan for one VM given the VMI of its name (None when there is none)."""
    owned = vmi if vmi is not None and _owns(vm, vmi) else None
    failure = _start_failure(vm, owned, now=now, backoff=backoff)
    status = dataclasses.replace(vm.status, start_failure=failure)
    if vmi is not None and owned is None:
        message = f"VMI {vmi.key} exists and is not controlled by this VM"
        return VMPlan(status=_render(vm, None, status, now=now, failure=message))
    step = _decide(vm, owned, status, now=now)
    status = dataclasses.replace(status, state_change_requests=step.requests)
    rendered = _render(vm, owned, status, now=now, failure=None)
    stopping = owned is not None and not owned.is_final() and not vm.metadata.is_deleting
    if step.delete and stopping:
        rendered = dataclasses.replace(rendered, printable_status=PrintableStatus.STOPPING)
    return VMPlan(
        status=rendered,
        create_vmi=step.create,
        delete_vmi_uid=owned.uid if step.delete and owned is not None else None,
        requeue_after=step.wait,
    )


def _owns(vm: VirtualMachine, vmi: VirtualMachineInstance) -> bool:
    ref = vmi.metadata.controller_ref()
    return ref is not None and ref.uid == vm.uid


def _decide(
    vm: VirtualMachine, vmi: VirtualMachineInstance | None, status: VMStatus, *, now: datetime
) -> _Step:
    live = vmi is not None and not vmi.metadata.is_deleting
    if vm.metadata.is_deleting:
        return _Step(delete=live, requests=status.state_change_requests)
    step = _serve_requests(vmi, status.state_change_requests)
    if step is not None:
        return step
    # Every request served (or none pending): the run strategy decides.
    return _run_strategy(vm.spec.effective_run_strategy(), vmi, status, now=now)


def _serve_requests(
    vmi: VirtualMachineInstance | None, requests: Sequence[StateChangeRequest]
) -> _Step | None:
    """The first pending request's action, or None once every request is served."""
    pending = list(requests)
    while pending:
        req = pending[0]
        if req.action == StateChangeAction.STOP:
            if vmi is not None and (not req.uid or req.uid == vmi.uid):
                return _Step(delete=not vmi.metadata.is_deleting, requests=tuple(pending))
        elif req.action == StateChangeAction.START:
            if vmi is None:
                return _Step(create=True, requests=tuple(pending[1:]))
            if vmi.metadata.is_deleting:
                return _Step(requests=tuple(pending))
            if vmi.is_final():
                return _Step(delete=True, requests=tuple(pending))
        pending.pop(0)
    return None


def _run_strategy(
    strategy: RunStrategy,
    vmi: VirtualMachineInstance | None,
    status: VMStatus,
    *,
    now: datetime,
) -> _Step:
    if vmi is None:
        if strategy in (RunStrategy.HALTED, RunStrategy.MANUAL):
            return _Step()
        wait = _backoff_left(status, now) if strategy in RESTARTING else 0.0
        return _Step(wait=wait) if wait > 0 else _Step(create=True)
    if vmi.metadata.is_deleting:
        return _Step()
    return _Step(delete=_should_delete(strategy, vmi.status.phase_or_unset))


def _should_delete(strategy: RunStrategy, phase: VMIPhase) -> bool:
    """Whether the run strategy removes an existing VMI in this phase."""
    return (
        strategy == RunStrategy.HALTED
        or (strategy == RunStrategy.ALWAYS and phase.is_final())
        or (strategy == RunStrategy.RERUN_ON_FAILURE and phase == VMIPhase.FAILED)
    )


# ---- crash-loop bookkeeping -----------------------------------------------------------


def _start_failure(
    vm: VirtualMachine, vmi: VirtualMachineInstance | None, *, now: datetime, backoff: Backoff
) -> StartFailure | None:
    """status.startFailure after looking at the VM's current VMI."""
    current = vm.status.start_failure
    if vm.spec.effective_run_strategy() not in RESTARTING or vmi is None:
        return current
    phase = vmi.status.phase_or_unset
    seen = current is not None and current.last_failed_vmi_uid == vmi.uid
    if phase == VMIPhase.FAILED and not seen:
        count = (current.consecutive_fail_count or 0) + 1 if current else 1
        retry = now + timedelta(seconds=backoff.delay(count))
        return StartFailure(
            consecutive_fail_count=count,
            last_failed_vmi_uid=vmi.uid,
            retry_after_timestamp=format_time(retry),
        )
    if phase == VMIPhase.RUNNING and current is not None and not seen:
        return None
    return current


def _backoff_left(status: VMStatus, now: datetime) -> float:
    failure = status.start_failure
    if failure is None or not failure.retry_after_timestamp:
        return 0.0
    try:
        retry = parse_time(failure.retry_after_timestamp)
    except ValueError:
        return 0.0
    return max(0.0, (retry - now).total_seconds())


# ---- status ---------------------------------------------------------------------------


def _render(
    vm: VirtualMachine,
    vmi: VirtualMachineInstance | None,
    status: VMStatus,
    *,
    now: datetime,
    failure: str | None,
) -> VMStatus:
    conditions = _conditions(vm.status, vmi, now=now, failure=failure)
    ready = vmi is not None and vmi.status.condition_is_true(VMIConditionType.READY)
    return dataclasses.replace(
        status,
        printable_status=printable_status(vm, vmi, status, now=now),
        ready=ready or None,
        created=(vmi is not None) or None,
        conditions=conditions,
        observed_generation=vm.metadata.generation,
        desired_generation=vm.metadata.generation,
    )


def _conditions(
    old: VMStatus, vmi: VirtualMachineInstance | None, *, now: datetime, failure: str | None
) -> tuple[VMCondition, ...]:
    """The VMI's conditions mirrored, plus Failure while this VM cannot sync."""
    out: list[VMCondition] = []
    if vmi is None:
        out.append(
            vm_condition(
                old.condition(VMConditionType.READY),
                VMConditionType.READY,
                ConditionStatus.FALSE,
                reason=VMI_NOT_EXISTS,
                message="the VMI does not exist",
                now=now,
            )
        )
    else:
        for c in vmi.status.conditions:
            out.append(
                VMCondition(
                    type=c.type,
                    status=c.status,
                    reason=c.reason,
                    message=c.message,
                    last_probe_time=c.last_probe_time,
                    last_transition_time=c.last_transition_time,
                )
            )
    if failure is not None:
        old_failure = old.condition(VMConditionType.FAILURE)
        out.append(
            vm_condition(
                old_failure,
                VMConditionType.FAILURE,
                ConditionStatus.TRUE,
                reason=VMI_NOT_OWNED,
                message=failure,
                now=now,
            )
        )
    return tuple(out)


# The VMI's Synchronized=False reasons (from its launcher pod's containers) `kubectl get vm`
# shows as they are, as KubeVirt does.
IMAGE_PULL_STATUS = {
    "ErrImagePull": PrintableStatus.ERR_IMAGE_PULL,
    "ErrImageNeverPull": PrintableStatus.ERR_IMAGE_PULL,
    "InvalidImageName": PrintableStatus.ERR_IMAGE_PULL,
    "ImagePullBackOff": PrintableStatus.IMAGE_PULL_BACK_OFF,
}

# The VMI's Synchronized=False reasons while a DataVolume holds its launcher pod back.
DATAVOLUME_STATUS = {
    "DataVolumeNotReady": PrintableStatus.PROVISIONING,
    "DataVolumeFailed": PrintableStatus.DATA_VOLUME_ERROR,
}


def printable_status(
    vm: VirtualMachine, vmi: VirtualMachineInstance | None, status: VMStatus, *, now: datetime
) -> PrintableStatus:
    """What `kubectl get vm` shows (status is the VM's new status, requests included)."""
    if vm.metadata.is_deleting:
        return PrintableStatus.TERMINATING
    stopping = any(r.action == StateChangeAction.STOP for r in status.state_change_requests)
    if vmi is not None and (vmi.metadata.is_deleting or stopping):
        return PrintableStatus.STOPPING
    if vmi is None or vmi.is_final():
        return _printable_down(vm, vmi, status, now=now)
    return _printable_up(vmi)


def _printable_not_started(vmi: VirtualMachineInstance) -> PrintableStatus | None:
    """ErrorUnschedulable, a claim that does not exist or an image the kubelet cannot get,
    if that holds the VMI up."""
    cond = vmi.status.condition(POD_SCHEDULED)
    unschedulable = cond is not None and cond.status == ConditionStatus.FALSE
    if unschedulable and cond is not None and cond.reason == UNSCHEDULABLE_REASON:
        return PrintableStatus.UNSCHEDULABLE
    sync = vmi.status.condition(VMIConditionType.SYNCHRONIZED)
    if sync is not None and sync.status == ConditionStatus.FALSE:
        if sync.reason == ConditionReason.FAILED_PVC_NOT_FOUND:
            return PrintableStatus.PVC_NOT_FOUND
        if sync.reason in DATAVOLUME_STATUS:
            return DATAVOLUME_STATUS[sync.reason]
        return IMAGE_PULL_STATUS.get(sync.reason or "")
    return None


def _printable_up(vmi: VirtualMachineInstance) -> PrintableStatus:
    held = _printable_not_started(vmi)
    if held is not None:
        return held
    phase = vmi.status.phase_or_unset
    if phase in STARTING_PHASES:
        return PrintableStatus.STARTING
    if phase != VMIPhase.RUNNING:  # WaitingForSync: a receiving VM (controller/vm/receiver.py)
        waiting = phase == VMIPhase.WAITING_FOR_SYNC
        return PrintableStatus.WAITING_FOR_RECEIVER if waiting else PrintableStatus.UNKNOWN
    state = vmi.status.migration_state
    if state is not None and state.start_timestamp and not state.end_timestamp:
        return PrintableStatus.MIGRATING
    if vmi.status.condition_is_true(VMIConditionType.PAUSED):
        return PrintableStatus.PAUSED
    return PrintableStatus.RUNNING


def _printable_down(
    vm: VirtualMachine, vmi: VirtualMachineInstance | None, status: VMStatus, *, now: datetime
) -> PrintableStatus:
    strategy = vm.spec.effective_run_strategy()
    if strategy in RESTARTING and _backoff_left(status, now) > 0:
        return PrintableStatus.CRASH_LOOP_BACK_OFF
    starting = any(r.action == StateChangeAction.START for r in status.state_change_requests)
    if vmi is None and (starting or strategy in (*RESTARTING, RunStrategy.ONCE)):
        return PrintableStatus.STARTING
    if vmi is not None and strategy == RunStrategy.ALWAYS:
        return PrintableStatus.STARTING
    if vmi is not None and strategy == RunStrategy.RERUN_ON_FAILURE:
        failed = vmi.status.phase_or_unset == VMIPhase.FAILED
        return PrintableStatus.STARTING if failed else PrintableStatus.STOPPED
    return PrintableStatus.STOPPED
