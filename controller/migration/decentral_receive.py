"""Decentralized live migration, the receiving VMIM (`spec.receive`): its plan.

Called by decentral_io.py from the migration controller. The receiving VMI waits with
no launcher pod; this plan gives it one from its own spec, in its own namespace, and
publishes the target half for the sending side:

    "" → WaitingForSync (no live sending VMIM of its migrationID with a running VMI yet:
       KubeVirt's phase until the sending side synchronized)
       → Pending (receiving VMI exists and waits) → Scheduling (target pod created)
       → Scheduled (target pod Running) → PreparingTarget (the receiving VMI's
       migrationState names the target pod: its handler prepares the target launcher)
       → TargetReady (the handler published its address: `decentral.target_half` answers)
       → Running (the sending side reported success: the receiving VMI's migrationState
         says completed, its handler takes the guest over) → Succeeded (it did: the
         receiving VMI's nodeName is the target node) | Failed (the sending side failed)

A failed sending side, the target pod lost, a receiving VMI that is not a WaitAsReceiver
VM's, or the VMIM deleted before the guest arrived fails the receiving VMIM and deletes
its target pod; it is not retried (KubeVirt's rule). The receiving VMI is told (its
migrationState failed and completed, as KubeVirt's) and keeps waiting in WaitingForSync:
a new pair of VMIMs may move the guest to it.

While the VMIM is WaitingForSync its VMI carries KubeVirt's
`DecentralizedLiveMigrationFailure` condition (written by the migration controller with
the VMI's migrationState: `MigrationPlan.vmi_blocked`), cleared when the VMIM moves on or
fails, as KubeVirt's synchronization controller does; the VMIM mirrors it as
`decentralizedMigrationBlocked`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.migration.decentral import PeerOutcome, target_half
from controller.migration.logic import WAIT_FOR_CAPACITY, MigrationPlan
from controller.transitions import vmi_condition, with_phases
from shared.labels import RECEIVER_ANNOTATION
from shared.launcherpod import LauncherPod
from shared.model import (
    ConditionStatus,
    MigrationCondition,
    MigrationPhase,
    MigrationState,
    MigrationStatus,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
    format_time,
)

P = MigrationPhase
VMI_FAILURE = VMIConditionType.DECENTRALIZED_LIVE_MIGRATION_FAILURE
# KubeVirt's VMIM condition type, its reason and its message while the receiving side waits.
BLOCKED = "decentralizedMigrationBlocked"
NOT_MIGRATABLE_REASON = "DecentralizedNotLiveMigratable"
WAITING_FOR_SYNC_MESSAGE = "waiting for incoming synchronization, unable to proceed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverInputs:
    """Everything one decision about a receiving VMIM reads."""

    migration: VirtualMachineInstanceMigration
    vmi: VirtualMachineInstance | None
    pods: Sequence[LauncherPod]
    now: datetime
    # The sending side's end, once reported (InProcessPeer.outcome).
    outcome: tuple[PeerOutcome, str] | None = None
    # A live sending VMIM of this migrationID whose VMI runs on a node (decentral_io).
    synchronized: bool = False


def _targets(inp: ReceiverInputs) -> list[LauncherPod]:
    return [p for p in inp.pods if p.migration_uid == inp.migration.uid]


def _fail(inp: ReceiverInputs, reason: str) -> MigrationPlan:
    status = with_phases(inp.migration.status, [P.FAILED], inp.now)
    state = status.migration_state or MigrationState(migration_uid=inp.migration.uid)
    state = dataclasses.replace(
        state,
        failed=True,
        completed=True,
        end_timestamp=state.end_timestamp or format_time(inp.now),
        failure_reason=state.failure_reason or reason,
    )
    doomed = tuple(p for p in _targets(inp) if not p.deleting)
    return MigrationPlan(
        status=dataclasses.replace(status, migration_state=state),
        delete_pods=doomed,
        vmi_state=_failed_vmi_state(inp, state),
        finalizer=True if doomed else None,
    )


def _failed_vmi_state(inp: ReceiverInputs, state: MigrationState) -> MigrationState | None:
    """The failure written to a waiting receiving VMI (which keeps waiting, as KubeVirt's);
    None for a VMI that is gone, not a receiver, already running or already told."""
    vmi = inp.vmi
    if vmi is None or vmi.is_final() or vmi.metadata.is_deleting:
        return None
    if vmi.metadata.annotations.get(RECEIVER_ANNOTATION) != "true":
        return None
    if vmi.status.phase_or_unset == VMIPhase.RUNNING:
        return None
    current = vmi.status.migration_state
    if current is not None and current.failed:
        return None
    return state


def plan_receiver(inp: ReceiverInputs) -> MigrationPlan:
    """The plan for one receiving VMIM, its `decentralizedMigrationBlocked` condition and
    its VMI's `DecentralizedLiveMigrationFailure` present while it waits for the sending
    side (KubeVirt's); a final VMIM leaves its VMI's condition alone (a newer VMIM's)."""
    plan = _plan(inp)
    status = with_blocked(plan.status, inp.now)
    blocked = None
    if inp.vmi is not None and not inp.migration.status.phase_or_unset.is_final():
        blocked = status.phase_or_unset is P.WAITING_FOR_SYNC
    return dataclasses.replace(plan, status=status, vmi_blocked=blocked)


def with_vmi_blocked(status: VMIStatus, *, blocked: bool, now: datetime) -> VMIStatus:
    """The receiving VMI's `status` with KubeVirt's `DecentralizedLiveMigrationFailure`
    condition (reason and message as its synchronization controller's) when `blocked`,
    without it otherwise."""
    if not blocked:
        if status.condition(VMI_FAILURE) is None:
            return status
        return status.without_condition(VMI_FAILURE)
    return vmi_condition(
        status,
        VMI_FAILURE,
        ConditionStatus.TRUE,
        reason=NOT_MIGRATABLE_REASON,
        message=WAITING_FOR_SYNC_MESSAGE,
        now=now,
    )


def with_blocked(status: MigrationStatus, now: datetime) -> MigrationStatus:
    """`status` with KubeVirt's `decentralizedMigrationBlocked` condition while it is
    WaitingForSync (reason and message as its synchronization controller writes them on
    the receiving VMI, the VMIM mirroring it), without it in any other phase."""
    old = status.condition(BLOCKED)
    others = tuple(c for c in status.conditions if c.type != BLOCKED)
    if status.phase_or_unset is not P.WAITING_FOR_SYNC:
        return status if old is None else dataclasses.replace(status, conditions=others)
    if old is not None and old.is_true and old.message == WAITING_FOR_SYNC_MESSAGE:
        return status
    stamp = format_time(now)
    blocked = MigrationCondition(
        type=BLOCKED,
        status=ConditionStatus.TRUE,
        reason=NOT_MIGRATABLE_REASON,
        message=WAITING_FOR_SYNC_MESSAGE,
        last_probe_time=stamp,
        last_transition_time=stamp,
    )
    return dataclasses.replace(status, conditions=(*others, blocked))


def _plan(inp: ReceiverInputs) -> MigrationPlan:
    m, vmi = inp.migration, inp.vmi
    if m.status.phase_or_unset.is_final():
        return MigrationPlan(status=m.status, finalizer=False)
    why = _why_failed(inp)
    if why is not None or vmi is None:
        return _fail(inp, why or f"receiving VMI {m.vmi_key} does not exist")
    if m.status.phase_or_unset in (P.UNSET, P.WAITING_FOR_SYNC) and not inp.synchronized:
        status = with_phases(m.status, [P.WAITING_FOR_SYNC], inp.now)
        return MigrationPlan(status=status, finalizer=True, requeue_after=WAIT_FOR_CAPACITY)
    return _plan_live(inp, vmi)


def _why_failed(inp: ReceiverInputs) -> str | None:
    """Why the receiving VMIM fails now (None: it goes on)."""
    m, vmi = inp.migration, inp.vmi
    if inp.outcome is not None and inp.outcome[0] == PeerOutcome.FAILED:
        return f"the sending side failed: {inp.outcome[1] or 'no reason given'}"
    arrived = inp.outcome is not None and inp.outcome[0] == PeerOutcome.SUCCEEDED
    if m.metadata.is_deleting and not arrived:  # the guest never came: nothing to keep
        return "cancelled: the receiving VMIM was deleted"
    if vmi is None or vmi.is_final() or vmi.metadata.is_deleting:
        return f"receiving VMI {m.vmi_key} does not exist or has ended"
    if vmi.metadata.annotations.get(RECEIVER_ANNOTATION) != "true":
        why = "its VM's runStrategy is not WaitAsReceiver"
        return f"VMI {vmi.key} is not a receiving VMI: {why}"
    return None


def _plan_live(inp: ReceiverInputs, vmi: VirtualMachineInstance) -> MigrationPlan:
    """Before the target pod runs: create it, wait for it, or fail when it is lost."""
    status = with_phases(inp.migration.status, [P.WAITING_FOR_SYNC, P.PENDING], inp.now)
    targets = _targets(inp)
    if not targets:
        if status.phase_or_unset != P.PENDING:
            return _fail(inp, "the target pod disappeared")
        if vmi.status.phase_or_unset == VMIPhase.RUNNING:
            return _fail(inp, f"receiving VMI {vmi.key} already runs a guest")
        status = with_phases(status, [P.SCHEDULING], inp.now)
        return MigrationPlan(status=status, create_target_pod=True, finalizer=True)
    target = targets[0]
    if target.gone_or_going:
        return _fail(inp, f"target {target.describe_failure()}")
    if not target.running_on_node:
        return MigrationPlan(status=with_phases(status, [P.SCHEDULING], inp.now), finalizer=True)
    return _plan_target_running(inp, vmi, target)


def _plan_target_running(
    inp: ReceiverInputs, vmi: VirtualMachineInstance, target: LauncherPod
) -> MigrationPlan:
    """The target pod runs: hand it to its handler, then follow the sending side."""
    m = inp.migration
    state = vmi.status.migration_state
    ours = state is not None and state.migration_uid == m.uid
    phases = [P.SCHEDULING, P.SCHEDULED, P.PREPARING_TARGET]
    if not ours or state is None:
        state = MigrationState(
            migration_uid=m.uid, target_node=target.node_name, target_pod=target.name
        )
        status = with_phases(m.status, phases, inp.now)
        status = dataclasses.replace(status, migration_state=state)
        return MigrationPlan(status=status, vmi_state=state, finalizer=True)
    if target_half(m, vmi) is not None:
        phases.append(P.TARGET_READY)
    vmi_state = None
    if inp.outcome is not None and inp.outcome[0] == PeerOutcome.SUCCEEDED:
        phases += [P.TARGET_READY, P.RUNNING]
        if not state.completed:  # the target handler takes the guest over on this
            state = dataclasses.replace(state, completed=True, end_timestamp=format_time(inp.now))
            vmi_state = state
        elif vmi.status.node_name == state.target_node:  # taken over: the guest runs here
            phases.append(P.SUCCEEDED)
    status = dataclasses.replace(with_phases(m.status, phases, inp.now), migration_state=state)
    done = status.phase_or_unset == P.SUCCEEDED
    return MigrationPlan(status=status, vmi_state=vmi_state, finalizer=not done)
