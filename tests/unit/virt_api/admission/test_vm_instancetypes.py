"""A VM's instancetype and preference at VM admission, through the webhooks: both looked
up (a missing one named), the preference's requirements, conflicts, and the VMI the VM
would make refused naming the instancetype or preference field behind a value kubevirt-py
does not honour; inferFromVolume resolved at mutation from a claim's, a DataVolume's or a
dataVolumeTemplate's source claim's labels, with its failure policy."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.expansion import CONTROLLER_REVISIONS
from shared.kube import DATAVOLUMES, PVCS, Registry, Resource
from shared.model.validation import ValidationLimits
from virt_api.admission.defaults import Defaults
from virt_api.admission.server import AppDeps, build_app
from virt_api.admission.snapshots import ObjectLookup

VM = "VirtualMachine"
LABEL = "instancetype.kubevirt.io/default-instancetype"
PREF_LABEL = "instancetype.kubevirt.io/default-preference"
U1_SMALL = {"spec": {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}}}


def _objects(extra: Mapping[tuple[str, str], Any] | None = None) -> ObjectLookup:
    objects: dict[tuple[str, str], Any] = {
        ("virtualmachineclusterinstancetypes", "u1.small"): U1_SMALL,
        ("virtualmachineclusterinstancetypes", "cx1.medium1gi"): {
            "spec": {
                "cpu": {"guest": 2, "dedicatedCPUPlacement": True},
                "memory": {"guest": "2Gi", "hugepages": {"pageSize": "1Gi"}},
            }
        },
        ("virtualmachineclusterpreferences", "linux"): {
            "spec": {"devices": {"preferredDiskBus": "virtio", "preferredRng": {}}}
        },
        ("virtualmachineclusterpreferences", "windows"): {
            "spec": {
                "devices": {"preferredTPM": {}},
                "requirements": {"cpu": {"guest": 2}, "memory": {"guest": "4Gi"}},
            }
        },
        **(extra or {}),
    }

    async def lookup(resource: Resource, namespace: str, name: str) -> Mapping[str, Any] | None:
        return objects.get((resource.plural, name))

    return lookup


def _client(lookup: ObjectLookup) -> TestClient[web.Request, web.Application]:
    counter = Registry().counter(
        "kubevirt_admission_requests_total", "t", ("webhook", "kind", "allowed")
    )

    async def no_vmi(namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    deps = AppDeps(
        defaults=Defaults(),
        limits=ValidationLimits(),
        lookup=no_vmi,
        requests=counter,
        objects=lookup,
    )
    return TestClient(TestServer(build_app(deps)))


def _vm(**spec: Any) -> dict[str, Any]:
    template = {
        "domain": {"devices": {"disks": [{"name": "root"}]}},
        "volumes": [{"name": "root", "containerDisk": {"image": "registry.local/g:v1"}}],
    }
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": VM,
        "metadata": {"name": "vm1", "namespace": "ns"},
        "spec": {"runStrategy": "Always", "template": {"spec": template}, **spec},
    }


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    request = {
        "uid": "u",
        "kind": {"kind": VM},
        "operation": "CREATE",
        "namespace": "ns",
        "name": "vm1",
        "object": obj,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def _causes(obj: dict[str, Any], lookup: ObjectLookup | None = None) -> list[tuple[str, str]]:
    async with _client(lookup or _objects()) as c:
        body = await (await c.post("/validate", json=_review(obj))).json()
    response = body["response"]
    if response["allowed"]:
        return []
    return [(c["field"], c["message"]) for c in response["status"]["details"]["causes"]]


async def _mutated(
    obj: dict[str, Any], lookup: ObjectLookup
) -> tuple[dict[str, Any] | None, list[str]]:
    async with _client(lookup) as c:
        body = await (await c.post("/mutate", json=_review(obj))).json()
    response = body["response"]
    if not response["allowed"]:
        return None, [c["message"] for c in response["status"]["details"]["causes"]]
    (op,) = json.loads(base64.b64decode(response["patch"]))
    return op["value"], []


async def test_a_vm_whose_objects_apply_cleanly_is_admitted() -> None:
    """u1.small with a preference whose fields are all honoured."""
    vm = _vm(instancetype={"name": "u1.small"}, preference={"name": "linux"})
    assert await _causes(vm) == []


async def test_missing_objects_are_named() -> None:
    """An instancetype or preference that does not exist refuses the VM (KubeVirt's)."""
    vm = _vm(
        instancetype={"name": "nope"},
        preference={"name": "gone", "kind": "VirtualMachinePreference"},
    )
    assert await _causes(vm) == [
        (
            "spec.instancetype",
            'Failure to find instancetype: VirtualMachineClusterInstancetype "nope" not found',
        ),
        (
            "spec.preference",
            'Failure to find preference: VirtualMachinePreference "gone" not found',
        ),
    ]


async def test_a_captured_revision_is_read_instead_of_the_object() -> None:
    """With revisionName the ControllerRevision's data is what applies."""
    rev = {(CONTROLLER_REVISIONS.plural, "vm1-rev"): {"data": U1_SMALL}}
    vm = _vm(instancetype={"name": "deleted-since", "revisionName": "vm1-rev"})
    assert await _causes(vm, _objects(rev)) == []


async def test_unmet_requirements_refuse_with_kubevirts_message() -> None:
    """u1.small (1 vCPU) under a preference that requires 2: KubeVirt's message."""
    vm = _vm(instancetype={"name": "u1.small"}, preference={"name": "windows"})
    assert await _causes(vm) == [
        (
            "spec.instancetype",
            "failure checking preference requirements: insufficient CPU resources of 1 vCPU "
            "provided by instance type, preference requires 2 vCPU",
        )
    ]


async def test_fields_whose_vmi_field_is_refused_name_both() -> None:
    """The instancetype's dedicatedCPUPlacement and hugepages and the preference's
    persistent TPM are all honoured: no cause."""
    vm = _vm(instancetype={"name": "cx1.medium1gi"}, preference={"name": "windows"})
    windows: dict[tuple[str, str], Any] = {
        ("virtualmachineclusterpreferences", "windows"): {
            "spec": {"devices": {"preferredTPM": {"persistent": True}}}
        }
    }
    causes = await _causes(vm, _objects(windows))
    assert causes == [], causes


async def test_conflicts_with_the_object_are_named() -> None:
    """A template nodeSelector next to an instancetype that sets one."""
    extra = {
        ("virtualmachineclusterinstancetypes", "pinned"): {
            "spec": {**U1_SMALL["spec"], "nodeSelector": {"a": "b"}}
        }
    }
    vm = _vm(instancetype={"name": "pinned"})
    vm["spec"]["template"]["spec"]["nodeSelector"] = {"c": "d"}
    path = "spec.template.spec.nodeSelector"
    assert await _causes(vm, _objects(extra)) == [
        (path, f"VM field(s) {path} conflicts with selected instance type")
    ]


def _pvc_vm(policy: str | None = None) -> dict[str, Any]:
    vm = _vm(
        instancetype={
            "inferFromVolume": "root",
            **({"inferFromVolumeFailurePolicy": policy} if policy else {}),
        },
        preference={"inferFromVolume": "root"},
    )
    vm["spec"]["template"]["spec"]["volumes"] = [
        {"name": "root", "persistentVolumeClaim": {"claimName": "disk"}}
    ]
    return vm


async def test_infer_from_a_claims_labels() -> None:
    """The claim's default-instancetype(-kind) and default-preference labels become the
    matchers; the inferFromVolume keys go."""
    labels = {
        LABEL: "u1.small",
        f"{LABEL}-kind": "VirtualMachineClusterInstancetype",
        PREF_LABEL: "linux",
    }
    lookup = _objects({(PVCS.plural, "disk"): {"metadata": {"labels": labels}}})
    spec, errors = await _mutated(_pvc_vm(), lookup)
    assert errors == [] and spec is not None
    assert spec["instancetype"] == {"name": "u1.small", "kind": "VirtualMachineClusterInstancetype"}
    assert spec["preference"] == {"name": "linux"}


async def test_infer_through_a_datavolume_template_source_claim() -> None:
    """A dataVolume volume of the VM's own template: its source claim's labels."""
    vm = _vm(instancetype={"inferFromVolume": "root"})
    vm["spec"]["template"]["spec"]["volumes"] = [{"name": "root", "dataVolume": {"name": "dv"}}]
    vm["spec"]["dataVolumeTemplates"] = [
        {
            "metadata": {"name": "dv"},
            "spec": {"source": {"pvc": {"name": "golden", "namespace": "images"}}},
        }
    ]
    lookup = _objects({(PVCS.plural, "golden"): {"metadata": {"labels": {LABEL: "u1.small"}}}})
    spec, errors = await _mutated(vm, lookup)
    assert errors == [] and spec is not None and spec["instancetype"] == {"name": "u1.small"}


async def test_infer_from_a_datavolumes_labels() -> None:
    """An existing DataVolume's own labels."""
    vm = _vm(preference={"inferFromVolume": "root"})
    vm["spec"]["template"]["spec"]["volumes"] = [{"name": "root", "dataVolume": {"name": "dv"}}]
    lookup = _objects({(DATAVOLUMES.plural, "dv"): {"metadata": {"labels": {PREF_LABEL: "linux"}}}})
    spec, errors = await _mutated(vm, lookup)
    assert errors == [] and spec is not None and spec["preference"] == {"name": "linux"}


async def test_infer_failures_and_the_ignore_policy() -> None:
    """No label: refused with KubeVirt's message (Reject, the default); with Ignore the
    matcher is dropped. A missing volume is refused whatever the policy."""
    lookup = _objects({(PVCS.plural, "disk"): {"metadata": {"labels": {}}}})
    _, errors = await _mutated(_pvc_vm(), lookup)
    assert errors == [
        f"unable to find required {LABEL} label on the volume",
        f"unable to find required {PREF_LABEL} label on the volume",
    ]
    vm = _pvc_vm("Ignore")
    del vm["spec"]["preference"]
    spec, errors = await _mutated(vm, lookup)
    assert errors == [] and spec is not None and "instancetype" not in spec
    ghost = _vm(instancetype={"inferFromVolume": "ghost", "inferFromVolumeFailurePolicy": "Ignore"})
    _, errors = await _mutated(ghost, lookup)
    assert errors == ["unable to find volume ghost to infer defaults"]


async def test_preferred_storage_class_fills_datavolume_templates() -> None:
    """The preference's volumes.preferredStorageClassName goes to dataVolumeTemplates that
    name none (KubeVirt's VM mutator); one that names its own keeps it."""
    extra = {
        ("virtualmachineclusterpreferences", "fast"): {
            "spec": {"volumes": {"preferredStorageClassName": "local-fast"}}
        }
    }
    vm = _vm(preference={"name": "fast"})
    vm["spec"]["dataVolumeTemplates"] = [
        {"metadata": {"name": "a"}, "spec": {"storage": {}, "source": {"blank": {}}}},
        {
            "metadata": {"name": "b"},
            "spec": {"pvc": {"storageClassName": "mine"}, "source": {"blank": {}}},
        },
    ]
    spec, errors = await _mutated(vm, _objects(extra))
    assert errors == [] and spec is not None
    classes = [
        t["spec"].get("storage", t["spec"].get("pvc"))["storageClassName"]
        for t in spec["dataVolumeTemplates"]
    ]
    assert classes == ["local-fast", "mine"]
