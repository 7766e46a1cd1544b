"""devices.tpm at admission: `{}`, `enabled` and `persistent` are admitted by validation
(the state claim's class is checked in test_vmstate.py); bad values are refused naming the
field."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model.validation import ValidationLimits
from tests.unit.virt_api.admission.test_defaults import demo_vmi
from virt_api.admission.validate import validate

TCG = ValidationLimits(emulation=True)


def _vmi(tpm: Any) -> dict[str, Any]:
    obj = demo_vmi()
    disks = [{"name": "containerdisk", "disk": {"bus": "virtio"}}]
    obj["spec"]["domain"]["devices"] = {"disks": disks, "tpm": tpm}
    return obj


@pytest.mark.parametrize(
    "tpm",
    [
        pytest.param({}, id="empty"),
        pytest.param({"enabled": True}, id="enabled"),
        pytest.param({"enabled": False}, id="disabled"),
        pytest.param({"persistent": False}, id="not-persistent"),
        pytest.param({"persistent": True}, id="persistent"),
    ],
)
def test_tpm_is_admitted(tpm: dict[str, Any]) -> None:
    """A TPM, persistent or not, is honoured, so admitted by validation."""
    assert validate("VirtualMachineInstance", _vmi(tpm), limits=TCG) == []


@pytest.mark.parametrize(
    ("tpm", "path"),
    [
        pytest.param({"persistent": "yes"}, "spec.domain.devices.tpm.persistent", id="bad-bool"),
        pytest.param({"enabled": "yes"}, "spec.domain.devices.tpm.enabled", id="enabled-str"),
        pytest.param({"model": "tpm-crb"}, "spec.domain.devices.tpm.model", id="unknown-key"),
        pytest.param("on", "spec.domain.devices.tpm", id="not-an-object"),
    ],
)
def test_bad_tpm_is_refused_naming_the_field(tpm: Any, path: str) -> None:
    """Each bad value is refused, and the refusal names the field."""
    errors = validate("VirtualMachineInstance", _vmi(tpm), limits=TCG)
    assert [e.path for e in errors] == [path]
