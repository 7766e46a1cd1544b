"""Instancetypes and preferences: expansion of the VM's VMI, conflicts refused at
admission (each field named), admission's defaults leaving the instancetype's and the
preference's fields alone, and the revisions the VM controller captures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from controller.errors import SyncError
from controller.vm.vmibody import vmi_from_template
from shared.expansion import CONTROLLER_REVISIONS, RESOURCES, expand_spec
from shared.instancetypes.target import CONFLICT
from shared.kube import VMS, NotFound, PatchType, Resource
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.instancetype import InstancetypeSpec, PreferenceSpec
from shared.model.validation import validate_vmi
from shared.revisions import expansion
from virt_api.admission.defaults import Defaults, mutate
from virt_api.admission.validate import validate

IT = InstancetypeSpec.from_dict({"cpu": {"guest": 2}, "memory": {"guest": "256Mi"}})
PREF = PreferenceSpec.from_dict(
    {
        "devices": {
            "preferredDiskBus": "sata",
            "preferredCdromBus": "scsi",
            "preferredInterfaceModel": "e1000",
        },
        "machine": {"preferredMachineType": "q35"},
    }
)


def vm_dict(**spec: Any) -> dict[str, Any]:
    template = {
        "domain": {
            "devices": {
                "disks": [
                    {"name": "root"},
                    {"name": "data", "disk": {"bus": "virtio"}},
                    {"name": "iso", "cdrom": {}},
                ],
                "interfaces": [{"name": "default", "masquerade": {}}],
            }
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [
            {"name": "root", "containerDisk": {"image": "registry.local/g:v1"}},
            {"name": "data", "emptyDisk": {"capacity": "1Gi"}},
            {"name": "iso", "emptyDisk": {"capacity": "1Gi"}},
        ],
    }
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": "ns", "uid": "vm-uid"},
        "spec": {"runStrategy": "Always", "template": {"spec": template}, **spec},
    }


def test_instancetype_gives_cpu_as_sockets_and_guest_memory() -> None:
    """cpu.guest becomes sockets (cores = threads = 1), memory.guest is copied."""
    spec = expand_spec({"domain": {}}, instancetype=IT, preference=None)
    assert spec["domain"]["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}
    assert spec["domain"]["memory"] == {"guest": "256Mi"}


def test_preference_fills_only_what_the_template_left_unset() -> None:
    """Preferred buses, interface model and machine type; the template's own values win."""
    template = VirtualMachine.from_dict(vm_dict()).spec.template.spec.to_dict()
    spec = expand_spec(template, instancetype=None, preference=PREF)
    disks = spec["domain"]["devices"]["disks"]
    assert disks[0] == {"name": "root", "disk": {"bus": "sata"}}
    assert disks[1]["disk"] == {"bus": "virtio"}
    assert disks[2]["cdrom"] == {"bus": "scsi"}
    assert spec["domain"]["devices"]["interfaces"][0]["model"] == "e1000"
    assert spec["domain"]["machine"] == {"type": "q35"}
    pinned = dict(template, domain={**template["domain"], "machine": {"type": "pc"}})
    assert expand_spec(pinned, instancetype=None, preference=PREF)["domain"]["machine"] == {
        "type": "pc"
    }


def test_vmi_from_template_is_expanded_and_valid() -> None:
    """The VMI a VM with both creates carries the instancetype's sizing and validates."""
    vm = VirtualMachine.from_dict(vm_dict(instancetype={"name": "u1"}, preference={"name": "p"}))
    body = vmi_from_template(vm, instancetype=IT, preference=PREF)
    vmi = VirtualMachineInstance.from_dict(body)
    assert vmi.spec.domain.vcpus() == 2 and vmi.spec.domain.guest_memory() == "256Mi"
    assert validate_vmi(vmi) == []


def test_conflicts_are_refused_naming_each_field() -> None:
    """A template setting the CPU topology or memory next to an instancetype is refused."""
    obj = vm_dict(instancetype={"name": "u1"})
    domain = obj["spec"]["template"]["spec"]["domain"]
    domain["cpu"] = {"sockets": 2, "threads": 1}
    domain["memory"] = {"guest": "128Mi"}
    domain["resources"] = {"requests": {"memory": "128Mi"}}
    errors = validate("VirtualMachine", obj)
    paths = [
        "spec.template.spec.domain.cpu.sockets",
        "spec.template.spec.domain.cpu.threads",
        "spec.template.spec.domain.memory.guest",
        "spec.template.spec.domain.resources.requests.memory",
    ]
    assert [(e.path, e.message) for e in errors] == [
        (path, f"VM field(s) {path} {CONFLICT}") for path in paths
    ]


def test_vm_with_instancetype_needs_no_memory_and_admits_after_defaulting() -> None:
    """Defaults leave CPU, memory, buses and machine type to the instancetype and preference,
    so the defaulted VM passes validation; a wrong matcher kind is named."""
    obj = vm_dict(instancetype={"name": "u1"}, preference={"name": "p"})
    [patch] = mutate("VirtualMachine", obj, Defaults())
    defaulted = {**obj, "spec": patch["value"]}
    domain = defaulted["spec"]["template"]["spec"]["domain"]
    assert "cpu" not in domain and "memory" not in domain and "machine" not in domain
    assert domain["devices"]["disks"][0] == {"name": "root", "disk": {}}
    assert validate("VirtualMachine", defaulted) == []
    lower = vm_dict(instancetype={"name": "u1", "kind": "virtualmachineinstancetypes"})
    assert validate("VirtualMachine", lower) == []  # kinds match as KubeVirt's do
    bad = vm_dict(instancetype={"name": "u1", "kind": "VirtualMachinePreference"})
    assert [e.path for e in validate("VirtualMachine", bad)] == ["spec.instancetype.kind"]
    assert [e.path for e in validate("VirtualMachine", vm_dict())] == [
        "spec.template.spec.domain.resources.requests.memory"
    ]


class FakeClient:
    """Objects by (plural, name); records creates and patches."""

    def __init__(self, objects: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = dict(objects)
        self.created: list[dict[str, Any]] = []
        self.patches: list[Mapping[str, Any]] = []

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        try:
            return dict(self.objects[(resource.plural, name)])
        except KeyError:
            raise NotFound(404, "NotFound", f"{resource.plural}/{name}") from None

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        assert resource == CONTROLLER_REVISIONS
        self.created.append(dict(body))
        self.objects[(resource.plural, body["metadata"]["name"])] = dict(body)
        return dict(body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        assert resource == VMS and name == "vm1" and isinstance(patch, Mapping)
        self.patches.append(patch)
        return {}


def _object(kind: str, name: str, spec: Any) -> dict[str, Any]:
    meta = {"name": name, "uid": f"{name}-uid", "generation": 1}
    return {"kind": kind, "metadata": meta, "spec": spec.to_dict()}


async def test_first_vmi_captures_revisions_later_ones_read_them() -> None:
    """The objects are stored in ControllerRevisions named in the VM; a VM naming its
    revisions reads them, not the (possibly edited) instancetype."""
    it = _object("VirtualMachineClusterInstancetype", "u1", IT)
    pref = _object("VirtualMachinePreference", "p", PREF)
    client = FakeClient(
        {
            (RESOURCES["VirtualMachineClusterInstancetype"].plural, "u1"): it,
            (RESOURCES["VirtualMachinePreference"].plural, "p"): pref,
        }
    )
    vm = VirtualMachine.from_dict(
        vm_dict(instancetype={"name": "u1"}, preference={"name": "p", "kind": pref["kind"]})
    )
    exp = await expansion(client, vm)
    assert exp.instancetype == IT and exp.preference == PREF
    names = [c["metadata"]["name"] for c in client.created]
    assert names == [
        "vm1-virtualmachineclusterinstancetype-u1-u1-uid-1",
        "vm1-virtualmachinepreference-p-p-uid-1",
    ]
    assert client.patches == [
        {
            "spec": {
                "instancetype": {"revisionName": names[0]},
                "preference": {"revisionName": names[1]},
            }
        }
    ]
    # The instancetype is edited; the VM, now naming its revisions, keeps the captured one.
    client.objects[(RESOURCES["VirtualMachineClusterInstancetype"].plural, "u1")] = {}
    pinned = VirtualMachine.from_dict(
        vm_dict(instancetype={"name": "u1", "revisionName": names[0]})
    )
    assert (await expansion(client, pinned)).instancetype == IT
    assert len(client.patches) == 1


async def test_missing_instancetype_is_a_sync_error_naming_it() -> None:
    """No such instancetype: the VMI is not created, the error names the VM's field."""
    vm = VirtualMachine.from_dict(vm_dict(instancetype={"name": "nope"}))
    with pytest.raises(
        SyncError, match=r"spec\.instancetype: VirtualMachineClusterInstancetype 'nope' not found"
    ):
        await expansion(FakeClient({}), vm)
