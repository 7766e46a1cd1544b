"""Decentralized live migration, the sending VMIM (`spec.sendTo`): its plan.

Called by decentral_io.py from the migration controller. The sending side creates no
target pod: it offers its half to the peer and, once the receiving side published its
target, writes the source VMI's migrationState pointing at it (targetState naming the
receiving VMI), so the source handler runs its usual migrate through the proxy:

    "" → Synchronizing (KubeVirt's phase until the receiving side answered: the offer
         WAITING keeps it there) → Pending (paired; waiting for the VMI to run and be
         live-migratable) → Scheduling → Scheduled → PreparingTarget → TargetReady
         (handed off: the source VMI's migrationState written, naming the target pod)
       → Running (the source handler started) → Succeeded | Failed (reported to the peer)

On success the source VMI has migrated away: the VMI controller ends it `Succeeded`
(controller/vmi/receiver.py: its migrationState completed, naming another VMI as target),
not moved to the target node; `source_done` says so to the caller. Deleting the VMIM
before its end cancels it: before the handoff it fails; after it, the source handler is
asked to abort (abortRequested) and the VMIM follows it to its end.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from controller.migration.decentral import (
    Pairing,
    PairingState,
    PeerOutcome,
    SourceHalf,
    source_state,
)
from controller.migration.logic import WAIT_FOR_CAPACITY, MigrationPlan
from controller.transitions import with_phases
from shared import vmstate
from shared.model import (
    ConditionReason,
    MigrationPhase,
    MigrationState,
    MigrationStatus,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMIPhase,
)
from shared.volumemigration import claim_volumes

P = MigrationPhase


@dataclass(frozen=True, slots=True, kw_only=True)
class SenderPlan:
    """One sync of a sending VMIM: the usual plan, what to tell the peer, and whether the
    source VMI now ends as migrated away."""

    plan: MigrationPlan
    report: tuple[PeerOutcome, str] | None = None
    source_done: bool = False


def source_half(
    m: VirtualMachineInstanceMigration, vmi: VirtualMachineInstance, source_pod: str
) -> SourceHalf | None:
    """The half this VMIM offers (None without a sendTo or a node)."""
    send = m.spec.send_to
    if send is None or not send.migration_id or not vmi.status.node_name:
        return None
    return SourceHalf(
        migration_id=send.migration_id,
        namespace=m.namespace,
        vmim_name=m.metadata.name or "",
        vmi_name=vmi.name,
        vmi_uid=vmi.uid,
        source_node=vmi.status.node_name,
        source_pod=source_pod,
        claim_volumes=tuple(sorted(claim_volumes(vmi))),
    )


def _fail(m: VirtualMachineInstanceMigration, reason: str, now: datetime) -> SenderPlan:
    status = with_phases(m.status, [P.FAILED], now)
    state = status.migration_state or MigrationState(migration_uid=m.uid)
    state = dataclasses.replace(state, failed=True, failure_reason=state.failure_reason or reason)
    plan = MigrationPlan(status=dataclasses.replace(status, migration_state=state), finalizer=False)
    return SenderPlan(plan=plan, report=(PeerOutcome.FAILED, state.failure_reason or reason))


def stored_volumes(vmi: VirtualMachineInstance) -> list[str]:
    """The VMI's volumes on storage of its own namespace or node that have no counterpart
    to be copied into (ephemeral claims, hostDisks, memory dumps): not moved by
    kubevirt-py's decentralized migration. Claims and DataVolumes are copied into the
    receiving VMI's claims of the same volume names (shared/volumemigration.py)."""
    return [
        v.name or ""
        for v in vmi.spec.volumes
        if v.ephemeral is not None or v.host_disk is not None or v.memory_dump is not None
    ]


def _not_movable(vmi: VirtualMachineInstance) -> str | None:
    """Why the VMI cannot be sent now (None: it can); "" means wait."""
    if stored := stored_volumes(vmi):
        names = ", ".join(stored)
        return (
            f"VMI {vmi.key}: decentralized migration of ephemeral, hostDisk or memory-dump "
            f"volumes ({names}) is not supported by kubevirt-py"
        )
    if vmi.status.phase_or_unset != VMIPhase.RUNNING:
        return ""
    migratable = vmi.status.condition(VMIConditionType.LIVE_MIGRATABLE)
    if migratable is None:
        return ""
    if not migratable.is_true and not _only_claims_block(vmi, migratable.reason):
        why = migratable.message or migratable.reason or "not live-migratable"
        return f"VMI {vmi.key} is not live-migratable: {why}"
    return None


def _only_claims_block(vmi: VirtualMachineInstance, reason: str | None) -> bool:
    """LiveMigratable is False only for claims that are not shared (ReadWriteOnce): the
    decentralized migration copies them, as a volume migration does. The handler's
    DisksNotLiveMigratable otherwise names a hostDisk or an ephemeral volume (refused
    above) or the persistent-state claim (not copied: it stays refused)."""
    disks = reason == ConditionReason.DISKS_NOT_MIGRATABLE
    return disks and vmstate.vmi_claim(vmi) is None


def plan_sender(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance | None,
    *,
    offer: Pairing | None,
    source_pod: str | None,
    now: datetime,
) -> SenderPlan:
    """The plan for one sending VMIM; `offer` is the peer's answer to this VMIM's half
    (asked only while Pending: None before that or after the handoff); `source_pod` the
    VMI's live launcher pod (logic.source_pod)."""
    phase = m.status.phase_or_unset
    if phase.is_final():
        return SenderPlan(plan=MigrationPlan(status=m.status, finalizer=False))
    if vmi is None or vmi.is_final() or vmi.metadata.is_deleting:
        return _fail(m, f"VMI {m.vmi_key} does not exist or is not running", now)
    state = vmi.status.migration_state
    ours = state if state is not None and state.migration_uid == m.uid else None
    if m.metadata.is_deleting:
        return _cancel(m, ours, now)
    if ours is not None:
        return _follow(m, ours, now)
    return _plan_pending(m, vmi, offer=offer, source_pod=source_pod, now=now)


def _cancel(
    m: VirtualMachineInstanceMigration, state: MigrationState | None, now: datetime
) -> SenderPlan:
    """Deleted before it ended: before the handoff it just fails; after it the source
    handler is asked to abort, and the VMIM follows it to its end (the guest stays)."""
    if state is None:
        return _fail(m, "cancelled before the handoff", now)
    if state.completed or state.failed:
        return _follow(m, state, now)
    if state.abort_requested:
        return SenderPlan(plan=MigrationPlan(status=m.status, finalizer=True))
    aborting = dataclasses.replace(state, abort_requested=True)
    return SenderPlan(plan=MigrationPlan(status=m.status, vmi_state=aborting, finalizer=True))


def _plan_pending(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance,
    *,
    offer: Pairing | None,
    source_pod: str | None,
    now: datetime,
) -> SenderPlan:
    """Before the handoff: wait for the receiver and the VMI, or hand off."""
    problem = _not_movable(vmi)
    if problem:
        return _fail(m, problem, now)
    if offer is None or offer.state == PairingState.WAITING:
        return _wait(with_phases(m.status, [P.SYNCHRONIZING], now))
    if offer.state == PairingState.REFUSED or offer.target is None:
        return _fail(m, offer.reason or "the receiving side refused", now)
    status = with_phases(m.status, [P.SYNCHRONIZING, P.PENDING], now)
    if problem == "":
        return _wait(status)
    half = source_half(m, vmi, source_pod) if source_pod else None
    if half is None:
        return _fail(m, "the VMI's source pod is gone", now)
    new = source_state(half, offer.target, migration_uid=m.uid)
    handoff = [P.SCHEDULING, P.SCHEDULED, P.PREPARING_TARGET, P.TARGET_READY]
    status = with_phases(status, handoff, now)
    plan = MigrationPlan(
        status=dataclasses.replace(status, migration_state=new), vmi_state=new, finalizer=True
    )
    return SenderPlan(plan=plan)


def _wait(status: MigrationStatus) -> SenderPlan:
    """Not handed off yet: look again shortly (the other half's change also wakes it)."""
    plan = MigrationPlan(status=status, finalizer=True, requeue_after=WAIT_FOR_CAPACITY)
    return SenderPlan(plan=plan)


def _follow(m: VirtualMachineInstanceMigration, state: MigrationState, now: datetime) -> SenderPlan:
    """After the handoff: the source handler's report decides."""
    if state.failed:
        return _fail(m, state.failure_reason or "the source handler reported a failure", now)
    phases = [P.PREPARING_TARGET, P.TARGET_READY]
    if state.start_timestamp:
        phases.append(P.RUNNING)
    if state.completed:
        phases += [P.RUNNING, P.SUCCEEDED]
    status = dataclasses.replace(with_phases(m.status, phases, now), migration_state=state)
    if not state.completed:
        return SenderPlan(plan=MigrationPlan(status=status, finalizer=True))
    return SenderPlan(
        plan=MigrationPlan(status=status, finalizer=False),
        report=(PeerOutcome.SUCCEEDED, ""),
        source_done=True,
    )
