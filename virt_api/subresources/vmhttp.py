"""PUT …/virtualmachines/<name>/{start,stop,restart,migrate}: review, plan, write, 202.

The writes are made with the controller's own credentials after the caller's
SubjectAccessReview on the subresource, so a user bound to `kubevirt.io:edit` can start
and restart without any right on `virtualmachines/status` (as in KubeVirt).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog
from aiohttp import web

from shared.actions import VM_ACTIONS, VMAction
from shared.kube import (
    PODS,
    VMIMS,
    VMIS,
    VMS,
    DeleteOptions,
    KubeError,
    PatchType,
)
from shared.kube import Conflict as KubeConflict
from shared.kube import Invalid as KubeInvalid
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import ObjectWrites
from shared.labels import CREATED_BY_LABEL
from shared.model import VirtualMachineInstance
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.authz import Authorizer, ResourceAttributes, require
from virt_api.subresources.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    SubresourceError,
    VmiRef,
)
from virt_api.subresources.vmactions import (
    VmWrites,
    conflict,
    parse_options,
    plan,
    vm_not_found,
    vm_ref,
)

log = structlog.get_logger("virt_api.subresources.vm")

MAX_BODY = 64 * 1024


class VmStore(Protocol):
    """Reading a VM and its VMI, and making the planned writes (KubeVmStore; fakes)."""

    async def get_vm(self, namespace: str, name: str) -> Mapping[str, Any]: ...

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance | None: ...

    async def apply(self, ref: VmiRef, writes: VmWrites) -> None: ...


class KubeVmStore:
    """`VmStore` over a KubeClient (the controller's ServiceAccount)."""

    def __init__(self, client: ObjectWrites) -> None:
        self._client = client

    async def get_vm(self, namespace: str, name: str) -> Mapping[str, Any]:
        return await self._client.get(VMS, name, namespace=namespace)

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance | None:
        try:
            raw = await self._client.get(VMIS, name, namespace=namespace)
        except KubeNotFound:
            return None
        return VirtualMachineInstance.from_dict(raw)

    async def apply(self, ref: VmiRef, writes: VmWrites) -> None:
        c, ns, name = self._client, ref.namespace, ref.name
        if writes.vmi_patch is not None:
            await c.patch(VMIS, name, writes.vmi_patch, namespace=ns)
        if writes.spec_patch is not None:
            await c.patch(VMS, name, writes.spec_patch, namespace=ns)
        if writes.status_ops:
            try:
                await c.patch(
                    VMS, name, list(writes.status_ops), namespace=ns,
                    patch_type=PatchType.JSON, subresource="status",
                )  # fmt: skip
            except (KubeInvalid, KubeConflict) as e:  # the `test` op: a request came first
                raise conflict(ref, str(e)) from e
        if writes.migration is not None:
            await c.create(VMIMS, writes.migration, namespace=ns)
        if writes.kill_pod_of is not None:
            pods = await c.list(PODS, namespace=ns, label_selector=_created_by(writes.kill_pod_of))
            for pod in pods.items:
                await c.delete(
                    PODS,
                    pod["metadata"]["name"],
                    namespace=ns,
                    options=DeleteOptions(grace_period_seconds=0),
                )


def _created_by(uid: str) -> str:
    return f"{CREATED_BY_LABEL}={uid}"


class VmActions:
    """The route handler; the caller's identity comes from the authentication middleware."""

    def __init__(self, *, authorizer: Authorizer, store: VmStore) -> None:
        self._authorizer = authorizer
        self._store = store

    async def handle(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        ref = vm_ref(ns, name)
        action = _action(request, ref)
        spec = VM_ACTIONS[action]
        with structlog.contextvars.bound_contextvars(
            vm=f"{ns}/{name}", action=str(action), user=user.name
        ):
            await require(self._authorizer, user, ResourceAttributes.of(spec, ref))
            opts = parse_options(action, await read_body(request, ref), ref)
            vm = await self._read(ref)
            writes = plan(action, opts, vm, await self._vmi(ref))
            if opts.dry_run:
                log.info("vm_action_dry_run")
            else:
                await self._write(ref, writes)
                log.info("vm_action_applied")
        return web.Response(status=202)

    async def _read(self, ref: VmiRef) -> Mapping[str, Any]:
        try:
            return await self._store.get_vm(ref.namespace, ref.name)
        except KubeNotFound as e:
            raise vm_not_found(ref) from e
        except KubeError as e:
            raise SubresourceError(f"cannot read the VM: {e}", vmi=ref) from e

    async def _vmi(self, ref: VmiRef) -> VirtualMachineInstance | None:
        try:
            return await self._store.get_vmi(ref.namespace, ref.name)
        except KubeError as e:
            raise SubresourceError(f"cannot read the VMI: {e}", vmi=ref) from e

    async def _write(self, ref: VmiRef, writes: VmWrites) -> None:
        try:
            await self._store.apply(ref, writes)
        except KubeNotFound as e:
            raise vm_not_found(ref) from e
        except KubeError as e:
            raise SubresourceError(f"cannot update the VM: {e}", vmi=ref) from e


def _action(request: web.Request, ref: VmiRef) -> VMAction:
    name = request.match_info["action"]
    if name not in VM_ACTIONS:
        known = ", ".join(VM_ACTIONS)
        raise NotFound(f"unknown action {name!r} on virtualmachines (one of: {known})", vmi=ref)
    if request.method != "PUT":
        raise MethodNotAllowed(f"{name} takes PUT, not {request.method}", vmi=ref)
    return VMAction(name)


async def read_body(request: web.Request, ref: VmiRef) -> bytes:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise _too_large(ref)
    body = await request.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise _too_large(ref)
    return body


def _too_large(ref: VmiRef) -> SubresourceError:
    return BadRequest(f"the request body is larger than {MAX_BODY} bytes", vmi=ref)
