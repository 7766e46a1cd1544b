"""Admission of backup.kubevirt.io backups and trackers: refusals naming the field (a source
of another kind or without a name, no pvcName or a bad one, Pull mode and its fields, a
changed spec); good objects pass."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import FieldError
from virt_api.admission.backups import backup_spec_changed
from virt_api.admission.validate import validate

VM_REF = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"}
TRACKER_REF = {"apiGroup": "backup.kubevirt.io", "kind": "VirtualMachineBackupTracker", "name": "t"}


def backup(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"source": dict(VM_REF), "pvcName": "target"}
    body.update(spec)
    return {
        "apiVersion": "backup.kubevirt.io/v1alpha1",
        "kind": "VirtualMachineBackup",
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": body,
    }


def tracker(**source: Any) -> dict[str, Any]:
    return {
        "apiVersion": "backup.kubevirt.io/v1alpha1",
        "kind": "VirtualMachineBackupTracker",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"source": {**VM_REF, **source}},
    }


def paths(errors: list[FieldError]) -> set[str]:
    return {e.path for e in errors}


def test_good_backups_and_trackers_pass() -> None:
    """A VM-sourced and a tracker-sourced push backup, and a tracker of a VM, are admitted."""
    assert validate("VirtualMachineBackup", backup()) == []
    assert validate("VirtualMachineBackup", backup(source=TRACKER_REF, mode="Push")) == []
    assert validate("VirtualMachineBackup", backup(forceFullBackup=True, skipQuiesce=True)) == []
    assert validate("VirtualMachineBackupTracker", tracker()) == []


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        pytest.param(
            {"source": {"kind": "VirtualMachine", "name": "v"}}, "spec.source.kind", id="no-group"
        ),
        pytest.param(
            {
                "source": {
                    "apiGroup": "kubevirt.io",
                    "kind": "VirtualMachineBackupTracker",
                    "name": "t",
                }
            },
            "spec.source.kind",
            id="tracker-wrong-group",
        ),
        pytest.param(
            {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine"}},
            "spec.source.name",
            id="no-name",
        ),
        pytest.param({"pvcName": None}, "spec.pvcName", id="no-claim"),
        pytest.param({"pvcName": "Not_A_Claim"}, "spec.pvcName", id="bad-claim"),
        pytest.param({"mode": "Pull"}, "spec.mode", id="pull"),
        pytest.param({"mode": "Sideways"}, "spec.mode", id="unknown-mode"),
        pytest.param({"tokenSecretRef": "s"}, "spec.tokenSecretRef", id="token"),
        pytest.param({"ttlDuration": "1h"}, "spec.ttlDuration", id="ttl"),
    ],
)
def test_bad_backups_are_refused_naming_the_field(spec: dict[str, Any], path: str) -> None:
    """Each bad value is refused with the field it is in."""
    body = backup(**spec)
    if spec.get("pvcName", "x") is None:
        del body["spec"]["pvcName"]
    assert path in paths(validate("VirtualMachineBackup", body))


@pytest.mark.parametrize(
    ("source", "path"),
    [
        pytest.param({"kind": "VirtualMachineInstance"}, "spec.source.kind", id="kind"),
        pytest.param({"apiGroup": "backup.kubevirt.io"}, "spec.source.kind", id="group"),
        pytest.param({"name": ""}, "spec.source.name", id="name"),
    ],
)
def test_bad_trackers_are_refused_naming_the_field(source: dict[str, Any], path: str) -> None:
    """A tracker's source must be a named kubevirt.io VirtualMachine."""
    assert path in paths(validate("VirtualMachineBackupTracker", tracker(**source)))


def test_spec_is_immutable() -> None:
    """A changed spec of a backup or a tracker is refused; a status-only update is not."""
    old = backup()
    assert paths(backup_spec_changed("VirtualMachineBackup", backup(pvcName="other"), old)) == {
        "spec"
    }
    assert backup_spec_changed("VirtualMachineBackup", old, old) == []
    assert paths(
        backup_spec_changed("VirtualMachineBackupTracker", tracker(name="x"), tracker())
    ) == {"spec"}
