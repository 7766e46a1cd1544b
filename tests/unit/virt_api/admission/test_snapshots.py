"""Admission of snapshots and restores: refusals naming the field (a source that is no VM,
a missing VM, a bad failureDeadline, a snapshot not ready, a running target without a
policy that stops it, bad patches, a changed spec); good objects pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.kube import VMIS, VMS, VMSNAPSHOTS, Resource
from virt_api.admission.snapshots import lookup_errors, spec_changed
from virt_api.admission.validate import validate

VM_REF = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"}


def snapshot(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineSnapshot",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"source": dict(VM_REF), **spec},
    }


def restore(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineRestore",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"target": dict(VM_REF), "virtualMachineSnapshotName": "s", **spec},
    }


def world(*, vm: bool = True, running: bool = False, ready: bool | None = True) -> Any:
    async def lookup(resource: Resource, namespace: str, name: str) -> Mapping[str, Any] | None:
        if resource is VMS:
            return {"metadata": {"name": name}} if vm else None
        if resource is VMIS:
            return {"metadata": {"name": name}} if running else None
        if resource is VMSNAPSHOTS:
            return None if ready is None else {"status": {"readyToUse": ready}}
        return None

    return lookup


def paths(errors: list[Any]) -> dict[str, str]:
    return {e.path: e.message for e in errors}


def test_a_good_snapshot_and_restore_pass() -> None:
    """A VM source with a duration; a VM target with a JSON patch."""
    assert validate("VirtualMachineSnapshot", snapshot(failureDeadline="1m30s")) == []
    patch = '{"op": "replace", "path": "/spec/runStrategy", "value": "Halted"}'
    assert validate("VirtualMachineRestore", restore(patches=[patch])) == []


def test_snapshot_fields_refused_by_name() -> None:
    """Not a VirtualMachine, no name, a failureDeadline that is no duration."""
    bad = snapshot(failureDeadline="soon")
    bad["spec"]["source"] = {"kind": "Pod"}
    assert set(paths(validate("VirtualMachineSnapshot", bad))) == {
        "spec.source.kind",
        "spec.source.name",
        "spec.failureDeadline",
    }


def test_restore_fields_refused_by_name() -> None:
    """No snapshot name, a patch that is not JSON or not add/replace/remove, overrides."""
    bad = restore(
        patches=["nope", '{"op": "move", "path": "/a", "from": "/b"}'],
        volumeRestoreOverrides=[{"volumeName": "disk", "restoreName": "x"}],
    )
    del bad["spec"]["virtualMachineSnapshotName"]
    found = paths(validate("VirtualMachineRestore", bad))
    assert set(found) == {
        "spec.virtualMachineSnapshotName",
        "spec.patches[0]",
        "spec.patches[1]",
        "spec.volumeRestoreOverrides",
    }
    assert "not JSON" in found["spec.patches[0]"]


async def test_a_snapshot_of_a_missing_vm_is_refused() -> None:
    """spec.source.name names a VM that does not exist."""
    errors = await lookup_errors(
        "VirtualMachineSnapshot", snapshot(), namespace="ns", lookup=world(vm=False)
    )
    assert paths(errors) == {
        "spec.source.name": "VirtualMachine 'vm1' does not exist in namespace 'ns'"
    }
    assert (
        await lookup_errors("VirtualMachineSnapshot", snapshot(), namespace="ns", lookup=world())
        == []
    )


async def test_a_restore_of_a_snapshot_not_ready_or_missing_is_refused() -> None:
    """spec.virtualMachineSnapshotName: not readyToUse, or no such snapshot."""
    not_ready = await lookup_errors(
        "VirtualMachineRestore", restore(), namespace="ns", lookup=world(ready=False)
    )
    assert "is not ready to use" in paths(not_ready)["spec.virtualMachineSnapshotName"]
    missing = await lookup_errors(
        "VirtualMachineRestore", restore(), namespace="ns", lookup=world(ready=None)
    )
    assert "does not exist" in paths(missing)["spec.virtualMachineSnapshotName"]


async def test_a_restore_onto_a_running_vm_needs_a_policy() -> None:
    """Running target: refused unless StopTarget / WaitGracePeriod / WaitEventually."""
    refused = await lookup_errors(
        "VirtualMachineRestore", restore(), namespace="ns", lookup=world(running=True)
    )
    assert "is running" in paths(refused)["spec.targetReadinessPolicy"]
    allowed = await lookup_errors(
        "VirtualMachineRestore",
        restore(targetReadinessPolicy="StopTarget"),
        namespace="ns",
        lookup=world(running=True),
    )
    assert allowed == []


def test_the_spec_is_immutable() -> None:
    """An UPDATE changing the spec is refused; metadata-only updates pass."""
    old = snapshot()
    new = snapshot(failureDeadline="1m")
    assert paths(spec_changed("VirtualMachineSnapshot", new, old)) == {
        "spec": "cannot be changed once created"
    }
    assert spec_changed("VirtualMachineSnapshot", old, old) == []


def test_clone_fields_refused_by_name() -> None:
    """A Pod source, a target without a name, a bad MAC, a bad patch."""
    clone = {
        "apiVersion": "clone.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClone",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "source": {"kind": "Pod", "name": "p"},
            "target": {"kind": "VirtualMachine"},
            "newMacAddresses": {"default": "nope"},
            "patches": ["{}"],
        },
    }
    assert set(paths(validate("VirtualMachineClone", clone))) == {
        "spec.source",
        "spec.target",
        "spec.newMacAddresses.default",
        "spec.patches[0]",
    }
    clone["spec"] = {"source": dict(VM_REF), "newMacAddresses": {"default": "02:00:00:00:00:09"}}
    assert validate("VirtualMachineClone", clone) == []


async def test_a_clone_of_a_missing_vm_is_refused() -> None:
    """spec.source.name names a VM that does not exist."""
    clone = {"spec": {"source": dict(VM_REF)}}
    errors = await lookup_errors(
        "VirtualMachineClone", clone, namespace="ns", lookup=world(vm=False)
    )
    assert "does not exist" in paths(errors)["spec.source.name"]
