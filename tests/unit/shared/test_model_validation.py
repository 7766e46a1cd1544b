"""Validation (shared.model.validation): valid examples, limits, collecting every problem,
the typed errors, and the VM and migration rules. Per-field VMI rules live in
test_model_validation_{domain,volumes,network}.py."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import (
    FieldError,
    InvalidMigration,
    InvalidVM,
    InvalidVMI,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)
from shared.model.validation import (
    ValidationLimits,
    require_valid_migration,
    require_valid_vm,
    require_valid_vmi,
    validate_migration,
    validate_vm,
    validate_vmi,
)
from tests.unit.shared._validation_support import (
    CI,
    DELETE,
    DISKS,
    IFACES,
    MI,
    VOLS,
    edit,
    load,
    messages_at,
    vmi_errors,
)


def test_valid_examples_have_no_errors() -> None:
    """The realistic fixtures validate cleanly."""
    assert validate_vmi(VirtualMachineInstance.from_dict(load("vmi-running.yaml"))) == []
    assert validate_vmi(VirtualMachineInstance.from_dict(load("vmi-kernel-boot.yaml"))) == []
    assert validate_vm(VirtualMachine.from_dict(load("vm-fedora.yaml"))) == []
    vmim = VirtualMachineInstanceMigration.from_dict(load("vmim.yaml"))
    assert validate_migration(vmim) == []


def test_multiline_user_data_is_not_a_control_character_problem() -> None:
    """Newlines and tabs in cloud-init user data are fine (it is a document)."""
    errors = vmi_errors({f"{CI}.userDataBase64": DELETE, f"{CI}.userData": "#cloud-config\n\tx"})
    assert errors == []


def test_field_error_carries_the_offending_value() -> None:
    """FieldError.value holds the rejected value where there is one."""
    [error] = vmi_errors({f"{DISKS}[0].disk.bus": "ide"})
    assert error == FieldError(path=f"{DISKS}[0].disk.bus", message=error.message, value="ide")


def test_custom_limits_apply() -> None:
    """ValidationLimits bounds memory, vCPUs and user-data size."""
    limits = ValidationLimits(
        min_memory=256 * MI, max_memory=512 * MI, max_vcpus=1, max_userdata_bytes=8
    )
    errors = vmi_errors({}, limits=limits)
    paths = {e.path for e in errors}
    assert "spec.domain.memory.guest" in paths
    assert "spec.domain.cpu" in paths
    assert f"{CI}.userDataBase64" in paths


def test_collects_all_problems_at_once() -> None:
    """One call reports every problem, each at its own path, not just the first."""
    changes = {
        "metadata.name": "Bad Name",
        "spec.domain.memory.guest": "-1",
        "spec.domain.cpu.sockets": 0,
        f"{DISKS}[0].disk.bus": "ide",
        f"{DISKS}[1].cdrom.bus": "virtio",
        f"{VOLS}[3].hostDisk.path": "../etc",
        f"{VOLS}[2].emptyDisk.capacity": 0,
        f"{CI}.userDataBase64": "!!",
        f"{IFACES}[0].model": "bogus",
        "spec.terminationGracePeriodSeconds": -5,
    }
    errors = vmi_errors(changes)
    expected = {
        "metadata.name",
        "spec.domain.memory.guest",
        "spec.domain.cpu.sockets",
        f"{DISKS}[0].disk.bus",
        f"{DISKS}[1].cdrom.bus",
        f"{VOLS}[3].hostDisk.path",
        f"{VOLS}[2].emptyDisk.capacity",
        f"{CI}.userDataBase64",
        f"{IFACES}[0].model",
        "spec.terminationGracePeriodSeconds",
    }
    assert expected <= {e.path for e in errors}


def test_require_valid_vmi_raises_typed_error_naming_fields() -> None:
    """require_valid_vmi raises InvalidVMI carrying every FieldError; its message names them."""
    vmi = VirtualMachineInstance.from_dict(
        edit(load("vmi-running.yaml"), {"spec.domain.cpu.sockets": 0, f"{DISKS}[0].bootOrder": 0})
    )
    with pytest.raises(InvalidVMI) as info:
        require_valid_vmi(vmi)
    assert info.value.errors == tuple(validate_vmi(vmi))
    assert "spec.domain.cpu.sockets" in str(info.value)
    assert f"{DISKS}[0].bootOrder" in str(info.value)
    assert "default/testvm" in str(info.value)
    require_valid_vmi(VirtualMachineInstance.from_dict(load("vmi-running.yaml")))


def test_vm_template_is_validated_under_its_path() -> None:
    """VM template problems are reported under spec.template.spec."""
    vm = VirtualMachine.from_dict(
        edit(load("vm-fedora.yaml"), {"spec.template.spec.domain.devices.disks[0].disk.bus": "x"})
    )
    paths = [e.path for e in validate_vm(vm)]
    assert paths == ["spec.template.spec.domain.devices.disks[0].disk.bus"]


@pytest.mark.parametrize(
    ("changes", "path", "fragment"),
    [
        pytest.param(
            {"spec.running": True},
            "spec.running",
            "mutually exclusive",
            id="running-and-run-strategy",
        ),
        pytest.param({"metadata.name": "VM"}, "metadata.name", "DNS-1123", id="vm-name"),
        pytest.param(
            {"spec.template.metadata.labels.x": "\x00"},
            "spec.template.metadata.labels.x",
            "control",
            id="template-label-nul",
        ),
        pytest.param(
            {"spec.template.spec.domain.resources.requests.memory": "0"},
            "spec.template.spec.domain.resources.requests.memory",
            "greater than 0",
            id="template-memory",
        ),
    ],
)
def test_vm_rules(changes: dict[str, Any], path: str, fragment: str) -> None:
    """VM-level rules: run strategy exclusivity, name, and template contents."""
    vm = VirtualMachine.from_dict(edit(load("vm-fedora.yaml"), changes))
    errors = validate_vm(vm)
    assert any(fragment in m for m in messages_at(errors, path)), [str(e) for e in errors]
    with pytest.raises(InvalidVM):
        require_valid_vm(vm)


def test_vm_with_generate_name_only_is_valid() -> None:
    """A VM (or migration) may be created with generateName instead of name."""
    vm = VirtualMachine.from_dict(
        edit(load("vm-fedora.yaml"), {"metadata.name": DELETE, "metadata.generateName": "vm-"})
    )
    assert validate_vm(vm) == []


@pytest.mark.parametrize(
    ("changes", "path", "fragment"),
    [
        pytest.param({"spec.vmiName": DELETE}, "spec.vmiName", "is required", id="no-vmi-name"),
        pytest.param({"spec.vmiName": "a/b"}, "spec.vmiName", "DNS-1123", id="bad-vmi-name"),
        pytest.param(
            {"metadata.name": DELETE, "metadata.generateName": DELETE},
            "metadata.name",
            "is required",
            id="no-name-no-generate-name",
        ),
    ],
)
def test_migration_rules(changes: dict[str, Any], path: str, fragment: str) -> None:
    """A migration must name a valid VMI and have a name (or generateName)."""
    vmim = VirtualMachineInstanceMigration.from_dict(edit(load("vmim.yaml"), changes))
    errors = validate_migration(vmim)
    assert any(fragment in m for m in messages_at(errors, path)), [str(e) for e in errors]
    with pytest.raises(InvalidMigration):
        require_valid_migration(vmim)


def test_migration_with_generate_name_only_is_valid() -> None:
    """virtctl migrate creates migrations with generateName; that is valid."""
    vmim = VirtualMachineInstanceMigration.from_dict(
        edit(load("vmim.yaml"), {"metadata.name": DELETE})
    )
    assert validate_migration(vmim) == []
