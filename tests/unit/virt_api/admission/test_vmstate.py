"""Persistent TPM / EFI at admission: validated like any field (bad values named), and
refused naming the field while the KubeVirt CR sets no vmStateStorageClass."""

from __future__ import annotations

from typing import Any

import pytest

from shared.clusterconfig import ClusterConfig
from shared.model.validation import ValidationLimits
from tests.unit.virt_api.admission.test_defaults import demo_vmi
from virt_api.admission.validate import validate
from virt_api.admission.vmstate import state_errors

TCG = ValidationLimits(emulation=True)
CLASS = ClusterConfig(vm_state_storage_class="shared-storage")
TPM_PATH = "spec.domain.devices.tpm.persistent"
EFI_PATH = "spec.domain.firmware.bootloader.efi.persistent"


def _vmi(*, tpm: Any = None, efi: Any = None) -> dict[str, Any]:
    obj = demo_vmi()
    obj["spec"]["domain"]["devices"] = {"disks": [{"name": "containerdisk", "disk": {}}]}
    if tpm is not None:
        obj["spec"]["domain"]["devices"]["tpm"] = tpm
    if efi is not None:
        obj["spec"]["domain"]["firmware"] = {"bootloader": {"efi": efi}}
        obj["spec"]["domain"]["features"] = {"smm": {"enabled": True}}
        obj["spec"]["domain"]["machine"] = {"type": "q35"}
    return obj


def _vm(vmi: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "tiny", "namespace": "default"},
            "spec": {"template": {"spec": vmi["spec"]}}}  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        pytest.param(_vmi(tpm={"persistent": "yes"}), TPM_PATH, id="tpm-str"),
        pytest.param(_vmi(tpm={"persistent": 1}), TPM_PATH, id="tpm-int"),
        pytest.param(_vmi(efi={"persistent": "true"}), EFI_PATH, id="efi-str"),
        pytest.param(
            _vmi(efi={"persistent": None, "x": 1}),
            "spec.domain.firmware.bootloader.efi.x",
            id="efi-unknown-key",
        ),
    ],
)
def test_bad_persistent_values_are_refused_naming_the_field(obj: Any, path: str) -> None:
    """A persistent that is not a boolean is refused, naming the field."""
    assert path in [e.path for e in validate("VirtualMachineInstance", obj, limits=TCG)]


@pytest.mark.parametrize(
    ("kind", "obj", "paths"),
    [
        pytest.param(
            "VirtualMachineInstance", _vmi(tpm={"persistent": True}), [TPM_PATH], id="vmi-tpm"
        ),
        pytest.param(
            "VirtualMachineInstance", _vmi(efi={"persistent": True}), [EFI_PATH], id="vmi-efi"
        ),
        pytest.param(
            "VirtualMachine",
            _vm(_vmi(tpm={"persistent": True}, efi={"persistent": True})),
            [f"spec.template.{TPM_PATH}", f"spec.template.{EFI_PATH}"],
            id="vm-both",
        ),
    ],
)
def test_persistent_state_without_a_class_is_refused_naming_the_field(
    kind: str, obj: dict[str, Any], paths: list[str]
) -> None:
    """Without vmStateStorageClass each persistent field is refused, named, with a message
    naming the KubeVirt CR's field; with it set, nothing is refused."""
    errors = state_errors(kind, obj, ClusterConfig())
    assert [e.path for e in errors] == paths
    assert all("spec.configuration.vmStateStorageClass" in e.message for e in errors)
    assert state_errors(kind, obj, CLASS) == []
    assert validate(kind, obj, limits=TCG) == []


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(_vmi(tpm={"persistent": False}), id="tpm-not-persistent"),
        pytest.param(_vmi(tpm={"persistent": True, "enabled": False}), id="tpm-disabled"),
        pytest.param(_vmi(efi={"persistent": False}), id="efi-not-persistent"),
        pytest.param(_vmi(), id="neither"),
    ],
)
def test_no_persistent_state_needs_no_class(obj: dict[str, Any]) -> None:
    """Without a persistent TPM or EFI the class is not needed."""
    assert state_errors("VirtualMachineInstance", obj, ClusterConfig()) == []
