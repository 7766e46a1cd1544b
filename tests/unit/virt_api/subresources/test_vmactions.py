"""start / stop / restart / migrate: KubeVirt's rules, as (VM, VMI, options) → writes or refusal."""

from __future__ import annotations

from typing import Any

import pytest

from shared.actions import VMAction
from tests.unit.virt_api.subresources.fakes import vm, vmi
from virt_api.subresources.errors import BadRequest, Conflict, NotFound, SubresourceError
from virt_api.subresources.vmactions import (
    VmOptions,
    VmWrites,
    change_request_ops,
    parse_options,
    plan,
    vm_ref,
)

REF = vm_ref("ns1", "vm1")
STATUS_PATH = "/status/stateChangeRequests"
NO_OPTS = VmOptions()


def with_status(strategy: str, **status: Any) -> dict[str, Any]:
    return vm(strategy=strategy, printableStatus="Stopped", **status)


def add_requests(*requests: dict[str, str]) -> tuple[dict[str, Any], ...]:
    """The guarded add of requests to a VM with a status but none pending."""
    return (
        {"op": "test", "path": STATUS_PATH, "value": None},
        {"op": "add", "path": STATUS_PATH, "value": list(requests)},
    )


STOP_UID1 = {"action": "Stop", "uid": "uid-1"}
START = {"action": "Start"}


@pytest.mark.parametrize(
    ("action", "strategy", "phase", "expected"),
    [
        pytest.param(
            VMAction.START, "Halted", None,
            VmWrites(spec_patch={"spec": {"runStrategy": "Always"}}), id="start-halted",
        ),
        pytest.param(
            VMAction.START, "Manual", None, VmWrites(status_ops=add_requests(START)),
            id="start-manual",
        ),
        pytest.param(
            VMAction.START, "Manual", "Succeeded",
            VmWrites(status_ops=add_requests(STOP_UID1, START)), id="start-manual-final-vmi",
        ),
        pytest.param(
            VMAction.START, "RerunOnFailure", "Succeeded",
            VmWrites(status_ops=add_requests(STOP_UID1, START)), id="start-rerun-succeeded",
        ),
        pytest.param(
            VMAction.STOP, "Always", "Running",
            VmWrites(spec_patch={"spec": {"runStrategy": "Halted"}}), id="stop-always",
        ),
        pytest.param(
            VMAction.STOP, "RerunOnFailure", None,
            VmWrites(spec_patch={"spec": {"runStrategy": "Halted"}}), id="stop-rerun",
        ),
        pytest.param(
            VMAction.STOP, "Manual", "Running", VmWrites(status_ops=add_requests(STOP_UID1)),
            id="stop-manual",
        ),
        pytest.param(
            VMAction.RESTART, "Always", "Running",
            VmWrites(status_ops=add_requests(STOP_UID1, START)), id="restart-always",
        ),
        pytest.param(
            VMAction.RESTART, "Manual", "Running",
            VmWrites(status_ops=add_requests(STOP_UID1, START)), id="restart-manual",
        ),
    ],
)  # fmt: skip
def test_plans(action: VMAction, strategy: str, phase: str | None, expected: VmWrites) -> None:
    """Each verb's writes per run strategy, as KubeVirt's virt-api makes them."""
    current = vmi(phase=phase) if phase else None
    assert plan(action, NO_OPTS, with_status(strategy), current) == expected


@pytest.mark.parametrize(
    ("action", "strategy", "phase", "why"),
    [
        pytest.param(VMAction.START, "Always", "Running", "VM is already running", id="running"),
        pytest.param(VMAction.START, "Halted", "Running", "VM is already running", id="halted-vmi"),
        pytest.param(
            VMAction.START, "Always", None, "Always does not support manual start requests",
            id="start-always-crashlooping",
        ),
        pytest.param(
            VMAction.START, "RerunOnFailure", "Failed",
            "RerunOnFailure does not support starting VM from failed state", id="start-rerun-failed",
        ),
        pytest.param(VMAction.STOP, "Halted", None, "VM is not running", id="stop-halted"),
        pytest.param(VMAction.STOP, "Manual", "Succeeded", "VM is not running", id="stop-final"),
        pytest.param(
            VMAction.STOP, "Halted", "Running",
            "Halted only supports manual stop requests with a shorter graceperiod",
            id="stop-halted-no-grace",
        ),
        pytest.param(
            VMAction.RESTART, "Halted", "Running",
            "Halted does not support manual restart requests", id="restart-halted",
        ),
        pytest.param(VMAction.RESTART, "Always", None, "VM is not running", id="restart-no-vmi"),
        pytest.param(VMAction.MIGRATE, "Always", "Scheduled", "VM is not running", id="migrate"),
    ],
)  # fmt: skip
def test_refusals_are_conflicts_in_kubevirt_words(
    action: VMAction, strategy: str, phase: str | None, why: str
) -> None:
    """409 Conflict, apimachinery's wording, details naming virtualmachine.kubevirt.io."""
    current = vmi(phase=phase) if phase else None
    with pytest.raises(Conflict) as caught:
        plan(action, NO_OPTS, with_status(strategy), current)
    status = caught.value.to_status()
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        f'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": {why}'
    )
    assert status["details"] == {"name": "vm1", "group": "kubevirt.io", "kind": "virtualmachine"}


def test_a_receiving_vm_is_left_as_kubevirt_leaves_it() -> None:
    """runStrategy WaitAsReceiver (KubeVirt's virt-api has no case for it): start while its
    VMI waits is "VM is already running", without a VMI it is accepted with nothing done;
    stop never turns the strategy into Halted (only a grace period reaches the VMI);
    restart is "VM is not running" without a VMI, else accepted with no requests written."""
    receiving = with_status("WaitAsReceiver")
    waiting = vmi(phase="WaitingForSync", node="")
    with pytest.raises(Conflict, match="VM is already running"):
        plan(VMAction.START, NO_OPTS, receiving, waiting)
    assert plan(VMAction.START, NO_OPTS, receiving, None) == VmWrites()
    for current in (waiting, None):
        assert plan(VMAction.STOP, NO_OPTS, receiving, current) == VmWrites()
    graced = plan(VMAction.STOP, VmOptions(grace_period=5), receiving, waiting)
    assert graced == VmWrites(vmi_patch={"spec": {"terminationGracePeriodSeconds": 5}})
    with pytest.raises(Conflict, match="VM is not running"):
        plan(VMAction.RESTART, NO_OPTS, receiving, None)
    assert plan(VMAction.RESTART, VmOptions(grace_period=0), receiving, waiting) == VmWrites()


def test_start_paused_sets_the_start_strategy() -> None:
    """StartOptions.paused on a Halted VM: Always and the template's startStrategy Paused."""
    writes = plan(VMAction.START, VmOptions(paused=True), with_status("Halted"), None)
    assert writes.spec_patch == {
        "spec": {"runStrategy": "Always", "template": {"spec": {"startStrategy": "Paused"}}}
    }


def test_deprecated_running_field_is_patched_in_place() -> None:
    """A VM using spec.running gets spec.running patched (setting both is invalid)."""
    old = with_status("Always")
    old["spec"] = {"running": True, "template": {"spec": {}}}
    writes = plan(VMAction.STOP, NO_OPTS, old, vmi())
    assert writes.spec_patch == {"spec": {"running": False}}


def test_stop_with_grace_period_patches_the_vmi_first() -> None:
    """StopOptions.gracePeriod shortens the VMI's terminationGracePeriodSeconds; a Halted VM
    whose VMI still runs may then be stopped (a Stop request)."""
    current = vmi()
    writes = plan(VMAction.STOP, VmOptions(grace_period=0), with_status("Halted"), current)
    assert writes.vmi_patch == {"spec": {"terminationGracePeriodSeconds": 0}}
    assert writes.status_ops == add_requests(STOP_UID1)


def test_restart_grace_zero_kills_the_pod() -> None:
    """RestartOptions.gracePeriodSeconds=0: the requests, then the launcher pod goes at once."""
    writes = plan(VMAction.RESTART, VmOptions(grace_period=0), with_status("Always"), vmi())
    assert writes.kill_pod_of == "uid-1"


def test_migrate_creates_a_generated_vmim() -> None:
    """migrate: a VMIM named kubevirt-migrate-vm-<random> for the VM's VMI."""
    writes = plan(VMAction.MIGRATE, NO_OPTS, with_status("Always"), vmi())
    assert writes.migration == {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"generateName": "kubevirt-migrate-vm-", "namespace": "ns1"},
        "spec": {"vmiName": "vm1"},
    }


def test_migrate_options_added_node_selector_lands_on_the_vmim() -> None:
    """MigrateOptions.addedNodeSelector becomes the VMIM's spec.addedNodeSelector."""
    opts = VmOptions(added_node_selector={"kubernetes.io/hostname": "node02"})
    writes = plan(VMAction.MIGRATE, opts, with_status("Always"), vmi())
    assert writes.migration is not None
    assert writes.migration["spec"] == {
        "vmiName": "vm1",
        "addedNodeSelector": {"kubernetes.io/hostname": "node02"},
    }


def test_migrate_without_vmi_is_not_found() -> None:
    """No VMI: 404 naming the virtualmachineinstance, as virt-api's fetch."""
    with pytest.raises(NotFound, match=r'virtualmachineinstance\.kubevirt\.io "vm1" not found'):
        plan(VMAction.MIGRATE, NO_OPTS, with_status("Always"), None)


def test_requests_underway_refuse_all_but_a_stop() -> None:
    """Pending requests: a start/restart is refused; a lone Stop replaces them (test-guarded)."""
    pending = [{"action": "Start"}]
    busy = with_status("Manual", stateChangeRequests=pending)
    with pytest.raises(Conflict, match="stop/start already underway"):
        plan(VMAction.RESTART, NO_OPTS, busy, vmi())
    ops = change_request_ops(busy, [STOP_UID1], ref=REF)
    assert ops == (
        {"op": "test", "path": STATUS_PATH, "value": pending},
        {"op": "replace", "path": STATUS_PATH, "value": [STOP_UID1]},
    )


def test_a_vm_without_status_gets_one() -> None:
    """No status at all: one `add /status` (a test below a missing parent would fail)."""
    assert change_request_ops(vm(strategy="Manual"), [START], ref=REF) == (
        {"op": "add", "path": "/status", "value": {"stateChangeRequests": [START]}},
    )


@pytest.mark.parametrize(
    ("action", "body", "expected"),
    [
        pytest.param(VMAction.START, b"", VmOptions(), id="empty"),
        pytest.param(VMAction.START, b"{}", VmOptions(), id="empty-object"),
        pytest.param(
            VMAction.START, b'{"paused": true, "dryRun": ["All"]}',
            VmOptions(paused=True, dry_run=True), id="start-options",
        ),
        pytest.param(
            VMAction.STOP, b'{"gracePeriod": 5}', VmOptions(grace_period=5), id="stop-options"
        ),
        pytest.param(
            VMAction.RESTART, b"gracePeriodSeconds: 0\n", VmOptions(grace_period=0),
            id="restart-options-yaml",
        ),
        pytest.param(
            VMAction.MIGRATE, b'{"addedNodeSelector": {"a": "b"}}',
            VmOptions(added_node_selector={"a": "b"}), id="migrate-options",
        ),
    ],
)  # fmt: skip
def test_options_bodies(action: VMAction, body: bytes, expected: VmOptions) -> None:
    """Start/Stop/Restart/MigrateOptions, JSON or YAML, an empty body meaning defaults."""
    assert parse_options(action, body, REF) == expected


@pytest.mark.parametrize(
    ("action", "body", "message"),
    [
        pytest.param(VMAction.STOP, b"{", "Can not unmarshal Request body", id="broken"),
        pytest.param(VMAction.STOP, b'{"gracePeriod": "x"}', "gracePeriod must be", id="type"),
        pytest.param(VMAction.START, b'{"dryRun": ["Some"]}', "dryRun must be", id="dry-run"),
        pytest.param(
            VMAction.RESTART, b'{"gracePeriodSeconds": 3}',
            "only gracePeriod=0 is supported for now", id="restart-grace",
        ),
        pytest.param(
            VMAction.RESTART, b'{"gracePeriodSeconds": -1}',
            "gracePeriod has to be greater or equal to 0", id="restart-negative",
        ),
    ],
)  # fmt: skip
def test_bad_bodies_are_400(action: VMAction, body: bytes, message: str) -> None:
    """Unreadable or out-of-range options: 400 BadRequest, before the VM is read."""
    with pytest.raises(BadRequest, match=message) as caught:
        parse_options(action, body, REF)
    assert isinstance(caught.value, SubresourceError) and caught.value.code == 400
