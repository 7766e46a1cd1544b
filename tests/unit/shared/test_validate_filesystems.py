"""Admission's rules for devices.filesystems (shared/model/_validate_filesystems.py): each
bad value refused naming its field; a ConfigMap and a claim shared by virtiofs pass and are
no longer "not supported"."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.unsupported import unsupported_fields
from shared.model.validation import validate_vmi

FS = "spec.domain.devices.filesystems"


def _vmi(filesystems: list[Any], volumes: list[Any], disks: list[Any] | None = None) -> Any:
    raw = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {
            "domain": {
                "memory": {"guest": "128Mi"},
                "devices": {"filesystems": filesystems, "disks": disks or []},
            },
            "volumes": volumes,
        },
    }
    return VirtualMachineInstance.from_dict(raw)


GOOD = [
    {"name": "cfg", "configMap": {"name": "c"}},
    {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
]


def test_configmap_and_claim_shares_pass() -> None:
    """Two virtiofs shares of a ConfigMap and a claim: valid, nothing unsupported."""
    vmi = _vmi([{"name": "cfg", "virtiofs": {}}, {"name": "data", "virtiofs": {}}], GOOD)
    assert validate_vmi(vmi) == []
    assert unsupported_fields(vmi) == []


@pytest.mark.parametrize(
    ("filesystems", "volumes", "disks", "path", "words"),
    [
        pytest.param([{"name": "cfg"}], GOOD[:1], None, f"{FS}[0].virtiofs", "required",
                     id="no-virtiofs"),
        pytest.param([{"name": "nope", "virtiofs": {}}], GOOD[:1], [{"name": "cfg"}],
                     f"{FS}[0].name", "no volume", id="no-volume"),
        pytest.param([{"name": "x" * 37, "virtiofs": {}}], [{"name": "x" * 37, "configMap": {}}],
                     None, f"{FS}[0].name", "36 bytes", id="tag-too-long"),
        pytest.param([{"name": "e", "virtiofs": {}}], [{"name": "e", "emptyDisk":
                     {"capacity": "1Mi"}}], None, f"{FS}[0].name", "emptyDisk", id="emptydisk"),
        pytest.param([{"name": "cfg", "virtiofs": {}}], GOOD[:1], [{"name": "cfg"}],
                     f"{FS}[0].name", "disk's too", id="also-a-disk"),
        pytest.param([{"name": "h", "virtiofs": {}}], [{"name": "h", "persistentVolumeClaim":
                     {"claimName": "c", "hotpluggable": True}}], None, f"{FS}[0].name",
                     "hotpluggable", id="hotpluggable"),
        pytest.param([{"name": "cfg", "virtiofs": {}}, {"name": "cfg", "virtiofs": {}}],
                     GOOD[:1], None, f"{FS}[1].name", "", id="duplicate"),
    ],
)  # fmt: skip
def test_bad_filesystems_refused_naming_the_field(
    filesystems: list[Any], volumes: list[Any], disks: list[Any] | None, path: str, words: str
) -> None:
    """Each bad filesystems[] entry is refused at its path, saying why."""
    errors = validate_vmi(_vmi(filesystems, volumes, disks))
    assert any(e.path == path and words in e.message for e in errors), errors


def test_a_shared_volume_counts_as_used() -> None:
    """A volume used only by a filesystem is not "used by no disk"."""
    vmi = _vmi([{"name": "cfg", "virtiofs": {}}], GOOD[:1])
    assert not [e for e in validate_vmi(vmi) if e.path.startswith("spec.volumes")]
