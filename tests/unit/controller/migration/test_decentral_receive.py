"""The receiving VMIM's plan (controller/migration/decentral_receive.py):
target pod from the receiving VMI, handoff to its handler, then the sending side's end."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from controller.migration.decentral import PairingState, PeerOutcome, SourceHalf, pair
from controller.migration.decentral_receive import (
    ReceiverInputs,
    plan_receiver,
    with_vmi_blocked,
)
from shared.labels import RECEIVER_ANNOTATION
from shared.launcherpod import LauncherPod
from shared.model import (
    MigrationPhase,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIPhase,
)
from tests.unit.controller.builders import NOW, make_pod, make_vmi, vmi_dict

LATER = NOW + timedelta(minutes=1)

RECV_UID = "recv-mig-uid"
P = MigrationPhase


def receiver(phase: str | None = None) -> VirtualMachineInstanceMigration:
    body: dict[str, Any] = {
        "metadata": {"name": "recv", "namespace": "ns-b", "uid": RECV_UID},
        "spec": {"vmiName": "vm1", "receive": {"migrationID": "mig-1"}},
    }
    if phase:
        body["status"] = {"phase": phase}
    return VirtualMachineInstanceMigration.from_dict(body)


def waiting_vmi(
    *, phase: VMIPhase | None = None, state: MigrationState | None = None
) -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["metadata"]["namespace"] = "ns-b"
    raw["metadata"]["annotations"] = {RECEIVER_ANNOTATION: "true"}
    return make_vmi(raw=raw, uid="recv-vmi-uid", phase=phase, migration_state=state)


def target_pod(phase: str = "Running") -> LauncherPod:
    return make_pod(
        uid="tgt",
        name="virt-launcher-vm1-bbbbb",
        node="node02",
        phase=phase,
        migration_uid=RECV_UID,
    )


def inputs(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance | None,
    pods: list[LauncherPod] | None = None,
    outcome: tuple[PeerOutcome, str] | None = None,
    *,
    synchronized: bool = True,
) -> ReceiverInputs:
    return ReceiverInputs(
        migration=m,
        vmi=vmi,
        pods=pods or [],
        now=NOW,
        outcome=outcome,
        synchronized=synchronized,
    )


def test_waits_for_sync_until_the_sending_side_is_there() -> None:
    """No live sending half yet: the receiving VMIM sits in KubeVirt's WaitingForSync
    phase, requeued, with no target pod; once it is there, WaitingForSync gives way to
    Pending and the target pod is created (Scheduling)."""
    for m in (receiver(), receiver("WaitingForSync")):
        wait = plan_receiver(inputs(m, waiting_vmi(), synchronized=False))
        assert wait.status.phase == P.WAITING_FOR_SYNC and not wait.create_target_pod
        assert wait.requeue_after and wait.finalizer and wait.vmi_state is None
    go = plan_receiver(inputs(receiver("WaitingForSync"), waiting_vmi()))
    assert go.create_target_pod and go.status.phase == P.SCHEDULING
    seen = [t.phase for t in go.status.phase_transition_timestamps]
    assert seen == [P.PENDING, P.SCHEDULING]
    first = plan_receiver(inputs(receiver(), waiting_vmi()))
    seen = [t.phase for t in first.status.phase_transition_timestamps]
    assert seen == [P.WAITING_FOR_SYNC, P.PENDING, P.SCHEDULING]


def test_a_failed_sender_fails_a_receiver_still_waiting_for_sync() -> None:
    """The sending side failed before it synchronized: the receiving VMIM fails from
    WaitingForSync (not retried), its VMI told."""
    got = plan_receiver(
        inputs(
            receiver("WaitingForSync"),
            waiting_vmi(),
            [],
            (PeerOutcome.FAILED, "gone"),
            synchronized=False,
        )
    )
    assert got.status.phase == P.FAILED and got.vmi_state is not None and got.vmi_state.failed


def test_waiting_vmi_gets_a_target_pod() -> None:
    """A new receiving VMIM whose VMI waits creates its target pod (Scheduling)."""
    plan = plan_receiver(inputs(receiver(), waiting_vmi()))
    assert plan.create_target_pod and plan.status.phase == P.SCHEDULING


def test_refuses_missing_or_running_receiving_vmi() -> None:
    """No receiving VMI, or one that already runs a guest: Failed, saying which."""
    gone = plan_receiver(inputs(receiver(), None))
    assert gone.status.phase == P.FAILED
    assert gone.status.migration_state is not None
    assert "ns-b/vm1 does not exist" in (gone.status.migration_state.failure_reason or "")
    busy = plan_receiver(inputs(receiver(), waiting_vmi(phase=VMIPhase.RUNNING)))
    assert busy.status.phase == P.FAILED and not busy.create_target_pod


def test_running_target_pod_is_handed_to_the_handler() -> None:
    """The target pod runs: the receiving VMI's migrationState names it (PreparingTarget)."""
    plan = plan_receiver(inputs(receiver("Scheduling"), waiting_vmi(), [target_pod()]))
    assert plan.status.phase == P.PREPARING_TARGET
    assert plan.vmi_state is not None
    assert (plan.vmi_state.target_pod, plan.vmi_state.target_node) == (
        "virt-launcher-vm1-bbbbb",
        "node02",
    )
    assert plan.vmi_state.migration_uid == RECV_UID


def test_published_target_then_sender_success_ends_succeeded() -> None:
    """TargetReady once the handler published its address; on the sending side's success
    Running with completed written for the target handler; Succeeded (finalizer released)
    once the receiving VMI's nodeName is the target node."""
    state = MigrationState(
        migration_uid=RECV_UID,
        target_node="node02",
        target_pod="virt-launcher-vm1-bbbbb",
        target_node_address="10.0.0.2",
    )
    m = receiver("PreparingTarget")
    ready = plan_receiver(inputs(m, waiting_vmi(state=state), [target_pod()]))
    assert ready.status.phase == P.TARGET_READY and ready.finalizer
    won = (PeerOutcome.SUCCEEDED, "")
    told = plan_receiver(inputs(m, waiting_vmi(state=state), [target_pod()], won))
    assert told.status.phase == P.RUNNING and told.finalizer
    assert told.vmi_state is not None and told.vmi_state.completed
    taken = make_vmi(
        raw=waiting_vmi().to_dict(),
        uid="recv-vmi-uid",
        node="node02",
        migration_state=told.vmi_state,
    )
    done = plan_receiver(inputs(m, taken, [target_pod()], won))
    assert done.status.phase == P.SUCCEEDED and done.finalizer is False


def test_sender_failure_fails_and_deletes_the_target_pod() -> None:
    """The sending side failed: the receiving VMIM fails, its target pod goes, and the
    waiting receiving VMI is told (its migrationState failed and completed with an end
    time, as KubeVirt's: the VMI keeps waiting); a VMI already told is not written again."""
    plan = plan_receiver(
        inputs(receiver("TargetReady"), waiting_vmi(), [target_pod()], (PeerOutcome.FAILED, "x"))
    )
    assert plan.status.phase == P.FAILED
    assert [p.name for p in plan.delete_pods] == ["virt-launcher-vm1-bbbbb"]
    assert plan.status.migration_state is not None
    assert plan.status.migration_state.failure_reason == "the sending side failed: x"
    assert plan.vmi_state is not None and plan.vmi_state.failed
    assert plan.vmi_state.completed and plan.vmi_state.end_timestamp
    assert plan.status.migration_state == plan.vmi_state
    told = waiting_vmi(state=plan.vmi_state)
    again = plan_receiver(inputs(receiver("TargetReady"), told, [], (PeerOutcome.FAILED, "x")))
    assert again.vmi_state is None


def test_lost_target_pod_fails_and_final_is_left_alone() -> None:
    """A target pod lost after scheduling fails the VMIM; a final VMIM only lets go; a
    target pod not running yet keeps it Scheduling."""
    lost = plan_receiver(inputs(receiver("Scheduled"), waiting_vmi()))
    assert lost.status.phase == P.FAILED
    final = plan_receiver(inputs(receiver("Succeeded"), waiting_vmi()))
    assert final.finalizer is False and final.status == receiver("Succeeded").status
    pending = plan_receiver(inputs(receiver(), waiting_vmi(), [target_pod("Pending")]))
    assert pending.status.phase == P.SCHEDULING and not pending.create_target_pod
    assert pending.finalizer


def test_a_vmi_that_is_not_a_receiver_is_refused() -> None:
    """A receiving VMIM naming a VMI no WaitAsReceiver VM made (a usual VMI starting)
    fails at once, naming why, and no target pod is created for it."""
    raw = vmi_dict()
    raw["metadata"]["namespace"] = "ns-b"
    usual = make_vmi(raw=raw, uid="recv-vmi-uid", phase=VMIPhase.PENDING)
    out = plan_receiver(inputs(receiver(), usual))
    assert out.status.phase is P.FAILED and not out.create_target_pod
    state = out.status.migration_state
    assert state is not None and "is not a receiving VMI" in (state.failure_reason or "")


def test_deleting_the_receiver_before_the_guest_arrived_cancels_it() -> None:
    """Deleted while waiting: Failed, its target pod deleted. Deleted after the sender
    succeeded: it goes on (the guest is arriving in its target pod)."""
    m = receiver("PreparingTarget")
    meta = dataclasses.replace(m.metadata, deletion_timestamp="2025-01-02T03:04:00Z")
    gone = dataclasses.replace(m, metadata=meta)
    pods = [target_pod()]
    out = plan_receiver(inputs(gone, waiting_vmi(), pods))
    assert out.status.phase is P.FAILED and [p.uid for p in out.delete_pods] == ["tgt"]
    state = MigrationState(migration_uid=RECV_UID, target_node="node02", target_pod="t")
    arrived = plan_receiver(
        inputs(gone, waiting_vmi(state=state), pods, outcome=(PeerOutcome.SUCCEEDED, ""))
    )
    assert arrived.status.phase is not P.FAILED and not arrived.delete_pods


def test_waiting_for_sync_carries_kubevirts_blocked_condition() -> None:
    """While WaitingForSync the receiving VMIM has KubeVirt's decentralizedMigrationBlocked
    condition (True, DecentralizedNotLiveMigratable, its waiting message), kept as it is on
    the next sync (no new write); once it moves on, and when it fails, the condition goes."""
    wait = plan_receiver(inputs(receiver(), waiting_vmi(), synchronized=False))
    (cond,) = wait.status.conditions
    assert (cond.type, cond.status, cond.reason) == (
        "decentralizedMigrationBlocked",
        "True",
        "DecentralizedNotLiveMigratable",
    )
    assert cond.message == "waiting for incoming synchronization, unable to proceed"
    waiting = dataclasses.replace(receiver(), status=wait.status)
    wire = waiting.to_dict()["status"]["conditions"]
    assert wire[0]["type"] == "decentralizedMigrationBlocked"
    assert VirtualMachineInstanceMigration.from_dict(waiting.to_dict()) == waiting
    again = plan_receiver(inputs(waiting, waiting_vmi(), synchronized=False))
    assert again.status == wait.status
    go = plan_receiver(inputs(waiting, waiting_vmi()))
    assert go.status.phase == P.SCHEDULING and go.status.conditions == ()
    failed = plan_receiver(inputs(waiting, waiting_vmi(), [], (PeerOutcome.FAILED, "x")))
    assert failed.status.phase == P.FAILED and failed.status.conditions == ()


def test_the_receiving_vmi_is_blocked_while_its_vmim_waits_for_sync() -> None:
    """The plan asks for the receiving VMI's DecentralizedLiveMigrationFailure while the
    VMIM is WaitingForSync, for its removal once it moves on or fails, and leaves it
    alone for a final VMIM (a newer VMIM of the VMI decides) or without a VMI."""
    wait = plan_receiver(inputs(receiver(), waiting_vmi(), synchronized=False))
    assert wait.vmi_blocked is True
    go = plan_receiver(inputs(receiver("WaitingForSync"), waiting_vmi()))
    assert go.status.phase == P.SCHEDULING and go.vmi_blocked is False
    lost = (PeerOutcome.FAILED, "x")
    failed = plan_receiver(inputs(receiver("WaitingForSync"), waiting_vmi(), [], lost))
    assert failed.status.phase == P.FAILED and failed.vmi_blocked is False
    assert plan_receiver(inputs(receiver("Failed"), waiting_vmi())).vmi_blocked is None
    assert plan_receiver(inputs(receiver(), None)).vmi_blocked is None


def test_the_vmi_condition_is_kubevirts_and_kept_while_blocked() -> None:
    """with_vmi_blocked writes KubeVirt's condition (True, DecentralizedNotLiveMigratable,
    the waiting message, no probe time), keeps it unchanged on the next sync (its
    transition time too), and removes only it when no longer blocked."""
    vmi = waiting_vmi(phase=VMIPhase.WAITING_FOR_SYNC)
    blocked = with_vmi_blocked(vmi.status, blocked=True, now=NOW)
    cond = blocked.condition("DecentralizedLiveMigrationFailure")
    assert cond is not None and cond.is_true
    assert cond.reason == "DecentralizedNotLiveMigratable" and cond.last_probe_time is None
    assert cond.message == "waiting for incoming synchronization, unable to proceed"
    assert with_vmi_blocked(blocked, blocked=True, now=LATER) is blocked
    cleared = with_vmi_blocked(blocked, blocked=False, now=LATER)
    assert cleared.conditions == vmi.status.conditions
    assert with_vmi_blocked(vmi.status, blocked=False, now=NOW) is vmi.status


def test_a_new_vmim_pair_retries_after_a_failed_one() -> None:
    """After a failed migration the receiving VMI still waits with the old, failed
    migrationState: a new receiving VMIM pairs with a new sender, creates its target pod
    and hands it to the handler under its own UID (KubeVirt lets a new pair retry)."""
    old = MigrationState(migration_uid="old-uid", failed=True, completed=True)
    vmi = waiting_vmi(phase=VMIPhase.WAITING_FOR_SYNC, state=old)
    source = SourceHalf(migration_id="mig-1", namespace="ns-a", vmim_name="out",
                        vmi_name="src", vmi_uid="s", source_node="node01",
                        source_pod="virt-launcher-src")  # fmt: skip
    offered = pair(source, receivers=[receiver("Scheduling")], vmis=lambda _: vmi)
    assert offered.state is PairingState.WAITING, offered.reason
    start = plan_receiver(inputs(receiver("WaitingForSync"), vmi))
    assert start.create_target_pod and start.status.phase == P.SCHEDULING
    handed = plan_receiver(inputs(receiver("Scheduling"), vmi, [target_pod()]))
    assert handed.status.phase == P.PREPARING_TARGET
    assert handed.vmi_state is not None and handed.vmi_state.migration_uid == RECV_UID
    assert not handed.vmi_state.failed and not handed.vmi_state.completed
