"""The VMI controller's side of a decentralized migration (controller/vmi/receiver.py):
the receiving VMI waits with no launcher pod and runs once taken over; the sending VMI
whose guest went to the other VMI ends Succeeded."""

from __future__ import annotations

import dataclasses

from controller.vmi.logic import plan_vmi
from shared.labels import NODE_NAME_LABEL, RECEIVER_ANNOTATION
from shared.model import (
    MigrationSideState,
    MigrationState,
    VirtualMachineInstance,
    VMIConditionType,
    VMIPhase,
)
from tests.unit.controller.builders import NOW, make_pod, make_vmi, vmi_dict

TIMEOUT = 300.0


def receiving(phase: VMIPhase | None = None, node: str | None = None) -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["metadata"]["annotations"] = {RECEIVER_ANNOTATION: "true"}
    return make_vmi(raw=raw, phase=phase, node=node)


def target_pod() -> object:
    return make_pod(uid="tgt", node="node02", phase="Running", migration_uid="recv-mig")


def test_a_receiving_vmi_waits_for_sync_without_a_launcher_pod() -> None:
    """A new receiving VMI goes to WaitingForSync; no launcher pod is created for it."""
    plan = plan_vmi(receiving(), [], now=NOW, unschedulable_timeout=TIMEOUT)
    assert plan.status.phase is VMIPhase.WAITING_FOR_SYNC
    assert not plan.create_pod and plan.finalizer is True


def test_the_target_pod_becomes_the_receiving_vmis_active_pod() -> None:
    """The receiving VMIM's target pod is listed in activePods (the target handler finds
    its launcher by it), the VMI still waiting and with no node label."""
    vmi = receiving(VMIPhase.WAITING_FOR_SYNC)
    plan = plan_vmi(vmi, [make_pod(uid="tgt", node="node02", phase="Running",
                                   migration_uid="recv-mig")],
                    now=NOW, unschedulable_timeout=TIMEOUT)  # fmt: skip
    assert dict(plan.status.active_pods) == {"tgt": "node02"}
    assert plan.status.phase is VMIPhase.WAITING_FOR_SYNC
    assert not plan.create_pod and NODE_NAME_LABEL not in plan.labels


def test_a_taken_over_receiving_vmi_runs_on_the_target_node() -> None:
    """Once the target handler wrote nodeName, the VMI is Running there with its node
    label (that node's handler then reconciles it)."""
    vmi = receiving(VMIPhase.WAITING_FOR_SYNC, node="node02")
    pods = [make_pod(uid="tgt", node="node02", phase="Running", migration_uid="recv-mig")]
    plan = plan_vmi(vmi, pods, now=NOW, unschedulable_timeout=TIMEOUT)
    assert plan.status.phase is VMIPhase.RUNNING
    assert plan.labels == {NODE_NAME_LABEL: "node02"}


def sender(target: MigrationSideState | None) -> VirtualMachineInstance:
    state = MigrationState(
        migration_uid="send-mig",
        source_node="node01",
        target_node="node02",
        completed=True,
        target_state=target,
    )
    return make_vmi(phase=VMIPhase.RUNNING, node="node01", migration_state=state)


def test_a_sending_vmi_whose_guest_left_ends_succeeded() -> None:
    """The source VMI of a completed decentralized migration (targetState names another
    VMI) is Succeeded: not failed as a dead launcher, not moved to the target node."""
    vmi = sender(MigrationSideState(domain_name="vm1", domain_namespace="ns-b"))
    pods = [make_pod(uid="src", node="node01", phase="Running")]
    plan = plan_vmi(vmi, pods, now=NOW, unschedulable_timeout=TIMEOUT)
    assert plan.status.phase is VMIPhase.SUCCEEDED


def test_a_usual_completed_migration_is_not_an_end() -> None:
    """A completed migration of the VMI itself (no targetState, or naming this VMI)
    keeps the VMI alive."""
    for target in (None, MigrationSideState(domain_name="vm1", domain_namespace="ns")):
        vmi = sender(target)
        pods = [make_pod(uid="tgt", node="node02", phase="Running", migration_uid="send-mig")]
        plan = plan_vmi(vmi, pods, now=NOW, unschedulable_timeout=TIMEOUT)
        assert plan.status.phase is VMIPhase.RUNNING, target


def test_an_unmarked_vmi_is_not_a_receiver() -> None:
    """Without the annotation a new VMI gets its launcher pod as usual."""
    vmi = make_vmi()
    plan = plan_vmi(vmi, [], now=NOW, unschedulable_timeout=TIMEOUT)
    assert plan.create_pod
    assert dataclasses.replace(plan.status).phase is not VMIPhase.WAITING_FOR_SYNC


def test_a_failed_migration_leaves_the_receiving_vmi_waiting() -> None:
    """The receiving VMIM wrote a failed (and completed) migrationState, its target pod
    gone: the VMI stays WaitingForSync, as KubeVirt's, with no launcher pod of its own,
    no activePods, nodeName or reason, its migrationState kept (a new VMIM pair may
    retry)."""
    raw = vmi_dict()
    raw["metadata"]["annotations"] = {RECEIVER_ANNOTATION: "true"}
    state = MigrationState(
        migration_uid="recv-mig", failed=True, completed=True, failure_reason="boom"
    )
    vmi = make_vmi(raw=raw, phase=VMIPhase.WAITING_FOR_SYNC, migration_state=state)
    vmi = dataclasses.replace(
        vmi, status=dataclasses.replace(vmi.status, active_pods={"gone-uid": "node-b"})
    )
    plan = plan_vmi(vmi, [], now=NOW, unschedulable_timeout=TIMEOUT)
    assert plan.status.phase is VMIPhase.WAITING_FOR_SYNC
    assert not plan.create_pod and not plan.labels
    assert dict(plan.status.active_pods) == {}
    assert plan.status.reason is None and plan.status.node_name is None
    assert plan.status.migration_state == state
    assert plan.status.condition(VMIConditionType.SYNCHRONIZED) is None
