"""Decentralized live migration's pairing (controller/migration/decentral.py):
a sending half meets the one live receiving VMIM of its migrationID once the receiving
side's target is published; the source VMI's migrationState points at that target."""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.migration.decentral import (
    InProcessPeer,
    PairingState,
    PeerOutcome,
    SourceHalf,
    pair,
    receive_index,
    source_state,
    target_half,
)
from shared.model import (
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIPhase,
)
from tests.unit.controller.builders import make_vmi, vmi_dict

RECV_UID = "recv-mig-uid"
SOURCE = SourceHalf(
    migration_id="mig-1",
    namespace="ns-a",
    vmim_name="send",
    vmi_name="vm1",
    vmi_uid="src-uid",
    source_node="node01",
    source_pod="virt-launcher-vm1-aaaaa",
)
PUBLISHED = MigrationState(
    migration_uid=RECV_UID,
    target_node="node02",
    target_pod="virt-launcher-vm1-bbbbb",
    target_node_address="10.0.0.2",
    target_direct_migration_node_ports={"40001": 0, "40002": 49152},
)


def vmim(
    *, name: str = "recv", namespace: str = "ns-b", uid: str = RECV_UID, **spec: Any
) -> VirtualMachineInstanceMigration:
    meta = {"name": name, "namespace": namespace, "uid": uid}
    fields: dict[str, Any] = {"vmiName": "vm1", "receive": {"migrationID": "mig-1"}, **spec}
    body = {"metadata": meta, "spec": fields}
    return VirtualMachineInstanceMigration.from_dict(body)


def receiving_vmi(
    *, namespace: str = "ns-b", phase: VMIPhase | None = None, state: MigrationState | None = None
) -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["metadata"]["namespace"] = namespace
    return make_vmi(raw=raw, uid="recv-vmi-uid", phase=phase, migration_state=state)


def nothing(key: str) -> VirtualMachineInstance | None:
    """No VMI exists."""
    return None


def lookup(*vmis: VirtualMachineInstance) -> dict[str, VirtualMachineInstance]:
    return {v.key: v for v in vmis}


def test_ready_pairing_carries_the_published_target() -> None:
    """A receiver whose VMI published target pod, node, address and ports pairs READY."""
    vmis = lookup(receiving_vmi(state=PUBLISHED))
    p = pair(SOURCE, receivers=[vmim()], vmis=vmis.get)
    assert p.state == PairingState.READY
    assert p.target is not None
    assert p.target.vmi_key == "ns-b/vm1"
    assert (p.target.target_pod, p.target.target_node) == ("virt-launcher-vm1-bbbbb", "node02")
    assert p.target.ports == {"40001": 0, "40002": 49152}


def test_waits_without_receiver_vmi_or_published_target() -> None:
    """No receiver, no receiving VMI, or a target not published yet: WAITING, saying which."""
    no_recv = pair(SOURCE, receivers=[], vmis=nothing)
    assert (no_recv.state, no_recv.reason) == (
        PairingState.WAITING,
        "no receiving VMIM for mig-1 yet",
    )
    no_vmi = pair(SOURCE, receivers=[vmim()], vmis=nothing)
    assert no_vmi.state == PairingState.WAITING and "does not exist" in no_vmi.reason
    half = dataclasses.replace(PUBLISHED, target_node_address=None)
    early = pair(SOURCE, receivers=[vmim()], vmis=lookup(receiving_vmi(state=half)).get)
    assert early.state == PairingState.WAITING and "not ready" in early.reason


def test_another_migrations_state_is_not_a_target() -> None:
    """The receiving VMI's migrationState of another VMIM uid is not this pairing's target."""
    other = dataclasses.replace(PUBLISHED, migration_uid="someone-else")
    assert target_half(vmim(), receiving_vmi(state=other)) is None


def test_refuses_two_receivers_self_and_unfit_receiving_vmi() -> None:
    """Two live receivers, the source VMI as its own receiver, or a receiving VMI that ended
    or runs a guest: REFUSED with the reason."""
    vmis = lookup(receiving_vmi(state=PUBLISHED))
    two = pair(SOURCE, receivers=[vmim(), vmim(name="r2", uid="u2")], vmis=vmis.get)
    assert two.state == PairingState.REFUSED
    assert two.reason == "mig-1 has two receivers: ns-b/r2, ns-b/recv"
    itself = pair(SOURCE, receivers=[vmim(namespace="ns-a")], vmis=nothing)
    assert itself.state == PairingState.REFUSED and "would receive itself" in itself.reason
    for phase, words in ((VMIPhase.FAILED, "has ended"), (VMIPhase.RUNNING, "runs a guest")):
        unfit = lookup(receiving_vmi(phase=phase, state=PUBLISHED))
        got = pair(SOURCE, receivers=[vmim()], vmis=unfit.get)
        assert got.state == PairingState.REFUSED and words in got.reason


def test_claim_volumes_pair_only_with_the_same_claim_volumes() -> None:
    """Each source claim is copied into the receiving VMI's claim of the same volume
    name: a receiving VMI with the same claim volumes pairs READY; one lacking `data` (or
    having claims the source lacks) is REFUSED naming both sides' claim volumes."""
    source = dataclasses.replace(SOURCE, claim_volumes=("data",))
    raw = vmi_dict()
    raw["metadata"]["namespace"] = "ns-b"
    raw["spec"]["volumes"] = [{"name": "data", "dataVolume": {"name": "blank"}}]
    same = make_vmi(raw=raw, uid="recv-vmi-uid", migration_state=PUBLISHED)
    assert pair(source, receivers=[vmim()], vmis=lookup(same).get).state == PairingState.READY
    bare = pair(source, receivers=[vmim()], vmis=lookup(receiving_vmi(state=PUBLISHED)).get)
    assert bare.state == PairingState.REFUSED
    assert bare.reason.startswith(
        "the claim volumes of ns-a/vm1 (data) and of receiving VMI ns-b/vm1 (none) differ"
    )
    extra = pair(SOURCE, receivers=[vmim()], vmis=lookup(same).get)
    assert extra.state == PairingState.REFUSED and "(none) and of receiving" in extra.reason


def test_final_receivers_and_other_ids_are_ignored() -> None:
    """A final receiving VMIM or one for another migrationID does not pair."""
    done = VirtualMachineInstanceMigration.from_dict(
        {**vmim().to_dict(), "status": {"phase": "Failed"}}
    )
    other = vmim(receive={"migrationID": "mig-2"})
    got = pair(SOURCE, receivers=[done, other], vmis=lookup(receiving_vmi(state=PUBLISHED)).get)
    assert got.state == PairingState.WAITING


def test_receive_index_names_only_receiving_halves() -> None:
    """The informer index lists a receiving VMIM's migrationID and nothing for others."""
    assert receive_index(vmim()) == ["mig-1"]
    sender = vmim(receive=None, sendTo={"migrationID": "mig-1", "connectURL": "h:1"})
    assert receive_index(sender) == []


def test_source_state_points_the_handlers_at_the_receiving_target() -> None:
    """The sending VMI's migrationState: its own node and pod, the receiver's target."""
    target = target_half(vmim(), receiving_vmi(state=PUBLISHED))
    assert target is not None
    state = source_state(SOURCE, target, migration_uid="send-uid")
    assert state.migration_uid == "send-uid"
    assert (state.source_node, state.source_pod) == ("node01", "virt-launcher-vm1-aaaaa")
    assert (state.target_node, state.target_node_address) == ("node02", "10.0.0.2")
    assert state.target_direct_migration_node_ports == {"40001": 0, "40002": 49152}


async def test_in_process_peer_pairs_from_caches_and_reads_outcomes() -> None:
    """InProcessPeer answers offers from its lookups; the sending side's end is read
    from the cache (the sending VMIM's phase), a report stores nothing."""
    vmis = lookup(receiving_vmi(state=PUBLISHED))
    ended: dict[str, tuple[PeerOutcome, str]] = {}
    peer = InProcessPeer(
        receivers=lambda mid: [vmim()] if mid == "mig-1" else [],
        vmis=vmis.get,
        outcomes=ended.get,
    )
    assert (await peer.offer(SOURCE)).state == PairingState.READY
    await peer.report("mig-1", PeerOutcome.FAILED, reason="target gone")
    assert peer.outcome("mig-1") is None
    ended["mig-1"] = (PeerOutcome.FAILED, "target gone")
    assert peer.outcome("mig-1") == (PeerOutcome.FAILED, "target gone")
