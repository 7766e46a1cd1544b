"""Decentralized live migration in one cluster: the migration controller's half-plans
(decentral_send.py, decentral_receive.py) fed from its caches.

The peer is answered in process (decentral.InProcessPeer) from the VMIM cache, indexed by
migrationID (informers.MIGRATION_ID_INDEX), and the VMI cache. The sending side's end is
read back from the sending VMIM's own phase in the cache (so a controller restart loses
nothing); each VMIM's change wakes the other half (`peer_keys`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from controller.informers import MIGRATION_ID_INDEX, Informers
from controller.migration.decentral import InProcessPeer, PeerOutcome
from controller.migration.decentral_receive import ReceiverInputs, plan_receiver
from controller.migration.decentral_send import plan_sender, source_half
from controller.migration.logic import MigrationPlan
from shared.launcherpod import LauncherPod
from shared.model import (
    MigrationPhase,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)

Migration = VirtualMachineInstanceMigration
OFFERING = frozenset({MigrationPhase.UNSET, MigrationPhase.SYNCHRONIZING, MigrationPhase.PENDING})


def is_decentral(m: Migration) -> bool:
    """A half of a decentralized migration (sendTo or receive)."""
    return m.spec.send_to is not None or m.spec.receive is not None


def migration_id(m: Migration) -> str:
    """The VMIM's migrationID ("" for a usual migration)."""
    half = m.spec.send_to or m.spec.receive
    return (half.migration_id if half is not None else None) or ""


def _senders(candidates: Sequence[Migration], mid: str) -> list[Migration]:
    return [m for m in candidates if m.spec.send_to and m.spec.send_to.migration_id == mid]


def sender_outcome(senders: Sequence[Migration]) -> tuple[PeerOutcome, str] | None:
    """How the sending side ended (None: it has not)."""
    phases = [m.status.phase_or_unset for m in senders]
    if MigrationPhase.SUCCEEDED in phases:
        return PeerOutcome.SUCCEEDED, ""
    failed = [m for m in senders if m.status.phase_or_unset is MigrationPhase.FAILED]
    if failed and len(failed) == len(senders):
        state = failed[0].status.migration_state
        return PeerOutcome.FAILED, (state.failure_reason if state else None) or ""
    return None


def _source_pod(vmi: VirtualMachineInstance, pods: Sequence[LauncherPod]) -> str | None:
    """The VMI's live launcher pod on its node."""
    node = vmi.status.node_name
    for p in pods:
        if p.node_name == node and not p.gone_or_going:
            return p.name
    return None


class DecentralMigrations:
    """Plans for the VMIMs with sendTo / receive, from the controller's caches."""

    def __init__(self, informers: Informers) -> None:
        self._informers = informers
        self.peer = InProcessPeer(
            receivers=self._by_id, vmis=informers.vmis.store.get, outcomes=self._outcome
        )

    def _by_id(self, mid: str) -> list[Migration]:
        return self._informers.migrations.store.by_index(MIGRATION_ID_INDEX, mid)

    def _outcome(self, mid: str) -> tuple[PeerOutcome, str] | None:
        return sender_outcome(_senders(self._by_id(mid), mid))

    def peer_keys(self, m: Migration) -> list[str]:
        """The other VMIMs of `m`'s migrationID (to wake when `m` changes)."""
        mid = migration_id(m)
        return [o.key for o in self._by_id(mid) if o.key != m.key] if mid else []

    def synchronized(self, receiver: Migration) -> bool:
        """A live sending VMIM of the receiver's migrationID whose VMI runs on a node
        (KubeVirt's receiving VMIM leaves WaitingForSync once the sender synchronized)."""
        store = self._informers.vmis.store
        mid = migration_id(receiver)
        for m in _senders(self._by_id(mid), mid):
            if m.is_final() or m.metadata.is_deleting:
                continue
            vmi = store.get(m.vmi_key)
            if vmi is not None and vmi.status.node_name and not vmi.is_final():
                return True
        return False

    def source_node(self, receiver: Migration) -> str:
        """The sending VMI's node (the target pod is kept off it), "" while unknown."""
        store = self._informers.vmis.store
        for m in _senders(self._by_id(migration_id(receiver)), migration_id(receiver)):
            vmi = store.get(m.vmi_key)
            if vmi is not None and vmi.status.node_name:
                return vmi.status.node_name
        return ""

    def plan(
        self,
        m: Migration,
        vmi: VirtualMachineInstance | None,
        pods: Sequence[LauncherPod],
        *,
        now: datetime,
    ) -> MigrationPlan:
        """The plan for one sending or receiving VMIM."""
        mid = migration_id(m)
        if m.spec.receive is not None:
            inputs = ReceiverInputs(
                migration=m,
                vmi=vmi,
                pods=pods,
                now=now,
                outcome=self.peer.outcome(mid),
                synchronized=self.synchronized(m),
            )
            return plan_receiver(inputs)
        source_pod = _source_pod(vmi, pods) if vmi is not None else None
        offer = None
        if vmi is not None and source_pod and m.status.phase_or_unset in OFFERING:
            half = source_half(m, vmi, source_pod)
            offer = self.peer.offer(half) if half is not None else None
        planned = plan_sender(m, vmi, offer=offer, source_pod=source_pod, now=now)
        if planned.report is not None:
            self.peer.report(mid, planned.report[0], reason=planned.report[1])
        return planned.plan
