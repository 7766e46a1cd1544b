"""…/virtualmachines/<name>/{start,stop,restart,migrate}: review, plan, write, answer."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.kube import Invalid, ListResult, Registry
from tests.unit.virt_api.subresources.fakes import (
    FakeAuthorizer,
    FakeVmStore,
    deps,
    proxied,
    vm,
    vmi,
)
from virt_api.subresources.app import AppDeps, build_app
from virt_api.subresources.errors import Conflict
from virt_api.subresources.vmactions import VmWrites, migration, vm_ref
from virt_api.subresources.vmhttp import KubeVmStore

VM_PATH = "/apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1"


def client_for(app_deps: AppDeps) -> TestClient[web.Request, web.Application]:
    return TestClient(TestServer(build_app(app_deps)))


def store(strategy: str = "Halted", *, phase: str | None = None) -> FakeVmStore:
    vms = {("ns1", "vm1"): vm(strategy=strategy, printableStatus="Stopped")}
    vmis = {("ns1", "vm1"): vmi(phase=phase)} if phase else {}
    return FakeVmStore(vms=vms, vmis=vmis)


async def test_start_is_reviewed_written_and_accepted() -> None:
    """PUT start: the review asks `update virtualmachines/start`, the VM's runStrategy is
    written, the answer is an empty 202 as virt-api's, and the call is counted."""
    authorizer, vms, registry = FakeAuthorizer(), store(), Registry()
    async with client_for(deps(authorizer=authorizer, vms=vms, registry=registry)) as client:
        resp = await client.put(f"{VM_PATH}/start", headers=proxied("alice"), data=b"")
        assert (resp.status, await resp.read()) == (202, b"")
    ((user, attrs),) = authorizer.reviews
    assert (user.name, attrs.resource, attrs.subresource, attrs.verb) == (
        "alice", "virtualmachines", "start", "update",
    )  # fmt: skip
    ((ref, writes),) = vms.applied
    assert (ref.namespace, ref.name) == ("ns1", "vm1")
    assert writes == VmWrites(spec_patch={"spec": {"runStrategy": "Always"}})
    assert 'action="start",code="202"' in registry.render()


async def test_denied_caller_writes_nothing() -> None:
    """A failed review: 403 naming virtualmachines/stop, and no write."""
    vms = store("Always", phase="Running")
    async with client_for(deps(authorizer=FakeAuthorizer(allow=False), vms=vms)) as client:
        resp = await client.put(f"{VM_PATH}/stop", headers=proxied("bob"))
        body = await resp.json()
    assert resp.status == 403
    assert 'cannot update resource "virtualmachines/stop"' in body["message"]
    assert vms.applied == []


async def test_conflict_is_a_status_object() -> None:
    """Starting a running Always VM: 409 Status with KubeVirt's message, nothing written."""
    vms = store("Always", phase="Running")
    async with client_for(deps(vms=vms)) as client:
        resp = await client.put(f"{VM_PATH}/start", headers=proxied())
        body = await resp.json()
    assert (resp.status, body["kind"], body["reason"]) == (409, "Status", "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": VM is already running'
    )
    assert vms.applied == []


async def test_missing_vm_is_404() -> None:
    """No such VM: 404 `virtualmachine.kubevirt.io "vm1" not found`."""
    async with client_for(deps(vms=FakeVmStore())) as client:
        resp = await client.put(f"{VM_PATH}/restart", headers=proxied())
        body = await resp.json()
    assert (resp.status, body["message"]) == (404, 'virtualmachine.kubevirt.io "vm1" not found')


async def test_dry_run_plans_but_writes_nothing() -> None:
    """dryRun ["All"]: the same checks and answer, no write."""
    vms = store("Always", phase="Running")
    async with client_for(deps(vms=vms)) as client:
        resp = await client.put(f"{VM_PATH}/migrate", headers=proxied(), json={"dryRun": ["All"]})
        assert resp.status == 202
    assert vms.applied == []


async def test_wrong_method_and_unknown_action() -> None:
    """GET on a VM verb is 405; an unknown verb is 404 listing the known ones."""
    async with client_for(deps(vms=store())) as client:
        get = await client.get(f"{VM_PATH}/start", headers=proxied())
        assert get.status == 405
        unknown = await client.put(f"{VM_PATH}/pause", headers=proxied())
        assert unknown.status == 404
        assert "start, stop, restart, migrate" in (await unknown.json())["message"]


async def test_bad_body_is_400_before_any_read() -> None:
    """A broken StopOptions body: 400 BadRequest."""
    vms = store("Always", phase="Running")
    async with client_for(deps(vms=vms)) as client:
        resp = await client.put(f"{VM_PATH}/stop", headers=proxied(), data=b"{")
        assert (resp.status, (await resp.json())["reason"]) == (400, "BadRequest")
    assert vms.applied == []


class RecordingClient:
    """KubeClient's calls the store makes, recorded; the status patch can fail its test."""

    def __init__(self, *, status_error: Exception | None = None) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.status_error = status_error

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        raise AssertionError("not used")

    async def patch(self, resource: Any, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append(("patch", resource.plural, kw.get("subresource") or ""))
        if kw.get("subresource") == "status" and self.status_error is not None:
            raise self.status_error
        return {}

    async def create(self, resource: Any, body: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append(("create", resource.plural, body["metadata"]["generateName"]))
        return {}

    async def list(self, resource: Any, **kw: Any) -> ListResult:
        self.calls.append(("list", resource.plural, kw["label_selector"]))
        return ListResult([{"metadata": {"name": "virt-launcher-vm1-abcde"}}], "1")

    async def delete(self, resource: Any, name: str, **kw: Any) -> dict[str, Any]:
        self.calls.append(("delete", name, str(kw["options"].grace_period_seconds)))
        return {}


async def test_store_writes_in_kubevirts_order() -> None:
    """VMI patch, VM patch, status JSON patch, VMIM create, then the launcher pod (grace 0)."""
    client = RecordingClient()
    writes = VmWrites(
        vmi_patch={}, spec_patch={}, status_ops=({"op": "add"},),
        migration=migration("ns1", "vm1"), kill_pod_of="uid-1",
    )  # fmt: skip
    await KubeVmStore(client).apply(vm_ref("ns1", "vm1"), writes)
    assert client.calls == [
        ("patch", "virtualmachineinstances", ""),
        ("patch", "virtualmachines", ""),
        ("patch", "virtualmachines", "status"),
        ("create", "virtualmachineinstancemigrations", "kubevirt-migrate-vm-"),
        ("list", "pods", "kubevirt.io/created-by=uid-1"),
        ("delete", "virt-launcher-vm1-abcde", "0"),
    ]


async def test_failed_test_op_is_a_conflict() -> None:
    """A concurrent request makes the `test` op fail (422): answered as 409 Conflict."""
    client = RecordingClient(status_error=Invalid(422, "Invalid", "testing value failed"))
    with pytest.raises(Conflict, match="testing value failed"):
        await KubeVmStore(client).apply(vm_ref("ns1", "vm1"), VmWrites(status_ops=({},)))
