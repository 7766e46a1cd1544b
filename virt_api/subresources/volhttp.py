"""PUT …/{virtualmachineinstances,virtualmachines}/<name>/{addvolume,removevolume}.

Review, parse, plan (virt_api.subresources.volumes), write, 202 — with the controller's
credentials after the caller's SubjectAccessReview, as the VM actions (vmhttp).

- on a VMI: its spec gets (or loses) the hotplugged volume and its disk; the controller
  and the handler attach it (controller/vmi/hotplug.py, handler/hotplug/);
- on a VM (virtctl's --persist): the template gets it; the VM controller makes the
  running VMI follow (controller/vm/hotplug.py), as KubeVirt's VM controller does.
A claim (or DataVolume) that does not exist is refused up front, naming it.
"""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web

from shared.actions import (
    RESOURCE,
    VOLUME_ACTIONS,
    VolumeAction,
)
from shared.kube import VMIS, VMS, KubeError, PatchType, Resource
from shared.kube import Conflict as KubeConflict
from shared.kube import Invalid as KubeInvalid
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import ObjectWrites
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.authz import Authorizer, ResourceAttributes, require
from virt_api.subresources.errors import (
    BadRequest,
    Conflict,
    MethodNotAllowed,
    NotFound,
    SubresourceError,
    VmiRef,
)
from virt_api.subresources.vmactions import vm_ref
from virt_api.subresources.vmhttp import read_body
from virt_api.subresources.volumes import (
    VM_TEMPLATE_SPEC,
    VMI_SPEC,
    AddVolume,
    RemoveVolume,
    add_ops,
    parse_add,
    parse_remove,
    remove_ops,
)

log = structlog.get_logger("virt_api.subresources.volumes")

FINAL_PHASES = ("Succeeded", "Failed")
Options = AddVolume | RemoveVolume


class VolumeActions:
    """The route handler of the four paths; the caller comes from the authn middleware."""

    def __init__(self, *, authorizer: Authorizer, client: ObjectWrites) -> None:
        self._authorizer = authorizer
        self._client = client

    async def handle(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        resource = request.match_info["resource"]
        ref = VmiRef(namespace=ns, name=name) if resource == RESOURCE else vm_ref(ns, name)
        action = VolumeAction(request.match_info["action"])
        if request.method != "PUT":
            raise MethodNotAllowed(f"{action} takes PUT, not {request.method}", vmi=ref)
        spec = VOLUME_ACTIONS[(resource, action)]
        with structlog.contextvars.bound_contextvars(
            target=f"{resource}/{ns}/{name}", action=str(action), user=user.name
        ):
            await require(self._authorizer, user, ResourceAttributes.of(spec, ref))
            body = await read_body(request, ref)
            opts: Options = (
                parse_add(body, ref) if action is VolumeAction.ADD else parse_remove(body, ref)
            )
            if isinstance(opts, AddVolume):
                await self._source_exists(ref, opts)
            if resource == RESOURCE:
                await self._on_vmi(ref, opts)
            else:
                await self._on_vm(ref, opts)
            log.info("volume_action_applied", volume=opts.name, dry_run=opts.dry_run)
        return web.Response(status=202)

    async def _source_exists(self, ref: VmiRef, opts: AddVolume) -> None:
        """The claim (or DataVolume) the volume names exists: refused naming it if not."""
        resource, name = opts.kind.resource, opts.claim_name
        try:
            await self._client.get(resource, name, namespace=ref.namespace)
        except KubeNotFound as e:
            raise BadRequest(
                f"{resource.kind} {ref.namespace}/{name} does not exist", vmi=ref
            ) from e
        except KubeError as e:
            raise SubresourceError(f"cannot read the {resource.kind} {name!r}: {e}", vmi=ref) from e

    async def _on_vmi(self, ref: VmiRef, opts: Options) -> None:
        """Patch the VMI's spec; a VMI that ended (or is going) is refused."""
        vmi = await self._get(VMIS, ref, missing_ok=False) or {}
        phase = (vmi.get("status") or {}).get("phase")
        if phase in FINAL_PHASES or (vmi.get("metadata") or {}).get("deletionTimestamp"):
            raise Conflict(f"VMI {ref.namespace}/{ref.name} is not running ({phase})", vmi=ref)
        ops = _ops(vmi.get("spec") or {}, opts, ref, path=VMI_SPEC)
        await self._patch(VMIS, ref, ops, dry_run=opts.dry_run)

    async def _on_vm(self, ref: VmiRef, opts: Options) -> None:
        """The VM's template; its running VMI follows it (controller/vm/hotplug.py)."""
        vm = await self._get(VMS, ref, missing_ok=False) or {}
        template = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        ops = _ops(template, opts, ref, path=VM_TEMPLATE_SPEC)
        await self._patch(VMS, ref, ops, dry_run=opts.dry_run)

    async def _get(
        self, resource: Resource, ref: VmiRef, *, missing_ok: bool
    ) -> dict[str, Any] | None:
        try:
            return await self._client.get(resource, ref.name, namespace=ref.namespace)
        except KubeNotFound as e:
            if missing_ok:
                return None
            raise NotFound(f'{resource.plural} "{ref.name}" not found', vmi=ref) from e
        except KubeError as e:
            raise SubresourceError(f"cannot read {resource.plural}/{ref.name}: {e}", vmi=ref) from e

    async def _patch(
        self, resource: Resource, ref: VmiRef, ops: list[dict[str, Any]], *, dry_run: bool
    ) -> None:
        if dry_run:
            return
        try:
            await self._client.patch(
                resource, ref.name, ops, namespace=ref.namespace, patch_type=PatchType.JSON
            )
        except (KubeInvalid, KubeConflict) as e:  # a `test` failed, or admission refused it
            raise Conflict(
                f"{resource.plural}/{ref.name} changed or refused the volume: {e}", vmi=ref
            ) from e
        except KubeNotFound as e:
            raise NotFound(f'{resource.plural} "{ref.name}" not found', vmi=ref) from e
        except KubeError as e:
            raise SubresourceError(
                f"cannot update {resource.plural}/{ref.name}: {e}", vmi=ref
            ) from e


def _ops(spec: dict[str, Any], opts: Options, ref: VmiRef, *, path: str) -> list[dict[str, Any]]:
    if isinstance(opts, AddVolume):
        return add_ops(spec, opts, ref, path=path)
    return remove_ops(spec, opts, ref, path=path)
