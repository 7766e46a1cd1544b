"""Admission of the instancetype.kubevirt.io objects themselves: values checked, every
KubeVirt v1beta1 field admitted, unknown fields refused, each named."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model.unsupported import UNKNOWN_FIELD
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


def test_fields_whose_vmi_field_is_refused_are_admitted() -> None:
    """dedicatedCPUPlacement, hugepages, gpus, preferredTPM, preferred firmware: the objects
    carrying them are admitted unchanged (a VM applying them is refused, naming them)."""
    it = _instancetype(
        cpu={"guest": 2, "dedicatedCPUPlacement": True, "numa": {"guestMappingPassthrough": {}}},
        memory={"guest": "256Mi", "hugepages": {"pageSize": "2Mi"}, "overcommitPercent": 10},
        gpus=[{"name": "g", "deviceName": "nvidia.com/X"}],
        annotations={"a": "b"},
    )
    assert _found(it) == set()
    pref = _preference(
        devices={"preferredTPM": {}, "preferredRng": {}, "preferredAutoattachInputDevice": True},
        firmware={"preferredUseEfi": True, "preferredUseSecureBoot": True},
        features={"preferredSmm": {}, "preferredHyperv": {"relaxed": {}}},
        clock={"preferredClockOffset": {"utc": {}}, "preferredTimer": {"hpet": {"present": False}}},
        cpu={"preferredCPUTopology": "preferSpread", "spreadOptions": {"across": "SocketsCores"}},
        requirements={"cpu": {"guest": 2}, "memory": {"guest": "1Gi"}},
        annotations={"a": "b"},
        preferredTerminationGracePeriodSeconds=180,
    )
    assert _found(pref) == set()


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        pytest.param(_instancetype(memory={"guest": "1Gi", "overcommitPercent": 101}),
                     "spec.memory.overcommitPercent", id="overcommit"),
        pytest.param(_instancetype(memory={"guest": "1Gi", "maxGuest": "512Mi"}),
                     "spec.memory.maxGuest", id="max-guest"),
        pytest.param(_instancetype(cpu={"guest": 1, "maxSockets": 0}),
                     "spec.cpu.maxSockets", id="max-sockets"),
        pytest.param(_preference(cpu={"preferredCPUTopology": "preferDiagonal"}),
                     "spec.cpu.preferredCPUTopology", id="topology"),
        pytest.param(_preference(cpu={"spreadOptions": {"across": "CoresThreads", "ratio": 3}}),
                     "spec.cpu.spreadOptions.ratio", id="spread-ratio"),
        pytest.param(_preference(requirements={"memory": {"guest": "lots"}}),
                     "spec.requirements.memory.guest", id="requirement"),
        pytest.param(_preference(preferredTerminationGracePeriodSeconds=-1),
                     "spec.preferredTerminationGracePeriodSeconds", id="grace"),
        pytest.param(_preference(devices={"preferredLunBus": "ide"}),
                     "spec.devices.preferredLunBus", id="lun-bus"),
    ],
)  # fmt: skip
def test_bad_values_of_newly_typed_fields_are_named(obj: dict[str, Any], path: str) -> None:
    """Each newly typed field's bad value is refused at the object's admission, named."""
    assert path in {p for p, _ in _found(obj)}


def test_unknown_fields_are_refused() -> None:
    """A typo anywhere (top level, spec, nested) is an unknown field, named."""
    it = _instancetype(cpus={"guest": 1})
    it["sepc"] = {}
    found = _found(it)
    assert ("spec.cpus", UNKNOWN_FIELD) in found
    assert ("sepc", UNKNOWN_FIELD) in found
    pref = _preference(devices={"preferedDiskBus": "sata"})
    assert ("spec.devices.preferedDiskBus", UNKNOWN_FIELD) in _found(pref)
