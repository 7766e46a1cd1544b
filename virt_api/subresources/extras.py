"""The subresources answered by the API itself, with KubeVirt's paths, verbs and RBAC:

    GET  …/virtualmachines/<name>/expand-spec      the VM with its instancetype and
                                                   preference applied to spec.template
    PUT  …/namespaces/<ns>/expand-vm-spec          the same for the VM in the body
    PUT  …/virtualmachines/<name>/memorydump       a memory dump into a claim (memorydump.py)
    PUT  …/virtualmachines/<name>/removememorydump the claim's association removed
    GET|PUT …/virtualmachineinstances/<name>/sev/<op>  400: not supported

Each is reviewed (SubjectAccessReview) first, as every action is, so a caller without the
right learns "forbidden", not what is supported. expand-spec only reads: the instancetype
and preference come from the revisions the VM captured, or from the objects themselves for
a VM not started yet; nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog
import yaml
from aiohttp import web

from shared.actions import (
    EXTRA_ACTIONS,
    GROUP_VERSION,
    RESOURCE,
    TOP_LEVEL,
    VM_RESOURCE,
    ActionSpec,
    ExtraAction,
)
from shared.expansion import expand_spec
from shared.kube import VMS, KubeError
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import GetsCreatesPatches
from shared.model import ParseError, VirtualMachine
from shared.revisions import expansion
from shared.sync import SyncError
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.authz import Authorizer, ResourceAttributes, require
from virt_api.subresources.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    SubresourceError,
    VmiRef,
)
from virt_api.subresources.memorydump import MemoryDumpApi
from virt_api.subresources.vmactions import vm_not_found, vm_ref

log = structlog.get_logger("virt_api.subresources.extras")

_NS = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}"
SEV_PATH = f"{_NS}/{RESOURCE}/{{name}}/sev/{{op}}"
EXPAND_VM_SPEC_PATH = f"{_NS}/expand-vm-spec"
MAX_BODY = 1024 * 1024
VM_EXTRA_PATH = f"{_NS}/{VM_RESOURCE}/{{name}}/{{action:expand-spec|memorydump|removememorydump}}"
NOT_SUPPORTED = {
    "sev": "SEV (AMD Secure Encrypted Virtualization) is not supported by kubevirt-py",
}


class Expander(Protocol):
    """The expanded VM (KubeExpander; fakes in unit tests); raises KubeNotFound."""

    async def expanded_vm(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def expanded_body(self, raw: Mapping[str, Any]) -> dict[str, Any]: ...


class KubeExpander:
    """`Expander` over a KubeClient: reads the VM, its revisions or instancetype objects."""

    def __init__(self, client: GetsCreatesPatches) -> None:
        self._client = client

    async def expanded_vm(self, namespace: str, name: str) -> dict[str, Any]:
        raw = await self._client.get(VMS, name, namespace=namespace)
        return await expanded(self._client, raw)

    async def expanded_body(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        return await expanded(self._client, raw)


async def expanded(client: GetsCreatesPatches, raw: Mapping[str, Any]) -> dict[str, Any]:
    """`raw` VM with spec.template.spec expanded and the instancetype/preference matchers
    gone, as KubeVirt's expand-spec answers."""
    vm = VirtualMachine.from_dict(raw)
    out = dict(raw)
    spec = dict(out.get("spec") or {})
    if vm.spec.instancetype is not None or vm.spec.preference is not None:
        exp = await expansion(client, vm, capture=False)
        template = dict(spec.get("template") or {})
        template["spec"] = expand_spec(
            template.get("spec") or {}, instancetype=exp.instancetype, preference=exp.preference
        )
        spec["template"] = template
    spec.pop("instancetype", None)
    spec.pop("preference", None)
    out["spec"] = spec
    return out


class Extras:
    """The route handlers; the caller's identity comes from the authentication middleware."""

    def __init__(
        self,
        *,
        authorizer: Authorizer,
        expander: Expander | None,
        dumps: MemoryDumpApi | None = None,
    ) -> None:
        self._authorizer = authorizer
        self._expander = expander
        self._dumps = dumps

    async def sev(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        ref = VmiRef(namespace=request.match_info["namespace"], name=request.match_info["name"])
        spec = _spec(request, f"sev/{request.match_info['op']}", ref)
        await require(self._authorizer, user, ResourceAttributes.of(spec, ref))
        raise BadRequest(NOT_SUPPORTED["sev"], vmi=ref)

    async def vm(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        ref = vm_ref(request.match_info["namespace"], request.match_info["name"])
        spec = _spec(request, request.match_info["action"], ref)
        await require(self._authorizer, user, ResourceAttributes.of(spec, ref))
        if spec.action is not ExtraAction.EXPAND_SPEC:
            return await self._memory_dump(request, spec, ref, user)
        if self._expander is None:
            raise SubresourceError("expand-spec is not configured", vmi=ref)
        try:
            body = await self._expander.expanded_vm(ref.namespace, ref.name)
        except KubeNotFound as e:
            raise vm_not_found(ref) from e
        except SyncError as e:  # its instancetype/preference is missing or malformed
            raise NotFound(str(e), vmi=ref) from e
        except KubeError as e:
            raise SubresourceError(f"cannot read the VM: {e}", vmi=ref) from e
        log.info("vm_spec_expanded", vm=f"{ref.namespace}/{ref.name}", user=user.name)
        return web.json_response(body)

    async def _memory_dump(
        self, request: web.Request, spec: ActionSpec, ref: VmiRef, user: UserInfo
    ) -> web.StreamResponse:
        if self._dumps is None:
            raise SubresourceError("memory dumps are not configured", vmi=ref)
        if spec.action is ExtraAction.REMOVE_MEMORY_DUMP:
            await self._dumps.remove(ref)
        else:
            body = await request.content.read(MAX_BODY + 1)
            if len(body) > MAX_BODY:
                raise BadRequest(f"the request body is larger than {MAX_BODY} bytes", vmi=ref)
            await self._dumps.dump(ref, body)
        log.info("vm_memory_dump_requested", vm=f"{ref.namespace}/{ref.name}",
                 action=str(spec.action), user=user.name)  # fmt: skip
        return web.Response(status=202)

    async def expand_vm_spec(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        """PUT …/namespaces/<ns>/expand-vm-spec: the VM in the body, expanded."""
        ns = request.match_info["namespace"]
        attrs = ResourceAttributes(
            namespace=ns, name="", verb=TOP_LEVEL["expand-vm-spec"], subresource="",
            resource="expand-vm-spec",
        )  # fmt: skip
        await require(self._authorizer, user, attrs)
        raw = await _vm_body(request, ns)
        ref = vm_ref(ns, str(raw["metadata"].get("name", "")))
        if self._expander is None:
            raise SubresourceError("expand-vm-spec is not configured", vmi=ref)
        try:
            return web.json_response(await self._expander.expanded_body(raw))
        except SyncError as e:
            raise NotFound(str(e), vmi=ref) from e
        except KubeError as e:
            raise SubresourceError(f"cannot expand the VM: {e}", vmi=ref) from e


async def _vm_body(request: web.Request, namespace: str) -> dict[str, Any]:
    """The VirtualMachine in the body (JSON or YAML), in this namespace, or 400."""
    ref = VmiRef(namespace=namespace, name="")
    if request.method != "PUT":
        raise MethodNotAllowed(f"expand-vm-spec takes PUT, not {request.method}", vmi=ref)
    body = await request.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise BadRequest(f"the request body is larger than {MAX_BODY} bytes", vmi=ref)
    try:
        raw = yaml.safe_load(body.decode()) if body.strip() else None
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise BadRequest(f"the body is not a VirtualMachine: {e}", vmi=ref) from e
    if not isinstance(raw, dict) or raw.get("kind") != VirtualMachine.KIND:
        raise BadRequest("the body must be a VirtualMachine object", vmi=ref)
    meta = raw.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise BadRequest("metadata: must be an object", vmi=ref)
    if meta.setdefault("namespace", namespace) != namespace:
        raise BadRequest(f"metadata.namespace: must be {namespace!r} (the request's)", vmi=ref)
    try:
        VirtualMachine.from_dict(raw)
    except ParseError as e:
        raise BadRequest(f"the body is not a valid VirtualMachine: {e}", vmi=ref) from e
    return raw


def _spec(request: web.Request, name: str, ref: VmiRef) -> ActionSpec:
    try:
        spec = EXTRA_ACTIONS[ExtraAction(name)]
    except ValueError:
        raise NotFound(f"unknown action {name!r}", vmi=ref) from None
    if request.method != spec.method:
        raise MethodNotAllowed(f"{name} takes {spec.method}, not {request.method}", vmi=ref)
    return spec


def add_routes(app: web.Application, extras: Extras, user_of: Any) -> None:
    """Register the routes; before the generic `{action}` ones, which would shadow them."""

    async def sev(request: web.Request) -> web.StreamResponse:
        return await extras.sev(request, user_of(request))

    async def vm(request: web.Request) -> web.StreamResponse:
        return await extras.vm(request, user_of(request))

    async def expand_vm_spec(request: web.Request) -> web.StreamResponse:
        return await extras.expand_vm_spec(request, user_of(request))

    app.router.add_route("*", SEV_PATH, sev)
    app.router.add_route("*", VM_EXTRA_PATH, vm)
    app.router.add_route("*", EXPAND_VM_SPEC_PATH, expand_vm_spec)
