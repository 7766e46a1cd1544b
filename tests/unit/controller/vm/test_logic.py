"""VM decisions: the run-strategy table, state-change requests, crash-loop backoff, status."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.vm.logic import Backoff, VMPlan, plan_vm
from controller.vm.vmibody import vmi_from_template
from shared.model import (
    MigrationState,
    PrintableStatus,
    VirtualMachine,
    VirtualMachineInstance,
    VMIPhase,
)
from tests.unit.controller.builders import NOW, VM_UID, VMI_UID, ago, condition, make_vm, make_vmi

BACKOFF = Backoff(base=10.0, cap=300.0)


def plan(vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> VMPlan:
    return plan_vm(vm, vmi, now=NOW, backoff=BACKOFF)


def owned(**kw: Any) -> VirtualMachineInstance:
    return make_vmi(owner_vm=True, **kw)


STATES: dict[str, VirtualMachineInstance | None] = {
    "none": None,
    "running": owned(phase=VMIPhase.RUNNING, node="n1"),
    "succeeded": owned(phase=VMIPhase.SUCCEEDED),
    "failed": owned(phase=VMIPhase.FAILED),
    "deleting": owned(phase=VMIPhase.RUNNING, deleting=True),
}

# strategy → VMI state → "create" | "delete" | "-"
TABLE = {
    "Always": {
        "none": "create",
        "running": "-",
        "succeeded": "delete",
        "failed": "delete",
        "deleting": "-",
    },
    "RerunOnFailure": {
        "none": "create",
        "running": "-",
        "succeeded": "-",
        "failed": "delete",
        "deleting": "-",
    },
    "Manual": {"none": "-", "running": "-", "succeeded": "-", "failed": "-", "deleting": "-"},
    "Halted": {
        "none": "-",
        "running": "delete",
        "succeeded": "delete",
        "failed": "delete",
        "deleting": "-",
    },
    "Once": {"none": "create", "running": "-", "succeeded": "-", "failed": "-", "deleting": "-"},
}


def action(p: VMPlan) -> str:
    if p.create_vmi:
        return "create"
    return "delete" if p.delete_vmi_uid else "-"


@pytest.mark.parametrize(
    ("strategy", "state", "expected"),
    [
        pytest.param(s, st, exp, id=f"{s}-{st}")
        for s, row in TABLE.items()
        for st, exp in row.items()
    ],
)
def test_run_strategy_table(strategy: str, state: str, expected: str) -> None:
    """Each run strategy creates or deletes the VMI as KubeVirt's does."""
    assert action(plan(make_vm(run_strategy=strategy), STATES[state])) == expected


def test_deprecated_running_flag_maps_to_always_or_halted() -> None:
    """running: true behaves as Always, false as Halted."""
    vm = make_vm(run_strategy=None)
    running = VirtualMachine.from_dict(
        {**vm.to_dict(), "spec": {**vm.to_dict()["spec"], "running": True}}
    )
    assert plan(running, None).create_vmi
    assert not plan(vm, None).create_vmi


def test_delete_carries_the_uid_precondition() -> None:
    """The VMI is deleted by UID, so a newer VMI of the same name is never hit."""
    assert plan(make_vm(run_strategy="Halted"), STATES["running"]).delete_vmi_uid == VMI_UID


def test_vmi_not_owned_is_left_alone_with_a_failure_condition() -> None:
    """A VMI of the VM's name owned by someone else: no action, Failure=True naming it."""
    stranger = make_vmi(phase=VMIPhase.RUNNING)
    p = plan(make_vm(run_strategy="Halted"), stranger)
    assert action(p) == "-"
    cond = p.status.condition("Failure")
    assert cond is not None and cond.status == "True" and "ns/vm1" in (cond.message or "")


def test_vm_being_deleted_deletes_its_vmi_and_shows_terminating() -> None:
    """A deleted VM takes its VMI along."""
    p = plan(make_vm(deleting=True), STATES["running"])
    assert action(p) == "delete"
    assert p.status.printable_status == PrintableStatus.TERMINATING


def test_restart_request_stops_then_starts() -> None:
    """[Stop{uid}, Start]: delete that VMI, wait until it is gone, create a new one."""
    requests = [{"action": "Stop", "uid": VMI_UID}, {"action": "Start"}]
    vm = make_vm(run_strategy="Manual", requests=requests)
    p = plan(vm, STATES["running"])
    assert action(p) == "delete" and len(p.status.state_change_requests) == 2
    assert p.status.printable_status == PrintableStatus.STOPPING
    p = plan(vm, STATES["deleting"])
    assert action(p) == "-" and len(p.status.state_change_requests) == 2
    p = plan(vm, None)
    assert action(p) == "create" and p.status.state_change_requests == ()


def test_stop_request_for_an_older_vmi_is_dropped() -> None:
    """Stop{uid} naming a VMI that is no longer there does not touch the current one."""
    vm = make_vm(run_strategy="Manual", requests=[{"action": "Stop", "uid": "old-uid"}])
    p = plan(vm, STATES["running"])
    assert action(p) == "-" and p.status.state_change_requests == ()


def test_start_request_on_manual_creates_and_on_final_vmi_replaces_it() -> None:
    """Start: create when absent; a final VMI is deleted first and the request kept."""
    vm = make_vm(run_strategy="Manual", requests=[{"action": "Start"}])
    assert action(plan(vm, None)) == "create"
    p = plan(vm, STATES["succeeded"])
    assert action(p) == "delete" and len(p.status.state_change_requests) == 1
    p = plan(vm, STATES["running"])
    assert action(p) == "-" and p.status.state_change_requests == ()


def test_failed_vmi_counts_a_failure_and_backs_off() -> None:
    """Always + Failed: startFailure counts it once, the VMI is deleted, recreation waits."""
    p = plan(make_vm(), STATES["failed"])
    failure = p.status.start_failure
    assert failure is not None and failure.consecutive_fail_count == 1
    assert failure.last_failed_vmi_uid == VMI_UID
    assert failure.retry_after_timestamp == "2025-01-02T03:04:15Z"
    assert p.status.printable_status == PrintableStatus.CRASH_LOOP_BACK_OFF
    again = plan(dataclasses.replace(make_vm(), status=p.status), STATES["failed"])
    assert again.status.start_failure == failure  # the same VMI is not counted twice
    waiting = plan(dataclasses.replace(make_vm(), status=p.status), None)
    assert not waiting.create_vmi and waiting.requeue_after == pytest.approx(10.0)
    assert waiting.status.printable_status == PrintableStatus.CRASH_LOOP_BACK_OFF


def test_backoff_grows_and_is_capped() -> None:
    """10 s, 20 s, 40 s … at most 300 s."""
    assert [BACKOFF.delay(n) for n in (1, 2, 3, 4, 6, 10)] == [10, 20, 40, 80, 300, 300]


def test_backoff_over_creates_again() -> None:
    """Once retryAfter has passed the VMI is created again."""
    status = {
        "startFailure": {
            "consecutiveFailCount": 2,
            "lastFailedVMIUID": "x",
            "retryAfterTimestamp": ago(1),
        }
    }
    assert plan(make_vm(status=status), None).create_vmi


def test_running_vmi_resets_the_failure_count() -> None:
    """A new VMI that reaches Running clears startFailure."""
    status = {
        "startFailure": {
            "consecutiveFailCount": 3,
            "lastFailedVMIUID": "old",
            "retryAfterTimestamp": ago(1),
        }
    }
    p = plan(make_vm(status=status), STATES["running"])
    assert p.status.start_failure is None


@pytest.mark.parametrize(
    ("strategy", "vmi", "expected"),
    [
        pytest.param("Halted", None, PrintableStatus.STOPPED, id="stopped"),
        pytest.param("Always", None, PrintableStatus.STARTING, id="about-to-start"),
        pytest.param(
            "Always", owned(phase=VMIPhase.SCHEDULING), PrintableStatus.STARTING, id="starting"
        ),
        pytest.param(
            "Always", owned(phase=VMIPhase.RUNNING, node="n"), PrintableStatus.RUNNING, id="running"
        ),
        pytest.param(
            "Always",
            owned(phase=VMIPhase.RUNNING, conditions=(condition("Paused"),)),
            PrintableStatus.PAUSED,
            id="paused",
        ),
        pytest.param(
            "Always",
            owned(phase=VMIPhase.RUNNING, migration_state=MigrationState(start_timestamp=ago(3))),
            PrintableStatus.MIGRATING,
            id="migrating",
        ),
        pytest.param(
            "Always",
            owned(
                phase=VMIPhase.SCHEDULING,
                conditions=(condition("PodScheduled", "False", reason="Unschedulable"),),
            ),
            PrintableStatus.UNSCHEDULABLE,
            id="unschedulable",
        ),
        pytest.param(
            "Halted",
            owned(phase=VMIPhase.RUNNING, deleting=True),
            PrintableStatus.STOPPING,
            id="stopping",
        ),
        pytest.param(
            "Manual", owned(phase=VMIPhase.SUCCEEDED), PrintableStatus.STOPPED, id="manual-done"
        ),
        pytest.param("Once", owned(phase=VMIPhase.FAILED), PrintableStatus.STOPPED, id="once-done"),
        pytest.param(
            "Always", owned(phase=VMIPhase.UNKNOWN), PrintableStatus.UNKNOWN, id="unknown"
        ),
    ],
)
def test_printable_status(
    strategy: str, vmi: VirtualMachineInstance | None, expected: PrintableStatus
) -> None:
    """printableStatus as `kubectl get vm` shows it; no Stopped flash before Starting."""
    assert plan(make_vm(run_strategy=strategy), vmi).status.printable_status == expected


def test_conditions_are_mirrored_and_ready_follows_the_vmi() -> None:
    """VMI conditions appear on the VM; ready/created follow the VMI; generation observed."""
    vmi = owned(
        phase=VMIPhase.RUNNING, conditions=(condition("Ready"), condition("AgentConnected"))
    )
    p = plan(make_vm(generation=7), vmi)
    assert [c.type for c in p.status.conditions] == ["Ready", "AgentConnected"]
    assert p.status.ready is True and p.status.created is True
    assert p.status.observed_generation == 7


def test_without_a_vmi_ready_is_false_with_a_reason() -> None:
    """No VMI: Ready=False/VMINotExists, created and ready unset."""
    p = plan(make_vm(run_strategy="Halted"), None)
    cond = p.status.condition("Ready")
    assert cond is not None and cond.status == "False" and cond.reason == "VMINotExists"
    assert p.status.ready is None and p.status.created is None


def test_status_is_a_fixed_point() -> None:
    """Planning again from the planned status yields the same status (no second write)."""
    vm = make_vm(run_strategy="Halted")
    first = plan(vm, None)
    second = plan(dataclasses.replace(vm, status=first.status), None)
    assert second.status == first.status


def test_vmi_from_template_is_named_labelled_and_owned() -> None:
    """The created VMI: VM's name, template labels + kubevirt.io/vm, ownerRef controller."""
    body = vmi_from_template(make_vm())
    meta = body["metadata"]
    assert meta["name"] == "vm1" and meta["namespace"] == "ns"
    assert meta["labels"] == {"app": "x", "kubevirt.io/vm": "vm1"}
    (ref,) = meta["ownerReferences"]
    assert ref["uid"] == VM_UID and ref["controller"] is True and ref["kind"] == "VirtualMachine"
    assert body["spec"]["domain"]["memory"] == {"guest": "128Mi"}


def test_deleting_a_running_vmi_shows_stopping_in_the_same_write() -> None:
    """Halted with a running VMI: the sync that deletes it already says Stopping."""
    p = plan(make_vm(run_strategy="Halted"), STATES["running"])
    assert action(p) == "delete" and p.status.printable_status == PrintableStatus.STOPPING
