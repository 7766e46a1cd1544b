"""Decentralized live migration (KubeVirt 1.7 `sendTo` / `receive`): pairing the halves.

Wired into the migration controller by decentral_io.py (between namespaces of one
cluster, or with another cluster through the synchronization endpoint). This module is the seam
of docs/migration.md: the receiving side's target pod is rendered from the receiving VMI,
and the handlers run their usual migration between the two VMIs:

    sending VMIM (namespace A, spec.sendTo.migrationID X)
        └─ MigrationPeer.offer(SourceHalf) → Pairing
              WAITING  no receiving half yet, or its target not published yet
              READY    the target half: receiving VMI, its target pod, node, address, ports
              REFUSED  two receivers for X, or the receiver is the source VMI itself,
                       or the receiving VMI already ended or runs a guest
        └─ source_state(...) → the source VMI's migrationState: the handlers' usual path
    MigrationPeer.report(X, outcome) when the sending side is final.

In one cluster the peer is answered in process (`InProcessPeer`) from the controller's VMIM
cache, indexed by migrationID (`receive_index`); between clusters the same messages
(shared/wire/sync.py) go to the receiving controller's synchronization endpoint at
`connectURL` (sync_client.RemotePeer → sync_server.SyncServer → decentral_remote.SyncDesk,
which answers with `pair` from its own caches).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from shared.model import (
    MigrationSideState,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIPhase,
)
from shared.volumemigration import claim_volumes
from shared.wire.sync import Pairing, PairingState, PeerOutcome, SourceHalf, TargetHalf

__all__ = ["Pairing", "PairingState", "PeerOutcome", "SourceHalf", "TargetHalf"]

Migration = VirtualMachineInstanceMigration
log = structlog.get_logger("controller.migration.decentral")


class MigrationPeer(Protocol):
    """The receiving side, as the sending side's controller sees it."""

    async def offer(self, source: SourceHalf) -> Pairing:
        """Pair `source` with the receiving half of the same migrationID."""
        ...

    async def report(self, migration_id: str, outcome: PeerOutcome, *, reason: str = "") -> None:
        """Tell the receiving side how the sending side ended."""
        ...


def receive_index(m: Migration) -> list[str]:
    """Informer index function: a receiving VMIM's migrationID (none for other VMIMs)."""
    receive = m.spec.receive
    return [receive.migration_id] if receive is not None and receive.migration_id else []


def target_half(receiver: Migration, vmi: VirtualMachineInstance | None) -> TargetHalf | None:
    """The receiving half once its VMI's migrationState (for this VMIM) names the target
    pod, node and the target handler's address; None before."""
    receive = receiver.spec.receive
    state = vmi.status.migration_state if vmi is not None else None
    if receive is None or not receive.migration_id or state is None:
        return None
    if state.migration_uid != receiver.uid:
        return None
    if not (state.target_pod and state.target_node and state.target_node_address):
        return None
    return TargetHalf(
        migration_uid=receiver.uid,
        migration_id=receive.migration_id,
        namespace=receiver.namespace,
        vmim_name=receiver.metadata.name or "",
        vmi_name=receiver.spec.vmi_name or "",
        target_node=state.target_node,
        target_pod=state.target_pod,
        target_node_address=state.target_node_address,
        ports=dict(state.target_direct_migration_node_ports),
    )


def _live(m: Migration) -> bool:
    return not m.is_final() and not m.metadata.is_deleting


def _receiving_vmi_problem(vmi: VirtualMachineInstance) -> str | None:
    """Why `vmi` cannot receive a guest (None: it can)."""
    if vmi.is_final() or vmi.metadata.is_deleting:
        return f"receiving VMI {vmi.key} has ended or is being deleted"
    if vmi.status.phase_or_unset == VMIPhase.RUNNING:
        return f"receiving VMI {vmi.key} already runs a guest"
    return None


def _claims_differ(source: SourceHalf, vmi: VirtualMachineInstance) -> str | None:
    """Each claim volume of the source is copied into the receiving VMI's claim of the
    same name: both VMIs must have the same claim volumes (None: they do)."""
    ours, theirs = set(source.claim_volumes), claim_volumes(vmi)
    if ours == theirs:
        return None
    return (
        f"the claim volumes of {source.vmi_key} ({', '.join(sorted(ours)) or 'none'}) and "
        f"of receiving VMI {vmi.key} ({', '.join(sorted(theirs)) or 'none'}) differ: each "
        "claim is copied into the receiving VMI's claim of the same volume name"
    )


def _one_receiver(
    source: SourceHalf, receivers: Sequence[Migration], *, remote: bool
) -> Migration | Pairing:
    """The one live receiving VMIM of the source's migrationID, or why there is none (a
    source of another cluster may have the same namespace and name as its receiver)."""
    mid = source.migration_id
    live = [m for m in receivers if _live(m) and receive_index(m) == [mid]]
    if not live:
        return Pairing(state=PairingState.WAITING, reason=f"no receiving VMIM for {mid} yet")
    if len(live) > 1:
        names = ", ".join(sorted(m.key for m in live))
        return Pairing(state=PairingState.REFUSED, reason=f"{mid} has two receivers: {names}")
    key = f"{live[0].namespace}/{live[0].spec.vmi_name or ''}"
    if key == source.vmi_key and not remote:
        return Pairing(state=PairingState.REFUSED, reason=f"{mid}: {key} would receive itself")
    return live[0]


def pair(
    source: SourceHalf,
    *,
    receivers: Sequence[Migration],
    vmis: Callable[[str], VirtualMachineInstance | None],
    remote: bool = False,
) -> Pairing:
    """Pair `source` with the one live receiving VMIM of its migrationID, if ready;
    `remote`: the source is another cluster's (offered through the sync endpoint)."""
    receiver = _one_receiver(source, receivers, remote=remote)
    if isinstance(receiver, Pairing):
        return receiver
    key = f"{receiver.namespace}/{receiver.spec.vmi_name or ''}"
    vmi = vmis(key)
    if vmi is None:
        return Pairing(state=PairingState.WAITING, reason=f"receiving VMI {key} does not exist")
    if (problem := _receiving_vmi_problem(vmi) or _claims_differ(source, vmi)) is not None:
        return Pairing(state=PairingState.REFUSED, reason=problem)
    target = target_half(receiver, vmi)
    if target is None:
        return Pairing(state=PairingState.WAITING, reason=f"receiving side {key} not ready yet")
    return Pairing(state=PairingState.READY, target=target)


def source_state(source: SourceHalf, target: TargetHalf, *, migration_uid: str) -> MigrationState:
    """The sending VMI's migrationState: the handlers' usual migration, its target being
    the receiving side's pod, node and proxy ports."""
    return MigrationState(
        migration_uid=migration_uid,
        source_node=source.source_node,
        source_pod=source.source_pod,
        target_node=target.target_node,
        target_pod=target.target_pod,
        target_node_address=target.target_node_address,
        target_direct_migration_node_ports=dict(target.ports),
        source_state=MigrationSideState(
            virtual_machine_instance_uid=source.vmi_uid,
            domain_name=source.vmi_name,
            domain_namespace=source.namespace,
        ),
        target_state=MigrationSideState(
            migration_uid=target.migration_uid or None,
            domain_name=target.vmi_name,
            domain_namespace=target.namespace,
        ),
    )


class InProcessPeer:
    """The peer in one cluster: answered from the controller's own VMIM and VMI caches.
    The sending side's end needs no message here: it is the sending VMIM's own phase, in
    the same cache (`outcomes` reads it), so a controller restart loses nothing."""

    def __init__(
        self,
        *,
        receivers: Callable[[str], Sequence[Migration]],
        vmis: Callable[[str], VirtualMachineInstance | None],
        outcomes: Callable[[str], tuple[PeerOutcome, str] | None],
    ) -> None:
        self._receivers = receivers
        self._vmis = vmis
        self._outcomes = outcomes

    async def offer(self, source: SourceHalf) -> Pairing:
        """Pair from the caches (no I/O)."""
        return pair(source, receivers=self._receivers(source.migration_id), vmis=self._vmis)

    async def report(self, migration_id: str, outcome: PeerOutcome, *, reason: str = "") -> None:
        """Nothing to send: the sending VMIM's phase is the record."""
        log.info("decentral_sender_ended", migration_id=migration_id, outcome=str(outcome),
                 reason=reason)  # fmt: skip

    def outcome(self, migration_id: str) -> tuple[PeerOutcome, str] | None:
        """The sending side's end, once it ended."""
        return self._outcomes(migration_id)
