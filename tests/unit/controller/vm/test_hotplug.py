"""Declarative hotplug: a running VMI follows its VM template's hotpluggable volumes (added
with the template's disk, recorded; removed when the template drops one it recorded),
and leaves alone what was hot-plugged into the VMI alone."""

from __future__ import annotations

import json
from typing import Any

from controller.vm.hotplug import FROM_TEMPLATE, template_ops
from controller.vm.vmibody import vmi_from_template
from shared.model import VirtualMachine, VirtualMachineInstance

DATA = {"name": "data", "persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}}
SOLO = {"name": "solo", "persistentVolumeClaim": {"claimName": "s", "hotpluggable": True}}
DISK = {"name": "data", "disk": {"bus": "virtio"}, "serial": "d1"}


def _vm(*volumes: dict[str, Any]) -> VirtualMachine:
    disks = [DISK] if any(v["name"] == "data" for v in volumes) else []
    spec = {"domain": {"devices": {"disks": disks}}, "volumes": list(volumes)}
    return VirtualMachine.from_dict(
        {"metadata": {"name": "vm"}, "spec": {"template": {"spec": spec}}}
    )


def _vmi(
    *volumes: dict[str, Any], recorded: list[str] | None = None, phase: str = "Running"
) -> VirtualMachineInstance:
    disks = [{"name": v["name"], "disk": {"bus": "scsi"}} for v in volumes]
    meta: dict[str, Any] = {"name": "vm"}
    if recorded is not None:
        meta["annotations"] = {FROM_TEMPLATE: json.dumps(recorded)}
    return VirtualMachineInstance.from_dict({
        "metadata": meta,
        "spec": {"domain": {"devices": {"disks": disks}}, "volumes": list(volumes)},
        "status": {"phase": phase},
    })  # fmt: skip


def _value(ops: list[dict[str, Any]], path: str) -> Any:
    return next(op["value"] for op in ops if op["op"] != "test" and op["path"] == path)


def test_template_volume_is_added_with_its_disk_and_recorded() -> None:
    """Added to the template while running: the VMI gets the volume, the template's disk
    (its bus and serial), and the name recorded; lists tested first."""
    ops = template_ops(_vm(DATA), _vmi())
    assert ops[0] == {"op": "test", "path": "/spec/volumes", "value": []}
    assert _value(ops, "/spec/volumes") == [DATA]
    assert _value(ops, "/spec/domain/devices/disks") == [DISK]
    assert _value(ops, "/metadata/annotations") == {FROM_TEMPLATE: '["data"]'}


def test_removed_from_the_template_is_removed_from_the_vmi() -> None:
    """Dropped from the template: a recorded volume leaves the VMI (and the record)."""
    ops = template_ops(_vm(), _vmi(DATA, recorded=["data"]))
    assert _value(ops, "/spec/volumes") == []
    assert _value(ops, "/spec/domain/devices/disks") == []
    assert _value(ops, "/metadata/annotations/kubevirt-py.io~1hotplug-from-template") == "[]"


def test_vmi_only_volumes_and_settled_vmis_are_left_alone() -> None:
    """A volume plugged into the VMI alone stays; a VMI that matches, or is not Running,
    needs no patch."""
    assert template_ops(_vm(), _vmi(SOLO)) == []
    assert template_ops(_vm(DATA), _vmi(DATA, recorded=["data"])) == []
    assert template_ops(_vm(DATA), _vmi(phase="Scheduled")) == []


CDROM = {"name": "cd", "cdrom": {"bus": "sata"}}
MEDIA = {"name": "cd", "dataVolume": {"name": "iso", "hotpluggable": True}}


def _cd_vm(*volumes: dict[str, Any]) -> VirtualMachine:
    spec = {"domain": {"devices": {"disks": [CDROM]}}, "volumes": list(volumes)}
    return VirtualMachine.from_dict(
        {"metadata": {"name": "vm"}, "spec": {"template": {"spec": spec}}}
    )


def _cd_vmi(*volumes: dict[str, Any], recorded: list[str]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "annotations": {FROM_TEMPLATE: json.dumps(recorded)}},
        "spec": {"domain": {"devices": {"disks": [CDROM]}}, "volumes": list(volumes)},
        "status": {"phase": "Running"},
    })  # fmt: skip


def test_a_cdroms_volume_is_inserted_and_ejected_the_cdrom_staying() -> None:
    """An empty cdrom both declare: a hotpluggable volume for it added to the template
    reaches the VMI without a second disk (media inserted); dropped from the template, it
    leaves the VMI and the cdrom stays (ejected)."""
    inserted = template_ops(_cd_vm(MEDIA), _cd_vmi(recorded=[]))
    assert _value(inserted, "/spec/volumes") == [MEDIA]
    assert _value(inserted, "/spec/domain/devices/disks") == [CDROM]
    ejected = template_ops(_cd_vm(), _cd_vmi(MEDIA, recorded=["cd"]))
    assert _value(ejected, "/spec/volumes") == []
    assert _value(ejected, "/spec/domain/devices/disks") == [CDROM]


def test_a_vmi_started_with_template_media_can_eject_them() -> None:
    """The VMI a VM creates records the template's hotpluggable volumes (a cdrom's media
    at boot among them): dropping one from the template later ejects it live."""
    vm = _cd_vm(MEDIA)
    body = vmi_from_template(vm)
    assert body["metadata"]["annotations"] == {FROM_TEMPLATE: '["cd"]'}
    recorded = json.loads(body["metadata"]["annotations"][FROM_TEMPLATE])
    ejected = template_ops(_cd_vm(), _cd_vmi(MEDIA, recorded=recorded))
    assert _value(ejected, "/spec/volumes") == []
    assert vmi_from_template(_cd_vm())["metadata"]["annotations"] == {}
