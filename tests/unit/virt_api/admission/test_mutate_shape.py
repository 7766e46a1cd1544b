"""/mutate on objects of any shape (issue 35, found by the API fuzzer): kube-apiserver calls
mutating webhooks before the schema check, so a VM or VMI whose value has the wrong type is
refused naming the field, never answered with a crash (a 500 and a traceback)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.kube import Registry, Resource
from shared.model.validation import ValidationLimits
from virt_api.admission.defaults import Defaults
from virt_api.admission.server import AppDeps, build_app
from virt_api.admission.shape import shape_errors


async def _nothing(resource: Resource, namespace: str, name: str) -> Mapping[str, Any] | None:
    return None


async def _no_vmi(namespace: str, name: str) -> Mapping[str, Any] | None:
    return None


def _client() -> TestClient[web.Request, web.Application]:
    counter = Registry().counter(
        "kubevirt_admission_requests_total", "t", ("webhook", "kind", "allowed")
    )
    deps = AppDeps(
        defaults=Defaults(),
        limits=ValidationLimits(),
        lookup=_no_vmi,
        requests=counter,
        objects=_nothing,
    )
    return TestClient(TestServer(build_app(deps)))


def _review(kind: str, spec: Any) -> dict[str, Any]:
    obj = {"apiVersion": "kubevirt.io/v1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    request = {
        "uid": "u",
        "kind": {"kind": kind},
        "operation": "CREATE",
        "namespace": "ns",
        "name": "x",
        "object": obj,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


# The fuzzer's finds (FUZZ_SEED=1): inferFromVolume with a template that is no object, and
# the same shapes elsewhere.
MALFORMED = [
    (
        "VirtualMachine",
        {"instancetype": {"inferFromVolume": "v"}, "template": 1.5},
        "spec.template",
    ),
    ("VirtualMachine", {"preference": {"inferFromVolume": "v"}, "template": "s"}, "spec.template"),
    ("VirtualMachine", {"preference": [1, "a"], "template": {}}, "spec.preference"),
    (
        "VirtualMachine",
        {"template": {"spec": {"domain": {"devices": {"disks": [1]}}}}},
        "spec.template.spec.domain.devices.disks[0]",
    ),
    ("VirtualMachineInstance", {"domain": []}, "spec.domain"),
]


@pytest.mark.parametrize(("kind", "spec", "field"), MALFORMED)
async def test_malformed_objects_are_refused_naming_the_field(
    kind: str, spec: Any, field: str
) -> None:
    """A refusal (HTTP 200, allowed false) whose cause is the field with the wrong shape."""
    async with _client() as c:
        resp = await c.post("/mutate", json=_review(kind, spec))
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["allowed"] is False
    assert [c["field"] for c in response["status"]["details"]["causes"]] == [field]


def test_well_shaped_and_other_kinds_pass() -> None:
    """A decodable VM, and any kind /mutate does not default, have no shape errors."""
    vm = {"spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {}}}}}
    assert shape_errors("VirtualMachine", vm) == []
    assert shape_errors("VirtualMachineInstanceMigration", {"spec": 7}) == []
