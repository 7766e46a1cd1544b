"""Admission of the instancetype.kubevirt.io objects themselves: values checked, KubeVirt
fields kubevirt-py does not honour refused as such, unknown fields refused, each named."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model.unsupported import NOT_SUPPORTED, UNKNOWN_FIELD
from virt_api.admission.validate import validate

API = "instancetype.kubevirt.io/v1beta1"


def _instancetype(kind: str = "VirtualMachineInstancetype", **spec: Any) -> dict[str, Any]:
    base = {"cpu": {"guest": 2}, "memory": {"guest": "256Mi"}}
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "small"}, "spec": base | spec}


def _preference(kind: str = "VirtualMachinePreference", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "pref"}, "spec": spec}


def _found(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e.path, e.message) for e in validate(obj["kind"], obj)}


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(_instancetype(), id="instancetype"),
        pytest.param(_instancetype("VirtualMachineClusterInstancetype"), id="cluster-it"),
        pytest.param(
            _preference(
                devices={"preferredDiskBus": "sata", "preferredInterfaceModel": "e1000"},
                machine={"preferredMachineType": "q35"},
            ),
            id="preference",
        ),
        pytest.param(_preference("VirtualMachineClusterPreference"), id="cluster-pref"),
    ],
)
def test_supported_objects_pass(obj: dict[str, Any]) -> None:
    """Instancetypes and preferences using only honoured fields are admitted."""
    assert _found(obj) == set()


def test_instancetype_values_are_checked() -> None:
    """guest vCPUs and memory are required and in range, each named."""
    bad = _instancetype(cpu={"guest": 0}, memory={"guest": "1Ki"})
    paths = {p for p, _ in _found(bad)}
    assert {"spec.cpu.guest", "spec.memory.guest"} <= paths
    missing = _instancetype(cpu={}, memory={})
    assert {"spec.cpu.guest", "spec.memory.guest"} <= {p for p, _ in _found(missing)}


def test_preference_values_are_checked() -> None:
    """An unknown bus, a virtio cdrom, an unknown NIC model or a machine type with
    markup are named."""
    bad = _preference(
        devices={
            "preferredDiskBus": "ide",
            "preferredCdromBus": "virtio",
            "preferredInterfaceModel": "rtl9999",
        },
        machine={"preferredMachineType": "<pc/>"},
    )
    assert {p for p, _ in _found(bad)} == {
        "spec.devices.preferredDiskBus",
        "spec.devices.preferredCdromBus",
        "spec.devices.preferredInterfaceModel",
        "spec.machine.preferredMachineType",
    }


def test_kubevirt_fields_not_honoured_are_refused_as_such() -> None:
    """dedicatedCPUPlacement, hugepages, gpus, preferredTPM, preferred firmware: KubeVirt
    fields kubevirt-py does not honour, each named "not supported by kubevirt-py"."""
    it = _instancetype(
        cpu={"guest": 2, "dedicatedCPUPlacement": True},
        memory={"guest": "256Mi", "hugepages": {"pageSize": "2Mi"}},
        gpus=[{"name": "g"}],
    )
    assert {
        ("spec.cpu.dedicatedCPUPlacement", NOT_SUPPORTED),
        ("spec.memory.hugepages", NOT_SUPPORTED),
        ("spec.gpus", NOT_SUPPORTED),
    } <= _found(it)
    pref = _preference(devices={"preferredTPM": {}}, firmware={"preferredUseEfi": True})
    assert {
        ("spec.devices.preferredTPM", NOT_SUPPORTED),
        ("spec.firmware", NOT_SUPPORTED),
    } <= _found(pref)


def test_unknown_fields_are_refused() -> None:
    """A typo anywhere (top level, spec, nested) is an unknown field, named."""
    it = _instancetype(cpus={"guest": 1})
    it["sepc"] = {}
    found = _found(it)
    assert ("spec.cpus", UNKNOWN_FIELD) in found
    assert ("sepc", UNKNOWN_FIELD) in found
    pref = _preference(devices={"preferedDiskBus": "sata"})
    assert ("spec.devices.preferedDiskBus", UNKNOWN_FIELD) in _found(pref)
