"""freeze/unfreeze/reset forwarding, and the subresources answered by the API itself:
expand-spec, memorydump (its routing; the rest in test_memorydump.py) and SEV
(virt_api.subresources.extras, .freeze)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.actions import Action
from shared.duration import go_duration
from shared.kube import NotFound as KubeNotFound
from shared.kube.resources import Resource
from tests.unit.virt_api.subresources.fakes import (
    FakeAuthorizer,
    FakeForwarder,
    FakeReader,
    deps,
    node,
    proxied,
    vm,
    vmi,
)
from virt_api.subresources.app import AppDeps, build_app
from virt_api.subresources.extras import expanded

BASE = "/apis/subresources.kubevirt.io/v1/namespaces/ns1"
VMI_PATH = f"{BASE}/virtualmachineinstances/vm1"
VM_PATH = f"{BASE}/virtualmachines/vm1"
INSTANCETYPE = {
    "apiVersion": "instancetype.kubevirt.io/v1beta1",
    "kind": "VirtualMachineClusterInstancetype",
    "metadata": {"name": "u1.small"},
    "spec": {"cpu": {"guest": 2}, "memory": {"guest": "1Gi"}},
}


class FakeExpander:
    """Expands the one VM it knows with `expanded()` over a fake API holding INSTANCETYPE."""

    def __init__(self, raw: dict[str, Any] | None) -> None:
        self.raw = raw

    async def expanded_vm(self, namespace: str, name: str) -> dict[str, Any]:
        if self.raw is None:
            raise KubeNotFound(404, "NotFound", f"{namespace}/{name}")
        return await expanded(FakeApi(), self.raw)

    async def expanded_body(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        return await expanded(FakeApi(), raw)


class FakeApi:
    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        if name == "u1.small":
            return INSTANCETYPE
        raise KubeNotFound(404, "NotFound", name)

    async def create(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("expand-spec must not write")

    async def patch(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("expand-spec must not write")


def _vm_with_instancetype() -> dict[str, Any]:
    raw = vm()
    raw["spec"]["instancetype"] = {"name": "u1.small", "kind": "VirtualMachineClusterInstancetype"}
    raw["spec"]["template"]["spec"] = {"domain": {"devices": {}}}
    return raw


def _client(app_deps: AppDeps) -> TestClient[web.Request, web.Application]:
    return TestClient(TestServer(build_app(app_deps)))


def _running(**kw: Any) -> AppDeps:
    reader = FakeReader(vmis={("ns1", "vm1"): vmi()}, nodes={"node01": node()})
    return deps(reader=reader, **kw)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m0s", 300.0), ("1h", 3600.0), ("90s", 90.0), ("1.5m", 90.0), ("250ms", 0.25), ("0", 0.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    """virtctl's unfreezeTimeout is a Go duration string."""
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5 m", "m5", "-1s", "5d"])
def test_bad_go_durations(text: str) -> None:
    """Anything else is refused."""
    with pytest.raises(ValueError):
        go_duration(text)


async def test_freeze_forwards_the_timeout_in_seconds() -> None:
    """PUT freeze {"unfreezeTimeout": "5m0s"}: reviewed as update on freeze, forwarded to the
    VMI's handler with the timeout in seconds; 200 empty, as KubeVirt."""
    authorizer, forwarder = FakeAuthorizer(), FakeForwarder()
    async with _client(_running(authorizer=authorizer, forwarder=forwarder)) as client:
        resp = await client.put(
            f"{VMI_PATH}/freeze", json={"unfreezeTimeout": "5m0s"}, headers=proxied()
        )
        assert (resp.status, await resp.read()) == (200, b"")
    assert (authorizer.reviews[0][1].verb, authorizer.reviews[0][1].subresource) == (
        "update",
        "freeze",
    )
    assert forwarder.calls[0][1].action is Action.FREEZE
    assert forwarder.args == [{"unfreezeTimeoutSeconds": 300.0}]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(None, id="no-body"),
        pytest.param({"unfreezeTimeout": "soon"}, id="bad-duration"),
        pytest.param({"unfreezeTimeout": 300}, id="not-a-string"),
    ],
)
async def test_freeze_without_a_valid_timeout_is_a_400(body: Any) -> None:
    """Refused with the field named, before the handler is called."""
    forwarder = FakeForwarder()
    async with _client(_running(forwarder=forwarder)) as client:
        resp = await client.put(f"{VMI_PATH}/freeze", json=body, headers=proxied())
        assert resp.status == 400
        assert "unfreezeTimeout" in (await resp.json())["message"]
    assert forwarder.calls == []


@pytest.mark.parametrize("action", [Action.UNFREEZE, Action.RESET])
async def test_unfreeze_and_reset_forward_no_arguments(action: Action) -> None:
    """PUT unfreeze / reset reach the handler with no body."""
    forwarder = FakeForwarder()
    async with _client(_running(forwarder=forwarder)) as client:
        resp = await client.put(f"{VMI_PATH}/{action}", headers=proxied())
        assert resp.status == 200
    assert forwarder.calls[0][1].action is action and forwarder.args == [{}]


async def test_expand_spec_returns_the_vm_with_its_instancetype_applied() -> None:
    """GET expand-spec: reviewed as get on virtualmachines/expand-spec; the template carries
    the instancetype's CPU and memory, the matcher is gone, and nothing is written."""
    authorizer = FakeAuthorizer()
    app_deps = dataclasses.replace(
        deps(authorizer=authorizer), expander=FakeExpander(_vm_with_instancetype())
    )
    async with _client(app_deps) as client:
        resp = await client.get(f"{VM_PATH}/expand-spec", headers=proxied())
        assert resp.status == 200
        body = await resp.json()
    attrs = authorizer.reviews[0][1]
    assert (attrs.resource, attrs.subresource, attrs.verb) == (
        "virtualmachines",
        "expand-spec",
        "get",
    )
    assert "instancetype" not in body["spec"]
    domain = body["spec"]["template"]["spec"]["domain"]
    assert domain["cpu"]["sockets"] == 2 and domain["memory"]["guest"] == "1Gi"


async def test_expand_spec_of_a_missing_vm_is_a_404() -> None:
    """KubeVirt's NotFound Status naming the VM."""
    app_deps = dataclasses.replace(deps(), expander=FakeExpander(None))
    async with _client(app_deps) as client:
        resp = await client.get(f"{VM_PATH}/expand-spec", headers=proxied())
        assert resp.status == 404
        assert "vm1" in (await resp.json())["message"]


@pytest.mark.parametrize(
    ("method", "path", "what"),
    [
        ("GET", f"{VMI_PATH}/sev/fetchcertchain", "SEV"),
        ("GET", f"{VMI_PATH}/sev/querylaunchmeasurement", "SEV"),
        ("PUT", f"{VMI_PATH}/sev/setupsession", "SEV"),
        ("PUT", f"{VMI_PATH}/sev/injectlaunchsecret", "SEV"),
    ],
)
async def test_unsupported_subresources_say_so_after_review(
    method: str, path: str, what: str
) -> None:
    """SEV answers 400 "not supported by kubevirt-py" to an allowed caller;
    a caller without the right gets 403 and learns nothing more."""
    async with _client(deps()) as client:
        resp = await client.request(method, path, headers=proxied())
        assert resp.status == 400
        message = (await resp.json())["message"]
        assert what in message and "not supported by kubevirt-py" in message
    async with _client(deps(authorizer=FakeAuthorizer(allow=False))) as client:
        resp = await client.request(method, path, headers=proxied())
        assert resp.status == 403


async def test_extras_take_only_their_method() -> None:
    """expand-spec is GET, memorydump PUT: the other method is a 405."""
    async with _client(deps()) as client:
        assert (await client.put(f"{VM_PATH}/expand-spec", headers=proxied())).status == 405
        assert (await client.get(f"{VM_PATH}/memorydump", headers=proxied())).status == 405
        assert (await client.get(f"{VMI_PATH}/sev/nonsense", headers=proxied())).status == 404


async def test_expand_vm_spec_expands_the_vm_in_the_body() -> None:
    """PUT …/namespaces/<ns>/expand-vm-spec (virtctl expand --file): reviewed as update on
    expand-vm-spec in the namespace; the VM sent comes back expanded, in that namespace."""
    authorizer = FakeAuthorizer()
    app_deps = dataclasses.replace(deps(authorizer=authorizer), expander=FakeExpander(None))
    raw = _vm_with_instancetype()
    del raw["metadata"]["namespace"]
    async with _client(app_deps) as client:
        resp = await client.put(f"{BASE}/expand-vm-spec", json=raw, headers=proxied())
        assert resp.status == 200
        body = await resp.json()
    attrs = authorizer.reviews[0][1]
    assert (attrs.resource, attrs.subresource, attrs.verb, attrs.namespace) == (
        "expand-vm-spec", "", "update", "ns1",
    )  # fmt: skip
    assert body["metadata"]["namespace"] == "ns1" and "instancetype" not in body["spec"]
    assert body["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] == 2


@pytest.mark.parametrize(
    ("body", "what"),
    [
        pytest.param(b"", "VirtualMachine", id="empty"),
        pytest.param(b"kind: Pod", "VirtualMachine", id="not-a-vm"),
        pytest.param(b"{", "not a VirtualMachine", id="not-yaml"),
        pytest.param(
            b"kind: VirtualMachine\nmetadata: {namespace: other}", "metadata.namespace",
            id="other-namespace",
        ),
    ],
)  # fmt: skip
async def test_expand_vm_spec_refuses_what_is_not_a_vm_of_the_namespace(
    body: bytes, what: str
) -> None:
    """A body that is not a VirtualMachine of the request's namespace is a 400 naming why."""
    app_deps = dataclasses.replace(deps(), expander=FakeExpander(None))
    async with _client(app_deps) as client:
        resp = await client.put(f"{BASE}/expand-vm-spec", data=body, headers=proxied())
        assert resp.status == 400
        assert what in (await resp.json())["message"]


async def test_backup_forwards_the_request_and_answers_the_jobs_state() -> None:
    """PUT backup {Start …}: checked, forwarded as it is, and the handler's answer (the
    launcher's job state) returned to the backup controller."""
    body = {"backupName": "b1", "checkpoint": "t-1", "targetPod": "backup-target-x"}
    forwarder = FakeForwarder(body=b'{"state": "Running"}')
    async with _client(_running(forwarder=forwarder)) as client:
        resp = await client.put(f"{VMI_PATH}/backup", json=body, headers=proxied())
        assert (resp.status, await resp.json()) == (200, {"state": "Running"})
    assert forwarder.calls[0][1].action is Action.BACKUP
    assert forwarder.args == [{"cmd": "Start", **body}]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(None, id="no-body"),
        pytest.param({"backupName": "b1", "targetPod": "p"}, id="no-checkpoint"),
        pytest.param({"backupName": "../b", "checkpoint": "c", "targetPod": "p"}, id="bad-name"),
    ],
)
async def test_a_bad_backup_request_is_a_400(body: Any) -> None:
    """Refused naming the field, before the handler is called."""
    forwarder = FakeForwarder()
    async with _client(_running(forwarder=forwarder)) as client:
        resp = await client.put(f"{VMI_PATH}/backup", json=body, headers=proxied())
        assert resp.status == 400
        assert "backup:" in (await resp.json())["message"]
    assert forwarder.calls == []
