"""Decentralized live migration: the migration controller's half-plans
(decentral_send.py, decentral_receive.py) fed from its caches and, with another cluster,
from the synchronization endpoint.

In one cluster (a connectURL naming this cluster's own synchronization address) the peer
is answered in process (decentral.InProcessPeer) from the VMIM cache, indexed by
migrationID (informers.MIGRATION_ID_INDEX), and the VMI cache. The sending side's end is
read back from the sending VMIM's own phase in the cache (so a controller restart loses
nothing); each VMIM's change wakes the other half (`peer_keys`).

With another cluster the sending VMIM's offer and report go to the receiving controller at
connectURL (decentral_remote.RemoteSending); a receiving VMIM reads the other cluster's
sender from the synchronization desk (decentral_remote.SyncDesk) and carries this
controller's `status.synchronizationAddresses`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime

from controller.informers import MIGRATION_ID_INDEX, Informers
from controller.migration.decentral import InProcessPeer, Pairing, PeerOutcome, SourceHalf
from controller.migration.decentral_receive import ReceiverInputs, plan_receiver
from controller.migration.decentral_remote import RemoteSending, SyncDesk
from controller.migration.decentral_send import plan_sender, source_half
from controller.migration.logic import WAIT_FOR_CAPACITY, MigrationPlan
from controller.migration.sync_config import SyncConfig
from shared.launcherpod import LauncherPod
from shared.model import (
    MigrationPhase,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)
from shared.wire.sync import Report

Migration = VirtualMachineInstanceMigration
OFFERING = frozenset({MigrationPhase.UNSET, MigrationPhase.SYNCHRONIZING, MigrationPhase.PENDING})
_HOST = "virt-synchronization-controller.kubevirt.svc"
# This cluster's own synchronization address (KubeVirt's virt-synchronization-controller
# Service): a sendTo naming it pairs in process.
LOCAL_SYNC_ADDRESSES = frozenset({f"{_HOST}:9185", f"{_HOST}.cluster.local:9185"})


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
    """Plans for the VMIMs with sendTo / receive, from the controller's caches and the
    synchronization endpoint; `wake` queues a VMIM key (the receiving VMIMs of a
    migrationID another cluster's sender just synchronized)."""

    def __init__(
        self,
        informers: Informers,
        *,
        sync: SyncConfig | None = None,
        wake: Callable[[str], None] = lambda key: None,
    ) -> None:
        self._informers = informers
        self._wake_key = wake
        self.peer = InProcessPeer(
            receivers=self._by_id, vmis=informers.vmis.store.get, outcomes=self._outcome
        )
        self.desk = SyncDesk(receivers=self._by_id, vmis=informers.vmis.store.get, wake=self._wake)
        self.remote = RemoteSending(sync)
        self.addresses = sync.addresses() if sync is not None else ()
        self._local = LOCAL_SYNC_ADDRESSES | set(self.addresses)

    def _by_id(self, mid: str) -> list[Migration]:
        return self._informers.migrations.store.by_index(MIGRATION_ID_INDEX, mid)

    def _wake(self, mid: str) -> None:
        for m in self._by_id(mid):
            self._wake_key(m.key)

    def _senders(self, mid: str) -> list[Migration]:
        """This cluster's sending VMIMs of `mid` that pair in process (not the ones sending
        to another cluster)."""
        return [m for m in _senders(self._by_id(mid), mid) if self.remote_url(m) is None]

    def _outcome(self, mid: str) -> tuple[PeerOutcome, str] | None:
        return sender_outcome(self._senders(mid)) or self.desk.outcome(mid)

    def remote_url(self, m: Migration) -> str | None:
        """The sending VMIM's connectURL when it names another cluster (None: this one)."""
        url = m.spec.send_to.connect_url if m.spec.send_to is not None else None
        return url if url and url not in self._local else None

    def peer_keys(self, m: Migration) -> list[str]:
        """The other VMIMs of `m`'s migrationID (to wake when `m` changes)."""
        mid = migration_id(m)
        return [o.key for o in self._by_id(mid) if o.key != m.key] if mid else []

    def synchronized(self, receiver: Migration) -> bool:
        """A live sending VMIM of the receiver's migrationID whose VMI runs on a node, or
        another cluster's sender that offered lately (KubeVirt's receiving VMIM leaves
        WaitingForSync once the sender synchronized)."""
        store = self._informers.vmis.store
        mid = migration_id(receiver)
        for m in self._senders(mid):
            if m.is_final() or m.metadata.is_deleting:
                continue
            vmi = store.get(m.vmi_key)
            if vmi is not None and vmi.status.node_name and not vmi.is_final():
                return True
        return self.desk.synchronized(mid)

    def source_node(self, receiver: Migration) -> str:
        """The sending VMI's node (the target pod is kept off it), "" while unknown or in
        another cluster."""
        store = self._informers.vmis.store
        for m in self._senders(migration_id(receiver)):
            vmi = store.get(m.vmi_key)
            if vmi is not None and vmi.status.node_name:
                return vmi.status.node_name
        return ""

    async def plan(
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
            return self._with_addresses(plan_receiver(inputs))
        # A report to another cluster that did not get through is sent again first.
        sent = await self.remote.resend(m.key)
        source_pod = _source_pod(vmi, pods) if vmi is not None else None
        offer = None
        if vmi is not None and source_pod and m.status.phase_or_unset in OFFERING:
            half = source_half(m, vmi, source_pod)
            offer = await self._offer(m, half) if half is not None else None
        planned = plan_sender(m, vmi, offer=offer, source_pod=source_pod, now=now)
        if planned.report is not None:
            sent = await self._report(m, planned.report)
        if sent:
            return planned.plan
        # Keep the VMIM (its finalizer) until the receiving cluster heard how it ended.
        return dataclasses.replace(planned.plan, finalizer=True, requeue_after=WAIT_FOR_CAPACITY)

    async def _report(self, m: Migration, outcome: tuple[PeerOutcome, str]) -> bool:
        """Tell the peer how the sending side ended; False: to be sent again."""
        mid = migration_id(m)
        url = self.remote_url(m)
        if url is None:
            await self.peer.report(mid, outcome[0], reason=outcome[1])
            return True
        report = Report(migration_id=mid, outcome=outcome[0], reason=outcome[1])
        return await self.remote.report(m.key, url, report)

    async def _offer(self, m: Migration, half: SourceHalf) -> Pairing:
        url = self.remote_url(m)
        if url is None:
            return await self.peer.offer(half)
        return await self.remote.offer(m.key, url, half)

    def _with_addresses(self, plan: MigrationPlan) -> MigrationPlan:
        """A receiving VMIM lists where the sending cluster dials (KubeVirt's field)."""
        if plan.status.synchronization_addresses == self.addresses:
            return plan
        status = dataclasses.replace(plan.status, synchronization_addresses=self.addresses)
        return dataclasses.replace(plan, status=status)

    def forget(self, m: Migration) -> None:
        """A VMIM is gone: drop what was kept for it."""
        self.remote.forget(m.key)
