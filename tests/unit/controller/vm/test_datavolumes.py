"""A VM's DataVolumes: templates made owned by the VM, the VMI held back until they
Succeeded, Provisioning and DataVolumeError shown as KubeVirt shows them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.vm.datavolumes import gate, gated, templates_to_create
from controller.vm.logic import VMPlan
from shared.model import PrintableStatus, VirtualMachine, VMStatus
from shared.model.datavolume import DataVolume

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def vm() -> VirtualMachine:
    return VirtualMachine.from_dict(
        {
            "metadata": {"name": "vm", "namespace": "ns", "uid": "vm-uid"},
            "spec": {
                "runStrategy": "Always",
                "dataVolumeTemplates": [
                    {"metadata": {"name": "root"}, "spec": {"source": {"blank": {}}}}
                ],
                "template": {"spec": {"volumes": [{"name": "d", "dataVolume": {"name": "root"}}]}},
            },
        }
    )


def dv(phase: str, message: str = "") -> DataVolume:
    conds: list[dict[str, Any]] = [{"type": "Ready", "status": "False", "message": message}]
    return DataVolume.from_dict(
        {"metadata": {"name": "root"}, "status": {"phase": phase, "conditions": conds}}
    )


def test_templates_are_created_owned_by_the_vm() -> None:
    """A template without a DataVolume becomes one, controlled by the VM."""
    (body,) = templates_to_create(vm(), {})
    assert body["apiVersion"] == "cdi.kubevirt.io/v1beta1"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "vm-uid"
    assert templates_to_create(vm(), {"root": dv("Succeeded")}) == []


def test_vmi_waits_for_the_import() -> None:
    """While the DataVolume imports, no VMI and the VM shows Provisioning."""
    plan = VMPlan(status=VMStatus(printable_status=PrintableStatus.STARTING), create_vmi=True)
    held = gated(plan, gate(vm(), {"root": dv("ImportInProgress")}), None, now=NOW)
    assert not held.create_vmi
    assert held.status.printable_status == PrintableStatus.PROVISIONING
    assert gated(plan, gate(vm(), {"root": dv("Succeeded")}), None, now=NOW) is plan


def test_failed_datavolume_is_a_data_volume_error() -> None:
    """A Failed DataVolume: DataVolumeError and a Failure condition saying why."""
    plan = VMPlan(status=VMStatus(printable_status=PrintableStatus.STARTING), create_vmi=True)
    held = gated(plan, gate(vm(), {"root": dv("Failed", "HTTP 404")}), None, now=NOW)
    assert held.status.printable_status == PrintableStatus.DATA_VOLUME_ERROR
    (cond,) = [c for c in held.status.conditions if c.type == "Failure"]
    assert cond.message == "DataVolume ns/root failed: HTTP 404"
