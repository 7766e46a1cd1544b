"""virt-controller's object metrics (controller.metrics) in KubeVirt's names and labels."""

from __future__ import annotations

from typing import Any

from controller.metrics import ObjectMetrics
from shared.kube import Registry
from shared.model import VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration

VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "demo", "namespace": "ns", "uid": "u1",
                 "annotations": {"vm.kubevirt.io/os": "linux"}},
    "spec": {"domain": {"devices": {}, "machine": {"type": "q35"}}},
    "status": {
        "phase": "Running", "nodeName": "node02", "activePods": {"pod-1": "node02"},
        "guestOSInfo": {"name": "BusyBox", "kernelRelease": "6.1.0", "machine": "x86_64"},
        "migrationState": {"migrationUid": "m1", "startTimestamp": "2026-11-25T20:00:00Z",
                           "endTimestamp": "2026-11-25T20:00:05Z", "completed": True},
    },
}  # fmt: skip
VM: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "demo", "namespace": "ns"},
    "spec": {"instancetype": {"name": "u1.small", "kind": "VirtualMachineClusterInstancetype"},
             "template": {"metadata": {"annotations": {"vm.kubevirt.io/workload": "server"}},
                          "spec": {"domain": {"devices": {}}}}},
    "status": {"printableStatus": "CrashLoopBackOff"},
}  # fmt: skip


def _vmim(name: str, uid: str, phase: str) -> VirtualMachineInstanceMigration:
    return VirtualMachineInstanceMigration.from_dict(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"vmiName": "demo"},
            "status": {"phase": phase},
        }
    )


def _registry() -> Registry:
    registry = Registry()
    vmims = [
        _vmim("mig", "m1", "Succeeded"),
        _vmim("bad", "m2", "Failed"),
        _vmim("now", "m3", "Running"),
    ]
    registry.add(
        ObjectMetrics(
            vmis=lambda: [VirtualMachineInstance.from_dict(VMI)],
            vms=lambda: [VirtualMachine.from_dict(VM)],
            vmims=lambda: vmims,
        )
    )
    return registry


def test_vmi_and_vm_info_carry_kubevirts_labels() -> None:
    """kubevirt_vmi_info and kubevirt_vm_info: one series per object, value 1, labelled with
    phase, annotations, guest OS, machine, pod, and the VM's status and status group."""
    registry = _registry()
    vmi_labels = {
        "node": "node02", "namespace": "ns", "name": "demo", "phase": "running", "os": "linux",
        "workload": "", "flavor": "", "instance_type": "", "preference": "",
        "guest_os_kernel_release": "6.1.0", "guest_os_machine": "q35",
        "guest_os_arch": "x86_64", "guest_os_name": "BusyBox", "guest_os_version_id": "",
        "evictable": "true", "outdated": "false", "vmi_pod": "pod-1",
    }  # fmt: skip
    assert registry.sample("kubevirt_vmi_info", vmi_labels) == 1
    vm_labels = {
        "namespace": "ns", "name": "demo", "os": "", "workload": "server", "flavor": "",
        "instance_type": "u1.small", "preference": "", "status": "CrashLoopBackOff",
        "status_group": "error",
    }  # fmt: skip
    assert registry.sample("kubevirt_vm_info", vm_labels) == 1


def test_migration_times_results_and_phases() -> None:
    """The VMI's last migration's start/end times name the VMIM; finished VMIMs are one
    succeeded or failed series each; in-flight ones are counted by phase."""
    registry = _registry()
    base = {"node": "node02", "namespace": "ns", "name": "demo", "migration_name": "mig"}
    start = registry.sample("kubevirt_vmi_migration_start_time_seconds", base)
    end = registry.sample(
        "kubevirt_vmi_migration_end_time_seconds", {**base, "status": "succeeded"}
    )
    assert start is not None and end == start + 5
    ok = {"vmi": "demo", "vmim": "mig", "namespace": "ns"}
    assert registry.sample("kubevirt_vmi_migration_succeeded", ok) == 1
    assert registry.sample("kubevirt_vmi_migration_failed", {**ok, "vmim": "bad"}) == 1
    assert registry.sample("kubevirt_vmi_migration_failed", ok) is None
    assert registry.sample("kubevirt_vmi_migrations_in_running_phase") == 1
    assert registry.sample("kubevirt_vmi_migrations_in_pending_phase") == 0
