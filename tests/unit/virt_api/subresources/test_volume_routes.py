"""…/{virtualmachineinstances,virtualmachines}/<name>/{addvolume,removevolume}: reviewed,
refused with the volume or claim named, or written as a JSON patch of the spec."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.kube import Invalid, NotFound, PatchType, Resource
from tests.unit.virt_api.subresources.fakes import FakeAuthorizer, deps, proxied
from virt_api.subresources.app import build_app

BASE = "/apis/subresources.kubevirt.io/v1/namespaces/ns1"
VMI_PATH = f"{BASE}/virtualmachineinstances/vm1"
VM_PATH = f"{BASE}/virtualmachines/vm1"
ADD = {
    "name": "data",
    "disk": {"name": "data", "serial": "data", "disk": {"bus": "scsi"}},
    "volumeSource": {"persistentVolumeClaim": {"claimName": "data", "hotpluggable": True}},
}
SCRATCH = {"name": "scratch", "emptyDisk": {"capacity": "16Mi"}}
HOTPLUGGED = {"name": "data", "persistentVolumeClaim": {"claimName": "data", "hotpluggable": True}}


def _spec(*volumes: dict[str, Any]) -> dict[str, Any]:
    disks = [{"name": v["name"], "disk": {"bus": "virtio"}} for v in volumes]
    return {"domain": {"devices": {"disks": disks}}, "volumes": list(volumes)}


class FakeKube:
    """Objects by (plural, name); patches recorded; `refuse` makes patches Invalid."""

    def __init__(self, objects: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = dict(objects)
        self.patches: list[tuple[str, list[dict[str, Any]]]] = []
        self.refuse = False

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        try:
            return self.objects[(resource.plural, name)]
        except KeyError:
            raise NotFound(404, "NotFound", f"{resource.plural} {name} not found") from None

    async def patch(
        self, resource: Resource, name: str, patch: Any, *, namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE, subresource: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        assert patch_type is PatchType.JSON
        if self.refuse:
            raise Invalid(422, "Invalid", "test failed")
        self.patches.append((resource.plural, patch))
        return {}

    async def create(self, *_a: Any, **_k: Any) -> dict[str, Any]:
        raise AssertionError("no creates")

    async def list(self, *_a: Any, **_k: Any) -> Any:
        raise AssertionError("no lists")

    async def delete(self, *_a: Any, **_k: Any) -> dict[str, Any]:
        raise AssertionError("no deletes")


def _kube(*volumes: dict[str, Any], claim: bool = True, vm: bool = False) -> FakeKube:
    objects: dict[tuple[str, str], dict[str, Any]] = {
        ("virtualmachineinstances", "vm1"): {
            "spec": _spec(*volumes),
            "status": {"phase": "Running"},
        }
    }
    if claim:
        objects[("persistentvolumeclaims", "data")] = {"metadata": {"name": "data"}}
    if vm:
        objects[("virtualmachines", "vm1")] = {"spec": {"template": {"spec": _spec(*volumes)}}}
    return FakeKube(objects)


async def _put(
    kube: FakeKube, path: str, body: Any, authorizer: FakeAuthorizer | None = None
) -> Any:
    app_deps = dataclasses.replace(deps(authorizer=authorizer), volumes=kube)
    app: web.Application = build_app(app_deps)
    async with TestClient(TestServer(app)) as client:
        resp = await client.put(path, headers=proxied("alice"), data=json.dumps(body))
        text = await resp.text()
    return resp.status, json.loads(text) if text else None


async def test_addvolume_on_a_vmi_patches_its_spec() -> None:
    """PUT addvolume on a VMI: reviewed as `update virtualmachineinstances/addvolume`, 202,
    and one JSON patch testing the lists, then appending the hotpluggable volume and disk."""
    kube, authorizer = _kube(SCRATCH), FakeAuthorizer()
    status, _ = await _put(kube, f"{VMI_PATH}/addvolume", ADD, authorizer)
    assert status == 202
    ((_, attrs),) = authorizer.reviews
    assert (attrs.resource, attrs.subresource, attrs.verb) == (
        "virtualmachineinstances", "addvolume", "update",
    )  # fmt: skip
    ((plural, ops),) = kube.patches
    assert plural == "virtualmachineinstances"
    assert [op["op"] for op in ops] == ["test", "test", "add", "add"]
    assert ops[2] == {"op": "add", "path": "/spec/volumes/-", "value": HOTPLUGGED}
    assert ops[3]["path"] == "/spec/domain/devices/disks/-"
    assert ops[3]["value"] == {"name": "data", "serial": "data", "disk": {"bus": "scsi"}}


async def test_bad_requests_name_the_volume_or_claim() -> None:
    """A claim that does not exist, a volume name taken, a non-hotpluggable or missing
    volume to remove, an unpluggable bus: 400 naming it, nothing written."""
    cases = [
        (_kube(SCRATCH, claim=False), "addvolume", ADD, "PersistentVolumeClaim ns1/data does not exist"),
        (_kube(HOTPLUGGED), "addvolume", ADD,
         "Unable to add volume [data] because volume with that name already exists"),
        (_kube(SCRATCH), "removevolume", {"name": "scratch"},
         "Unable to remove volume [scratch] because it is not hotpluggable"),
        (_kube(SCRATCH), "removevolume", {"name": "gone"},
         "Unable to remove volume [gone] because it does not exist"),
        (_kube(SCRATCH), "addvolume", {**ADD, "disk": {"disk": {"bus": "sata"}}},
         "volume 'data': bus 'sata' cannot be hotplugged (one of: scsi, virtio)"),
        (_kube(SCRATCH), "addvolume", {"name": "data"}, "AddVolumeOptions requires volumeSource to be set"),
        (_kube(SCRATCH), "removevolume", {}, "RemoveVolumeOptions requires name to be set"),
    ]  # fmt: skip
    for kube, action, body, message in cases:
        status, answer = await _put(kube, f"{VMI_PATH}/{action}", body)
        assert (status, answer["message"]) == (400, message)
        assert kube.patches == []


async def test_removevolume_removes_volume_and_disk() -> None:
    """removevolume of a hotplugged volume: its volume and its disk removed by index."""
    kube = _kube(SCRATCH, HOTPLUGGED)
    status, _ = await _put(kube, f"{VMI_PATH}/removevolume", {"name": "data"})
    assert status == 202
    ((_, ops),) = kube.patches
    assert ops[2:] == [
        {"op": "remove", "path": "/spec/volumes/1"},
        {"op": "remove", "path": "/spec/domain/devices/disks/1"},
    ]


async def test_vm_form_changes_the_template() -> None:
    """addvolume on a VM (virtctl --persist): the template (the VM controller makes the
    running VMI follow)."""
    kube = _kube(SCRATCH, vm=True)
    status, _ = await _put(kube, f"{VM_PATH}/addvolume", ADD)
    assert status == 202
    assert [(plural, ops[-2]["path"]) for plural, ops in kube.patches] == [
        ("virtualmachines", "/spec/template/spec/volumes/-"),
    ]


async def test_a_concurrent_change_is_a_conflict() -> None:
    """The `test` op failing (someone changed the lists meanwhile): 409."""
    kube = _kube(SCRATCH)
    kube.refuse = True
    status, answer = await _put(kube, f"{VMI_PATH}/addvolume", ADD)
    assert (status, answer["reason"]) == (409, "Conflict")


async def test_dry_run_writes_nothing() -> None:
    """dryRun: ["All"]: checked and answered 202, not written."""
    kube = _kube(SCRATCH)
    status, _ = await _put(kube, f"{VMI_PATH}/addvolume", {**ADD, "dryRun": ["All"]})
    assert status == 202
    assert kube.patches == []


ADD_DV = {
    "name": "dv1",
    "disk": {"name": "dv1", "disk": {"bus": "scsi"}},
    "volumeSource": {"dataVolume": {"name": "dv1", "hotpluggable": True}},
}
HOTPLUGGED_DV = {"name": "dv1", "dataVolume": {"name": "dv1", "hotpluggable": True}}


async def test_addvolume_of_a_datavolume_adds_a_datavolume_volume() -> None:
    """A dataVolume source: the DataVolume must exist, the volume is added as a hotpluggable
    dataVolume (the VMI controller attaches its claim once it Succeeded); on the VMI and,
    with --persist, on the VM's template."""
    kube = _kube(SCRATCH, vm=True)
    kube.objects[("datavolumes", "dv1")] = {"metadata": {"name": "dv1"}}
    for path, plural in ((VMI_PATH, "virtualmachineinstances"), (VM_PATH, "virtualmachines")):
        status, _ = await _put(kube, f"{path}/addvolume", ADD_DV)
        assert status == 202
        (got, ops) = kube.patches[-1]
        assert got == plural
        assert ops[-2]["value"] == HOTPLUGGED_DV


async def test_removevolume_of_a_hotplugged_datavolume() -> None:
    """A hotpluggable dataVolume volume is removed with its disk, like a claim's."""
    kube = _kube(SCRATCH, HOTPLUGGED_DV)
    status, _ = await _put(kube, f"{VMI_PATH}/removevolume", {"name": "dv1"})
    assert status == 202
    ((_, ops),) = kube.patches
    assert ops[-2:] == [
        {"op": "remove", "path": "/spec/volumes/1"},
        {"op": "remove", "path": "/spec/domain/devices/disks/1"},
    ]


async def test_bad_datavolume_requests_name_it() -> None:
    """A DataVolume that does not exist, one already used by a volume, a dataVolume
    without a name, two sources, an unknown source: 400 naming it, nothing written."""
    used = {"name": "other", "dataVolume": {"name": "dv1", "hotpluggable": True}}
    two = {"dataVolume": {"name": "dv1"}, "persistentVolumeClaim": {"claimName": "data"}}
    cases = [
        (_kube(SCRATCH), ADD_DV, "DataVolume ns1/dv1 does not exist"),
        (_kube(SCRATCH, used), ADD_DV,
         "Unable to add volume source [dv1] because it is already used by volume [other]"),
        (_kube(SCRATCH), {**ADD_DV, "volumeSource": {"dataVolume": {}}},
         "volume 'dv1': volumeSource.dataVolume.name must be set"),
        (_kube(SCRATCH), {**ADD_DV, "volumeSource": two},
         "volume 'dv1': volumeSource must set exactly one of persistentVolumeClaim, "
         "dataVolume (got dataVolume, persistentVolumeClaim)"),
        (_kube(SCRATCH), {**ADD_DV, "volumeSource": {"emptyDisk": {}}},
         "volume 'dv1': volumeSource must set exactly one of persistentVolumeClaim, "
         "dataVolume (got emptyDisk)"),
    ]  # fmt: skip
    for kube, body, message in cases:
        if "already used" in message:
            kube.objects[("datavolumes", "dv1")] = {"metadata": {"name": "dv1"}}
        status, answer = await _put(kube, f"{VMI_PATH}/addvolume", body)
        assert (status, answer["message"]) == (400, message)
        assert kube.patches == []
