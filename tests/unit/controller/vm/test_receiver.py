"""The VM controller's side of a decentralized migration (controller/vm/receiver.py):
a WaitAsReceiver VM's VMI is marked as a receiver, the VM takes its restore-run-strategy
once the guest runs, and the sending VM is Halted once its guest left."""

from __future__ import annotations

import dataclasses

import pytest

from controller.vm.logic import Backoff, plan_vm
from controller.vm.receiver import restored_strategy, sent_away
from controller.vm.vmibody import vmi_from_template
from shared.labels import RECEIVER_ANNOTATION, RESTORE_RUN_STRATEGY_ANNOTATION
from shared.model import (
    MigrationSideState,
    MigrationState,
    PrintableStatus,
    RunStrategy,
    VirtualMachine,
    VMIPhase,
)
from tests.unit.controller.builders import NOW, make_vm, make_vmi


def receiver_vm(restore: str | None = None) -> VirtualMachine:
    vm = make_vm(run_strategy="WaitAsReceiver")
    if restore is None:
        return vm
    meta = dataclasses.replace(vm.metadata, annotations={RESTORE_RUN_STRATEGY_ANNOTATION: restore})
    return dataclasses.replace(vm, metadata=meta)


def test_the_receiving_vms_vmi_is_marked() -> None:
    """Only a WaitAsReceiver VM's VMI carries the receiver annotation."""
    body = vmi_from_template(receiver_vm())
    assert body["metadata"]["annotations"][RECEIVER_ANNOTATION] == "true"
    assert RECEIVER_ANNOTATION not in vmi_from_template(make_vm())["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("restore", "wanted"),
    [("Manual", RunStrategy.MANUAL), (None, RunStrategy.ALWAYS), ("WaitAsReceiver", RunStrategy.ALWAYS)],
)  # fmt: skip
def test_a_running_receiver_takes_its_restore_run_strategy(
    restore: str | None, wanted: RunStrategy
) -> None:
    """Once its VMI runs: the annotation's strategy, Always when absent (or itself)."""
    running = make_vmi(phase=VMIPhase.RUNNING, node="node02")
    assert restored_strategy(receiver_vm(restore), running) is wanted
    waiting = make_vmi(phase=VMIPhase.WAITING_FOR_SYNC)
    assert restored_strategy(receiver_vm(restore), waiting) is None
    assert restored_strategy(make_vm(), running) is None


def test_the_sending_vm_is_halted_once_its_guest_left() -> None:
    """A VM whose VMI's guest moved to another VMI becomes Halted (never restarted)."""
    state = MigrationState(
        completed=True,
        target_state=MigrationSideState(domain_name="vm1", domain_namespace="ns-b"),
    )
    gone = make_vmi(phase=VMIPhase.SUCCEEDED, node="node01", migration_state=state)
    assert sent_away(gone)
    assert restored_strategy(make_vm(), gone) is RunStrategy.HALTED
    assert restored_strategy(make_vm(run_strategy="Halted"), gone) is None
    ongoing = dataclasses.replace(state, completed=False)
    assert not sent_away(make_vmi(phase=VMIPhase.RUNNING, migration_state=ongoing))


def test_a_waiting_receiver_vm_prints_waiting_for_receiver() -> None:
    """`kubectl get vm` shows WaitingForReceiver (KubeVirt's) while its VMI waits."""
    vmi = make_vmi(phase=VMIPhase.WAITING_FOR_SYNC, owner_vm=True)
    plan = plan_vm(receiver_vm(), vmi, now=NOW, backoff=Backoff(base=1, cap=2))
    assert plan.status.printable_status is PrintableStatus.WAITING_FOR_RECEIVER
    assert not plan.create_vmi and plan.delete_vmi_uid is None
