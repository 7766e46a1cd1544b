"""The sending VMIM's plan (controller/migration/decentral_send.py): offer,
handoff to the source handler with the receiving side's target, report the end."""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.migration.decentral import Pairing, PairingState, PeerOutcome, TargetHalf
from controller.migration.decentral_send import SenderPlan, plan_sender, source_half
from shared.model import (
    MigrationPhase,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIPhase,
)
from tests.unit.controller.builders import NOW, condition, make_vmi, vmi_dict

SEND_UID = "send-mig-uid"
P = MigrationPhase
TARGET = TargetHalf(
    migration_id="mig-1",
    namespace="ns-b",
    vmim_name="recv",
    vmi_name="vm1",
    target_node="node02",
    target_pod="virt-launcher-vm1-bbbbb",
    target_node_address="10.0.0.2",
    ports={"40001": 0},
)
READY = Pairing(state=PairingState.READY, target=TARGET)


def sender(phase: str | None = None) -> VirtualMachineInstanceMigration:
    body: dict[str, Any] = {
        "metadata": {"name": "send", "namespace": "ns", "uid": SEND_UID},
        "spec": {"vmiName": "vm1", "sendTo": {"migrationID": "mig-1", "connectURL": "h:9185"}},
    }
    if phase:
        body["status"] = {"phase": phase}
    return VirtualMachineInstanceMigration.from_dict(body)


def running(state: MigrationState | None = None, **kw: Any) -> VirtualMachineInstance:
    base: dict[str, Any] = {
        "phase": VMIPhase.RUNNING,
        "node": "node01",
        "conditions": (condition("LiveMigratable"),),
        "migration_state": state,
    }
    return make_vmi(**{**base, **kw})


def plan(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance | None,
    offer: Pairing | None = None,
    pod: str | None = "virt-launcher-vm1-aaaaa",
) -> SenderPlan:
    return plan_sender(m, vmi, offer=offer, source_pod=pod, now=NOW)


def test_waits_synchronizing_until_the_receiver_is_ready() -> None:
    """No answer or a WAITING answer keeps the VMIM in KubeVirt's Synchronizing phase,
    requeued; nothing written to the VMI."""
    waiting = Pairing(state=PairingState.WAITING, reason="no receiving VMIM for mig-1 yet")
    for offer in (None, waiting):
        for m in (sender(), sender("Synchronizing")):
            got = plan(m, running(), offer)
            assert got.plan.status.phase == P.SYNCHRONIZING and got.plan.vmi_state is None
            assert got.plan.requeue_after and got.report is None
            assert got.plan.finalizer


def test_paired_but_vmi_not_ready_waits_pending() -> None:
    """Paired while the VMI is not running (or its LiveMigratable condition is not in
    yet): Synchronizing gives way to Pending, and nothing is handed off."""
    for vmi in (running(phase=VMIPhase.SCHEDULED), running(conditions=())):
        got = plan(sender("Synchronizing"), vmi, READY)
        assert got.plan.status.phase == P.PENDING and got.plan.vmi_state is None
        assert got.plan.requeue_after and got.report is None


def test_the_phases_are_recorded_in_kubevirts_order() -> None:
    """Handed off at the first sync: phaseTransitionTimestamps list Synchronizing, Pending,
    Scheduling, Scheduled, PreparingTarget, TargetReady, in that order."""
    got = plan(sender(), running(), READY)
    seen = [t.phase for t in got.plan.status.phase_transition_timestamps]
    assert seen == [P.SYNCHRONIZING, P.PENDING, P.SCHEDULING, P.SCHEDULED,
                    P.PREPARING_TARGET, P.TARGET_READY]  # fmt: skip


def test_ready_pairing_hands_the_target_to_the_source_handler() -> None:
    """READY: the source VMI's migrationState names the receiving target (TargetReady)."""
    got = plan(sender(), running(), READY)
    assert got.plan.status.phase == P.TARGET_READY
    state = got.plan.vmi_state
    assert state is not None and state.migration_uid == SEND_UID
    assert (state.source_node, state.source_pod) == ("node01", "virt-launcher-vm1-aaaaa")
    assert (state.target_pod, state.target_node_address) == ("virt-launcher-vm1-bbbbb", "10.0.0.2")


def test_refusals_fail_and_are_reported() -> None:
    """A REFUSED pairing, a non-migratable VMI, a missing VMI or source pod: Failed, the
    reason reported to the peer."""
    refused = Pairing(state=PairingState.REFUSED, reason="mig-1 has two receivers: a, b")
    got = plan(sender(), running(), refused)
    assert got.plan.status.phase == P.FAILED
    assert got.report == (PeerOutcome.FAILED, "mig-1 has two receivers: a, b")
    stuck = running(conditions=(condition("LiveMigratable", status="False", message="hostDisk"),))
    assert plan(sender(), stuck, READY).report == (
        PeerOutcome.FAILED,
        "VMI ns/vm1 is not live-migratable: hostDisk",
    )
    assert plan(sender(), None, READY).plan.status.phase == P.FAILED
    no_pod = plan(sender(), running(), READY, pod=None)
    assert no_pod.report == (PeerOutcome.FAILED, "the VMI's source pod is gone")


def test_claims_not_shared_do_not_block_the_sending() -> None:
    """LiveMigratable False for a claim that is not shared (DisksNotLiveMigratable): the
    decentralized migration copies it, so the VMI is handed off; with a persistent-state
    claim (not copied) the same reason still fails the VMIM."""
    rwo = condition(
        "LiveMigratable",
        status="False",
        reason="DisksNotLiveMigratable",
        message="cannot migrate VMI: PVC c is not shared (ReadWriteOnce)",
    )
    handed = plan(sender(), running(conditions=(rwo,)), READY)
    assert handed.plan.vmi_state is not None and handed.plan.status.phase == P.TARGET_READY
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["tpm"] = {"persistent": True}
    stateful = make_vmi(raw=raw, phase=VMIPhase.RUNNING, node="node01", conditions=(rwo,))
    got = plan(sender(), stateful, READY)
    assert got.plan.status.phase == P.FAILED and got.report is not None
    assert "is not live-migratable: cannot migrate VMI: PVC c" in got.report[1]


def test_follows_the_source_handler_to_success_and_ends_the_source() -> None:
    """Started → Running; completed → Succeeded, reported, the source VMI migrated away."""
    state = MigrationState(migration_uid=SEND_UID, start_timestamp="t", source_node="node01")
    started = plan(sender("TargetReady"), running(state))
    assert started.plan.status.phase == P.RUNNING and not started.source_done
    done_state = MigrationState(migration_uid=SEND_UID, start_timestamp="t", completed=True)
    done = plan(sender("Running"), running(done_state))
    assert done.plan.status.phase == P.SUCCEEDED and done.source_done
    assert done.report == (PeerOutcome.SUCCEEDED, "") and done.plan.finalizer is False


def test_handler_failure_fails_and_final_is_left_alone() -> None:
    """The source handler's failure is Failed and reported; a final VMIM only lets go."""
    failed = MigrationState(migration_uid=SEND_UID, failed=True, failure_reason="proxy: refused")
    got = plan(sender("Running"), running(failed))
    assert got.plan.status.phase == P.FAILED
    assert got.report == (PeerOutcome.FAILED, "proxy: refused")
    final = plan(sender("Succeeded"), running())
    assert final.plan.finalizer is False and final.report is None


def test_claims_are_sent_host_disks_and_memory_dumps_refused_naming_them() -> None:
    """A source VMI with claim and DataVolume volumes is sent (they are copied into the
    receiving VMI's claims, its half naming them); one with a hostDisk or a memory dump is not: the sending VMIM
    fails at once naming those volumes, before any handoff; the guest stays."""
    raw = vmi_dict()
    raw["spec"]["volumes"] = [
        {"name": "root", "containerDisk": {"image": "x"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
        {"name": "dv", "dataVolume": {"name": "d"}},
    ]
    claims = make_vmi(raw=raw, phase=VMIPhase.RUNNING, node="node01")
    waiting = plan_sender(sender(), claims, offer=None, source_pod="src", now=NOW)
    assert waiting.plan.status.phase is MigrationPhase.SYNCHRONIZING
    half = source_half(sender(), claims, "src")  # offered: the receiver must have them too
    assert half is not None and half.claim_volumes == ("data", "dv")
    raw["spec"]["volumes"] += [
        {"name": "host", "hostDisk": {"path": "/d.img", "type": "Disk"}},
        {"name": "dump", "memoryDump": {"claimName": "m", "hotpluggable": True}},
    ]
    vmi = make_vmi(raw=raw, phase=VMIPhase.RUNNING, node="node01")
    planned = plan_sender(sender(), vmi, offer=None, source_pod="src", now=NOW)
    assert planned.plan.status.phase is MigrationPhase.FAILED
    state = planned.plan.status.migration_state
    assert state is not None and state.failure_reason is not None
    assert "volumes (host, dump) is not supported by kubevirt-py" in state.failure_reason
    assert planned.plan.vmi_state is None


def deleted(m: VirtualMachineInstanceMigration) -> VirtualMachineInstanceMigration:
    meta = dataclasses.replace(m.metadata, deletion_timestamp="2025-01-02T03:04:00Z")
    return dataclasses.replace(m, metadata=meta)


def test_deleting_the_sender_cancels_it() -> None:
    """Deleted before the handoff: Failed, finalizer released. After it: the source
    handler is asked to abort (abortRequested on the VMI), the finalizer kept until the
    handler settles; then it fails as the handler reported."""
    before = plan(deleted(sender("Pending")), running())
    assert before.plan.status.phase is MigrationPhase.FAILED and before.plan.finalizer is False
    handed = MigrationState(migration_uid=SEND_UID, source_node="node01", target_node="node02")
    during = plan(deleted(sender("Running")), running(handed))
    assert during.plan.vmi_state is not None and during.plan.vmi_state.abort_requested
    assert during.plan.finalizer is True
    aborted = dataclasses.replace(handed, abort_requested=True, failed=True, failure_reason="x")
    after = plan(deleted(sender("Running")), running(aborted))
    assert after.plan.status.phase is MigrationPhase.FAILED and after.plan.finalizer is False
