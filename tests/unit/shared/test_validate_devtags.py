"""Admission's rules for `lun` disks, device `tag`s and hostDisk `shared`: each bad value
refused naming its field (shared/model/_validate_devtags.py, the model's codec); a scsi lun
on a claim and tagged devices pass, and lun.reservation stays "not supported"."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.errors import ModelError
from shared.model.unsupported import unsupported_fields
from shared.model.validation import validate_vmi

D = "spec.domain.devices"


def _vmi(disk: dict[str, Any], volume: dict[str, Any], iface_tag: Any = None) -> Any:
    iface: dict[str, Any] = {"name": "default", "masquerade": {}}
    if iface_tag is not None:
        iface["tag"] = iface_tag
    raw = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {
            "domain": {
                "memory": {"guest": "128Mi"},
                "devices": {"disks": [{"name": "d", **disk}], "interfaces": [iface]},
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [{"name": "d", **volume}],
        },
    }
    return VirtualMachineInstance.from_dict(raw)


CLAIM = {"persistentVolumeClaim": {"claimName": "san"}}


def test_a_scsi_lun_and_tags_pass() -> None:
    """lun on scsi of a claim, a disk tag and an interface tag: valid and supported."""
    vmi = _vmi({"lun": {"bus": "scsi"}, "tag": "database"}, CLAIM, iface_tag="frontend")
    assert validate_vmi(vmi) == []
    assert unsupported_fields(vmi) == []


@pytest.mark.parametrize(
    ("disk", "volume", "iface_tag", "path"),
    [
        pytest.param({"lun": {"bus": "sata"}}, CLAIM, None, f"{D}.disks[0].lun.bus", id="lun-sata"),
        pytest.param({"lun": {"bus": "virtio"}}, CLAIM, None, f"{D}.disks[0].lun.bus",
                     id="lun-virtio"),
        pytest.param({"lun": {}}, {"containerDisk": {"image": "i"}}, None, f"{D}.disks[0].lun",
                     id="lun-containerdisk"),
        pytest.param({"lun": {}}, {"persistentVolumeClaim": {"claimName": "c",
                     "hotpluggable": True}}, None, f"{D}.disks[0].lun", id="lun-hotplug"),
        pytest.param({"lun": {}, "disk": {}}, CLAIM, None, f"{D}.disks[0]", id="lun-and-disk"),
        pytest.param({"disk": {}, "tag": ""}, CLAIM, None, f"{D}.disks[0].tag", id="empty-tag"),
        pytest.param({"disk": {}, "tag": "a b"}, CLAIM, None, f"{D}.disks[0].tag",
                     id="spaced-tag"),
        pytest.param({"disk": {}}, CLAIM, "x" * 256, f"{D}.interfaces[0].tag", id="long-tag"),
    ],
)  # fmt: skip
def test_bad_values_refused_naming_the_field(
    disk: dict[str, Any], volume: dict[str, Any], iface_tag: Any, path: str
) -> None:
    """Each bad lun or tag is refused at its path."""
    errors = validate_vmi(_vmi(disk, volume, iface_tag))
    assert path in [e.path for e in errors], errors


def test_lun_reservation_stays_refused() -> None:
    """lun.reservation (persistent reservations) is refused as not supported, named."""
    vmi = _vmi({"lun": {"reservation": True}}, CLAIM)
    assert [e.path for e in unsupported_fields(vmi)] == [f"{D}.disks[0].lun.reservation"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("shared", "yes"), ("shared", 1)],
)
def test_host_disk_shared_must_be_a_bool(field: str, value: Any) -> None:
    """hostDisk.shared of another type is refused naming the field."""
    source = {"path": "/d/disk.img", "type": "Disk", field: value}
    with pytest.raises(ModelError, match=r"spec\.volumes\[0\]\.hostDisk\.shared"):
        _vmi({"disk": {}}, {"hostDisk": source})


def test_tags_are_not_typed_wrong() -> None:
    """A tag that is not a string is refused naming the field."""
    with pytest.raises(ModelError, match=r"disks\[0\]\.tag"):
        _vmi({"disk": {}, "tag": 5}, CLAIM)
