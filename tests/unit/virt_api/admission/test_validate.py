"""Admission's refusals: every bad and every unsupported field in one answer, with paths;
migrations of missing or finished VMIs; AdmissionReview answers over HTTP."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.kube import Registry
from shared.model.unsupported import NOT_SUPPORTED
from shared.model.validation import ValidationLimits
from tests.unit.virt_api.admission.test_defaults import demo_vmi
from virt_api.admission.defaults import Defaults
from virt_api.admission.review import BadReview, parse_review
from virt_api.admission.server import AppDeps, build_app
from virt_api.admission.validate import migration_target_errors, validate

VMI = "VirtualMachineInstance"


def paths(errors: list[Any]) -> list[str]:
    return [e.path for e in errors]


def test_one_answer_names_every_field() -> None:
    """A bad bus, a GPU and a typo are all reported, each at its own path."""
    obj = demo_vmi()
    obj["spec"]["domain"]["devices"] = {
        "disks": [{"name": "containerdisk", "disk": {"bus": "ide"}}],
        "gpus": [{"name": "gpu1", "deviceName": "nvidia.com/TU104GL"}],
    }
    obj["spec"]["domian"] = {}
    errors = validate(VMI, obj)
    assert paths(errors) == [
        "spec.domain.devices.disks[0].disk.bus",
        "spec.domian",
        "spec.domain.devices.gpus",
    ]
    assert errors[2].message == NOT_SUPPORTED


def test_a_type_error_names_its_path() -> None:
    """What does not parse is named where it is."""
    obj = demo_vmi()
    obj["spec"]["domain"]["cpu"] = {"cores": "two"}
    assert [str(e) for e in validate(VMI, obj)] == ["spec.domain.cpu.cores: expected int, got str"]


def test_update_without_spec_change_is_allowed() -> None:
    """Metadata edits (finalizers, labels) of admitted objects are never blocked."""
    old = demo_vmi()
    old["spec"]["domain"]["devices"] = {"gpus": [{"name": "g"}]}
    new = {**old, "metadata": {**old["metadata"], "finalizers": ["x"]}}
    assert validate(VMI, new, old=old) == []
    assert validate(VMI, new) != []


def test_vm_and_migration_kinds() -> None:
    """VM templates and migration specs are validated; unknown kinds are not."""
    vm = {"metadata": {"name": "vm"}, "spec": {"template": {"spec": {"domain": {}}}}}
    assert "spec.template.spec.domain.resources.requests.memory" in paths(
        validate("VirtualMachine", vm)
    )
    vmim = {"metadata": {"name": "m"}, "spec": {}}
    assert paths(validate("VirtualMachineInstanceMigration", vmim)) == ["spec.vmiName"]
    assert validate("Pod", {"spec": 1}) == []


def test_vm_update_volumes_strategy_is_checked() -> None:
    """updateVolumesStrategy is honoured: Migration and Replacement pass, anything else is
    refused naming the field and the values allowed."""
    spec: dict[str, Any] = {"template": {"spec": demo_vmi()["spec"]}}
    field = "spec.updateVolumesStrategy"
    for good in ("Migration", "Replacement"):
        vm = {"metadata": {"name": "vm"}, "spec": {**spec, "updateVolumesStrategy": good}}
        assert field not in paths(validate("VirtualMachine", vm))
    vm = {"metadata": {"name": "vm"}, "spec": {**spec, "updateVolumesStrategy": "Copy"}}
    (error,) = [e for e in validate("VirtualMachine", vm) if e.path == field]
    assert "'Migration', 'Replacement'" in error.message


async def lookup_none(namespace: str, name: str) -> Mapping[str, Any] | None:
    return None


async def test_migration_of_a_missing_vmi() -> None:
    """A VMIM naming a VMI that does not exist is refused at spec.vmiName."""
    errors = await migration_target_errors(
        {"spec": {"vmiName": "ghost"}}, namespace="ns", lookup=lookup_none
    )
    assert [str(e) for e in errors] == [
        "spec.vmiName: VirtualMachineInstance 'ghost' does not exist in namespace 'ns'"
    ]


async def test_migration_of_a_finished_vmi() -> None:
    """A VMI that has succeeded or failed has nothing to migrate."""

    async def lookup(namespace: str, name: str) -> Mapping[str, Any] | None:
        return {"metadata": {"name": name}, "status": {"phase": "Failed"}}

    errors = await migration_target_errors(
        {"spec": {"vmiName": "a"}}, namespace="ns", lookup=lookup
    )
    assert "has finished (Failed)" in errors[0].message


def review(kind: str, obj: dict[str, Any], *, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": kind},
            "operation": operation,
            "namespace": "ns",
            "name": obj.get("metadata", {}).get("name", ""),
            "object": obj,
        },
    }


def client() -> TestClient[web.Request, web.Application]:
    registry = Registry()
    counter = registry.counter(
        "kubevirt_admission_requests_total", "t", ("webhook", "kind", "allowed")
    )
    deps = AppDeps(
        defaults=Defaults(), limits=ValidationLimits(), lookup=lookup_none, requests=counter
    )
    return TestClient(TestServer(build_app(deps)))


async def test_mutate_answers_a_json_patch() -> None:
    """/mutate allows with a base64 JSONPatch on /spec."""
    async with client() as c:
        resp = await c.post("/mutate", json=review(VMI, demo_vmi()))
        body = await resp.json()
    response = body["response"]
    assert (response["uid"], response["allowed"], response["patchType"]) == (
        "u-1",
        True,
        "JSONPatch",
    )
    (op,) = json.loads(base64.b64decode(response["patch"]))
    assert op["path"] == "/spec" and op["value"]["domain"]["devices"]["disks"]


async def test_validate_refuses_with_every_cause() -> None:
    """/validate refuses with Status 422 naming each field in the message and the causes."""
    obj = demo_vmi()
    obj["spec"]["domain"]["devices"] = {"hostDevices": [{"name": "h"}]}
    obj["spec"]["accessCredentials"] = [{"sshPublicKey": {}}]
    async with client() as c:
        body = await (await c.post("/validate", json=review(VMI, obj))).json()
    status = body["response"]["status"]
    assert body["response"]["allowed"] is False
    assert status["code"] == 422
    assert "spec.accessCredentials[0].sshPublicKey.source: " in status["message"]
    assert "spec.domain.devices.hostDevices: not supported by kubevirt-py" in status["message"]
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {
        "spec.accessCredentials[0].sshPublicKey.source",
        "spec.accessCredentials[0].sshPublicKey.propagationMethod",
        "spec.domain.devices.hostDevices",
    } <= fields


async def test_validate_refuses_a_migration_of_a_missing_vmi() -> None:
    """A VMIM CREATE is checked against the cluster."""
    vmim = {"metadata": {"name": "m"}, "spec": {"vmiName": "ghost"}}
    async with client() as c:
        body = await (
            await c.post("/validate", json=review("VirtualMachineInstanceMigration", vmim))
        ).json()
    assert (
        "spec.vmiName: VirtualMachineInstance 'ghost' does not exist"
        in body["response"]["status"]["message"]
    )


async def test_delete_and_garbage() -> None:
    """DELETE is allowed; a body that is no AdmissionReview is a 400."""
    async with client() as c:
        body = await (await c.post("/validate", json=review(VMI, {}, operation="DELETE"))).json()
        assert body["response"]["allowed"] is True
        assert (await c.post("/validate", data=b"{")).status == 400
        assert (await c.post("/mutate", json={"apiVersion": "v1"})).status == 400


@pytest.mark.parametrize("body", [None, [], {"apiVersion": "admission.k8s.io/v1", "request": {}}])
def test_parse_review_refuses(body: Any) -> None:
    """Only an admission.k8s.io/v1 review with a request uid is answered."""
    with pytest.raises(BadReview):
        parse_review(body)
