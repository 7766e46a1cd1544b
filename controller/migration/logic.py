"""Migration decisions: (VMIM, its VMI, the VMI's pods, cluster capacity, now) → a plan.

    "" → Pending → Scheduling (target pod created; admitted under the limits)
       → Scheduled (target pod Running) → PreparingTarget (migrationState written to the
       VMI: the handlers take over) → TargetReady (target handler published its address)
       → Running (source handler started) → Succeeded | Failed

The controller drives the phases up to PreparingTarget and reads the rest from the VMI's
migrationState, which the handlers write. Deleting the VMIM before it is final cancels it:
before the handoff the target pod is simply deleted; after it, abortRequested is set on
the VMI and the VMIM's finalizer waits until the handlers settle (or a timeout passes).
A failed migration's target pod is deleted; the guest keeps running on the source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from controller.config import MigrationConfig
from controller.migration.selector import describe
from controller.transitions import with_phases
from shared.launcherpod import LauncherPod
from shared.model import (
    MigrationPhase,
    MigrationState,
    MigrationStatus,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMIPhase,
    parse_time,
)

P = MigrationPhase
PRE_HANDOFF = frozenset({P.UNSET, P.PENDING, P.SCHEDULING, P.SCHEDULED})
HANDED_OFF = frozenset({P.PREPARING_TARGET, P.TARGET_READY, P.RUNNING})
# Phases that hold a slot under the parallel-migration limits.
IN_FLIGHT = frozenset({P.SCHEDULING, P.SCHEDULED, *HANDED_OFF})
WAIT_FOR_CAPACITY = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """Migrations in flight, cluster-wide and by source node (the controller counts them)."""

    in_flight: int = 0
    outbound: Mapping[str, int] = field(default_factory=dict)

    def admits(self, source_node: str, limits: MigrationConfig) -> bool:
        """True when one more migration from `source_node` stays within the limits."""
        return (
            self.in_flight < limits.parallel_per_cluster
            and self.outbound.get(source_node, 0) < limits.outbound_per_node
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPlan:
    """What one sync of one VMIM does; VMI writes go before the VMIM's own status."""

    status: MigrationStatus
    create_target_pod: bool = False
    delete_pods: tuple[LauncherPod, ...] = ()
    # The VMI's new status.migrationState (None: leave it).
    vmi_state: MigrationState | None = None
    # A receiving VMI's DecentralizedLiveMigrationFailure condition (decentral_receive):
    # True sets it, False clears it, None leaves it.
    vmi_blocked: bool | None = None
    finalizer: bool | None = None
    requeue_after: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationInputs:
    """Everything one decision reads."""

    migration: VirtualMachineInstanceMigration
    vmi: VirtualMachineInstance | None
    pods: Sequence[LauncherPod]
    capacity: Capacity
    now: datetime
    config: MigrationConfig
    # With an addedNodeSelector: the nodes the target pod's nodeSelector matches
    # (controller/migration/selector.py); None: not looked at.
    selector_nodes: frozenset[str] | None = None


def plan_migration(inp: MigrationInputs) -> MigrationPlan:
    """The plan for one VMIM."""
    m = inp.migration
    phase = m.status.phase_or_unset
    if m.metadata.is_deleting:
        return _plan_cancel(inp)
    if phase.is_final():
        return _plan_final(inp)
    vmi = inp.vmi
    if vmi is None or vmi.is_final() or vmi.metadata.is_deleting:
        return _fail(inp, f"VMI {m.vmi_key} does not exist or is not running")
    if phase in PRE_HANDOFF:
        return _plan_pre_handoff(inp, vmi)
    return _plan_handed_off(inp, vmi)


def target_pods(inp: MigrationInputs) -> list[LauncherPod]:
    """This migration's target pods (normally one)."""
    return [p for p in inp.pods if p.migration_uid == inp.migration.uid]


def source_pod(inp: MigrationInputs, vmi: VirtualMachineInstance) -> LauncherPod | None:
    """The live pod on the VMI's node that is not this migration's target."""
    for p in inp.pods:
        ours = p.node_name == vmi.status.node_name and p.migration_uid != inp.migration.uid
        if ours and not p.gone_or_going:
            return p
    return None


def _fail(
    inp: MigrationInputs,
    reason: str,
    *,
    abort: bool = False,
    status: MigrationStatus | None = None,
) -> MigrationPlan:
    """Failed, with the reason recorded, the target pod deleted and (after the handoff)
    the handlers told to abort. ``status``: the VMIM's status with the VMI's final
    migrationState already copied in (abortStatus, endTimestamp), else the VMIM's own."""
    status = with_phases(status or inp.migration.status, [P.FAILED], inp.now)
    state = status.migration_state or MigrationState(migration_uid=inp.migration.uid)
    state = dataclasses.replace(state, failed=True, failure_reason=state.failure_reason or reason)
    doomed = tuple(p for p in target_pods(inp) if not p.deleting and not _is_vmi_pod(inp, p))
    vmi_state = _abort_state(inp) if abort else None
    return MigrationPlan(
        status=dataclasses.replace(status, migration_state=state),
        delete_pods=doomed,
        vmi_state=vmi_state,
        finalizer=True if doomed else None,
    )


def _is_vmi_pod(inp: MigrationInputs, pod: LauncherPod) -> bool:
    vmi = inp.vmi
    return vmi is not None and pod.node_name is not None and pod.node_name == vmi.status.node_name


def _own_state(inp: MigrationInputs) -> MigrationState | None:
    """The VMI's migrationState when it belongs to this migration."""
    state = inp.vmi.status.migration_state if inp.vmi is not None else None
    if state is not None and state.migration_uid == inp.migration.uid:
        return state
    return None


def _abort_state(inp: MigrationInputs) -> MigrationState | None:
    state = _own_state(inp)
    if state is None or state.completed or state.failed or state.abort_requested:
        return None
    return dataclasses.replace(state, abort_requested=True)


# ---- before the handoff ---------------------------------------------------------------


def _plan_pre_handoff(inp: MigrationInputs, vmi: VirtualMachineInstance) -> MigrationPlan:
    status = with_phases(inp.migration.status, [P.PENDING], inp.now)
    targets = target_pods(inp)
    if not targets:
        if status.phase_or_unset != P.PENDING:
            return _fail(inp, "the target pod disappeared")
        return _plan_admission(inp, vmi, status)
    target = targets[0]
    status = with_phases(status, [P.SCHEDULING], inp.now)
    if target.gone_or_going:
        return _fail(inp, f"target {target.describe_failure()}")
    if target.unschedulable is not None:
        return _plan_unschedulable(inp, vmi, target, status)
    if not target.running_on_node:
        return MigrationPlan(status=status, finalizer=True)
    return _plan_handoff(inp, vmi, target, status)


def _plan_handoff(
    inp: MigrationInputs, vmi: VirtualMachineInstance, target: LauncherPod, status: MigrationStatus
) -> MigrationPlan:
    """The target pod runs: write migrationState to the VMI, the handlers take over."""
    source = source_pod(inp, vmi)
    if source is None:
        return _fail(inp, "the VMI's source pod is gone")
    state = MigrationState(
        migration_uid=inp.migration.uid,
        source_node=vmi.status.node_name,
        target_node=target.node_name,
        source_pod=source.name,
        target_pod=target.name,
    )
    status = with_phases(status, [P.SCHEDULED, P.PREPARING_TARGET], inp.now)
    return MigrationPlan(
        status=dataclasses.replace(status, migration_state=state), vmi_state=state, finalizer=True
    )


def _plan_admission(
    inp: MigrationInputs, vmi: VirtualMachineInstance, status: MigrationStatus
) -> MigrationPlan:
    """Pending: start once the VMI can move and the limits leave room."""
    waiting = MigrationPlan(status=status, finalizer=True, requeue_after=WAIT_FOR_CAPACITY)
    if vmi.status.phase_or_unset != VMIPhase.RUNNING:
        return waiting
    migratable = vmi.status.condition(VMIConditionType.LIVE_MIGRATABLE)
    if migratable is not None and not migratable.is_true:
        why = migratable.message or migratable.reason or "not live-migratable"
        return _fail(inp, f"VMI {vmi.key} is not live-migratable: {why}")
    if migratable is None:
        return waiting
    other = vmi.status.migration_state
    busy = other is not None and not (other.completed or other.failed)
    if busy and other is not None and other.migration_uid != inp.migration.uid:
        return waiting
    if not inp.capacity.admits(vmi.status.node_name or "", inp.config):
        return waiting
    status = with_phases(status, [P.SCHEDULING], inp.now)
    return MigrationPlan(status=status, create_target_pod=True, finalizer=True)


def _plan_unschedulable(
    inp: MigrationInputs,
    vmi: VirtualMachineInstance,
    target: LauncherPod,
    status: MigrationStatus,
) -> MigrationPlan:
    """Wait for the scheduler up to the unschedulable timeout (KubeVirt's), unless the
    addedNodeSelector matches no node but the source: that fails at once, naming it."""
    added = inp.migration.spec.added_node_selector
    why = target.unschedulable
    nodes = inp.selector_nodes
    if added and nodes is not None and not nodes - {vmi.status.node_name or ""}:
        return _fail(inp, f"{describe(added)} matches no node the VMI may move to: {why}")
    since_text = target.unschedulable_since or target.created
    since = parse_time(since_text) if since_text else inp.now
    waited = (inp.now - since).total_seconds()
    timeout = inp.config.unschedulable_timeout
    if waited >= timeout:
        with_field = f" (with {describe(added)})" if added else ""
        return _fail(inp, f"target pod {target.name} could not be scheduled{with_field}: {why}")
    return MigrationPlan(status=status, finalizer=True, requeue_after=max(0.5, timeout - waited))


# ---- after the handoff ----------------------------------------------------------------


def _plan_handed_off(inp: MigrationInputs, vmi: VirtualMachineInstance) -> MigrationPlan:
    """Follow the VMI's migrationState, which the handlers now write."""
    status = inp.migration.status
    state = _own_state(inp)
    if state is None:
        if status.migration_state is None:
            return _fail(inp, "the VMI's migrationState was lost")
        return MigrationPlan(status=status, vmi_state=status.migration_state, finalizer=True)
    status = dataclasses.replace(status, migration_state=state)
    if state.failed:
        reason = state.failure_reason or "the handlers reported a failure"
        return _fail(inp, reason, status=status)
    if state.completed:
        return MigrationPlan(status=with_phases(status, [P.SUCCEEDED], inp.now), finalizer=False)
    if not any(p.running_on_node for p in target_pods(inp)):
        return _fail(inp, "the target pod is gone", abort=True)
    phases = [P.PREPARING_TARGET]
    if state.target_node_address or state.target_node_domain_detected:
        phases.append(P.TARGET_READY)
    if state.start_timestamp:
        phases += [P.TARGET_READY, P.RUNNING]
    status = with_phases(status, _monotonic(status.phase_or_unset, phases), inp.now)
    return MigrationPlan(status=status, finalizer=True)


_ORDER = (P.PREPARING_TARGET, P.TARGET_READY, P.RUNNING)


def _monotonic(current: MigrationPhase, phases: Sequence[MigrationPhase]) -> list[MigrationPhase]:
    """The phases still ahead of `current` (phases never move backwards)."""
    floor = _ORDER.index(current) if current in _ORDER else -1
    out: list[MigrationPhase] = []
    for p in phases:
        if _ORDER.index(p) > floor and p not in out:
            out.append(p)
    return out


# ---- final and cancelled --------------------------------------------------------------


def _plan_final(inp: MigrationInputs) -> MigrationPlan:
    """A final VMIM: a failed one's target pods go; then the finalizer."""
    status = inp.migration.status
    if status.phase_or_unset == P.FAILED:
        doomed = tuple(p for p in target_pods(inp) if not p.deleting and not _is_vmi_pod(inp, p))
        if doomed:
            return MigrationPlan(status=status, delete_pods=doomed, finalizer=True)
    return MigrationPlan(status=status, finalizer=False)


def _plan_cancel(inp: MigrationInputs) -> MigrationPlan:
    """Deleted before it finished: cancel, wait until the handlers settle, then let go."""
    m = inp.migration
    phase = m.status.phase_or_unset
    if phase.is_final():
        plan = _plan_final(inp)
        return dataclasses.replace(plan, finalizer=bool(plan.delete_pods))
    if phase in PRE_HANDOFF:
        return _settled(_fail(inp, "cancelled before the handoff"))
    state = _own_state(inp)
    if state is None or state.failed or state.completed:
        return _settled(_plan_handed_off(inp, inp.vmi) if inp.vmi else _fail(inp, "VMI gone"))
    deleted = m.metadata.deletion_timestamp
    waited = (inp.now - parse_time(deleted)).total_seconds() if deleted else 0.0
    if waited >= inp.config.abort_timeout:
        return _settled(_fail(inp, "cancelled; the handlers did not confirm the abort"))
    return MigrationPlan(
        status=m.status,
        vmi_state=_abort_state(inp),
        finalizer=True,
        requeue_after=max(1.0, inp.config.abort_timeout - waited),
    )


def _settled(plan: MigrationPlan) -> MigrationPlan:
    """Keep the finalizer only while target pods are still being deleted."""
    return dataclasses.replace(plan, finalizer=bool(plan.delete_pods))
