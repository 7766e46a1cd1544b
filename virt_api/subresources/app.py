"""The aiohttp application of the subresource API: routes, authentication, Status errors.

    /healthz                                   probes; no client certificate needed
    /apis, /apis/<group>, /apis/<group>/v1     discovery (front proxy only)
    /apis/<group>/v1/version | healthz         (front proxy only)
    /apis/upload.cdi.kubevirt.io/v1beta1/…, /v1beta1/upload   CDI's upload API (virt_api.upload)
    /apis/<group>/v1/namespaces/<ns>/virtualmachineinstances/<name>/<action>
        authenticate → SubjectAccessReview → locate → forward (or relay console / vnc)
    /apis/<group>/v1/namespaces/<ns>/{virtualmachineinstances,virtualmachines}/<name>/
        portforward/<port>[/<protocol>]: a TCP tunnel to the (VM's) VMI's guest port
    /apis/<group>/v1/namespaces/<ns>/virtualmachines/<name>/{start,stop,restart,migrate}
        authenticate → SubjectAccessReview → plan → object writes → 202 (vmhttp)
    /apis/<group>/v1/namespaces/<ns>/{virtualmachineinstances,virtualmachines}/<name>/
        {addvolume,removevolume}: the same, on the spec's volumes (volhttp)
    …/virtualmachines/<name>/{expand-spec,memorydump,removememorydump}, …/<vmi>/sev/<op>
        authenticate → SubjectAccessReview → answered here (extras)

Discovery, version and healthz need the front proxy but no review (kube-apiserver
authorized them; KubeVirt's virt-api does the same). Every action is reviewed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from aiohttp import web

from shared.actions import (
    ACTIONS,
    GROUP,
    GROUP_VERSION,
    RESOURCE,
    STREAM_PROTOCOLS,
    VM_ACTIONS,
    VM_PORT_FORWARD,
    VM_RESOURCE,
    Action,
    ActionSpec,
    VolumeAction,
)
from shared.kube import Counter
from shared.kube.ports import ObjectWrites
from shared.mtls import certificate_cn
from virt_api.subresources import discovery
from virt_api.subresources.authn import UserInfo, authenticate
from virt_api.subresources.authz import Authorizer, ResourceAttributes, require
from virt_api.subresources.console import WebSocket, relay
from virt_api.subresources.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    StatusReason,
    SubresourceError,
    VmiRef,
    status_body,
)
from virt_api.subresources.extras import Expander, Extras
from virt_api.subresources.extras import add_routes as add_extra_routes
from virt_api.subresources.freeze import action_args
from virt_api.subresources.frontproxy import FrontProxy
from virt_api.subresources.locate import ClusterReader, Target, locate
from virt_api.subresources.memorydump import MemoryDumpApi
from virt_api.subresources.vmhttp import VmActions, VmStore
from virt_api.subresources.volhttp import VolumeActions
from virt_api.upload.routes import PROXY_PATHS, Uploads, api_group
from virt_api.upload.routes import add_routes as add_upload_routes

log = structlog.get_logger("virt_api.subresources")

ACTION_PATH = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{RESOURCE}/{{name}}/{{action}}"
VM_ACTION_PATH = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{VM_RESOURCE}/{{name}}/{{action}}"
PROBE_PATHS = frozenset({"/healthz"})
USER_KEY = web.RequestKey("user", UserInfo)
PeerName = Callable[[web.Request], str | None]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Forwarder(Protocol):
    """How actions reach the handler (HandlerForwarder; fakes in unit tests)."""

    async def call(
        self, target: Target, spec: ActionSpec, *, args: Mapping[str, Any] | None = None
    ) -> bytes: ...

    def stream(
        self, target: Target, spec: ActionSpec, *, subpath: str = ""
    ) -> contextlib.AbstractAsyncContextManager[WebSocket]: ...


def transport_peer_cn(request: web.Request) -> str | None:
    """The CN of the client certificate the TLS layer verified (None: none given)."""
    transport = request.transport
    return certificate_cn(transport.get_extra_info("peercert")) if transport else None


@dataclass(frozen=True, slots=True, kw_only=True)
class AppDeps:
    front_proxy: FrontProxy
    authorizer: Authorizer
    reader: ClusterReader
    forwarder: Forwarder
    requests: Counter  # kubevirt_subresource_requests_total{action,code}
    vms: VmStore  # start/stop/restart/migrate: reads and writes of VMs, VMIs, VMIMs
    volumes: ObjectWrites | None = None  # addvolume/removevolume (None: not served)
    expander: Expander | None = None  # expand-spec (virt_api.subresources.extras)
    uploads: Uploads | None = None  # upload.cdi.kubevirt.io and the upload proxy
    peer_name: PeerName = transport_peer_cn
    write_timeout: float = 10.0
    heartbeat: float = 30.0
    close_timeout: float = 5.0


def build_app(deps: AppDeps) -> web.Application:
    """The application; serving (TLS, port) is the caller's business."""
    app = web.Application(middlewares=[_status_errors(deps), _authenticate(deps)])
    app.router.add_get("/healthz", _text("ok"))
    app.router.add_get("/apis", _json(functools.partial(_groups, deps)))
    if deps.uploads is not None:
        add_upload_routes(app, deps.uploads, lambda request: request[USER_KEY])
    app.router.add_get(f"/apis/{GROUP}", _json(discovery.api_group))
    app.router.add_get(f"/apis/{GROUP_VERSION}", _json(discovery.api_resource_list))
    app.router.add_get(f"/apis/{GROUP_VERSION}/version", _json(discovery.version_info))
    app.router.add_get(f"/apis/{GROUP_VERSION}/healthz", _text("ok"))
    dumps = MemoryDumpApi(deps.volumes) if deps.volumes is not None else None
    extras = Extras(authorizer=deps.authorizer, expander=deps.expander, dumps=dumps)
    add_extra_routes(app, extras, lambda request: request[USER_KEY])
    if deps.volumes is not None:  # before the generic action routes, which would match too
        volume_actions = VolumeActions(authorizer=deps.authorizer, client=deps.volumes)

        async def volume_action(request: web.Request) -> web.StreamResponse:
            return await volume_actions.handle(request, request[USER_KEY])

        for resource in (RESOURCE, VM_RESOURCE):
            for action in VolumeAction:
                path = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{{resource:{resource}}}"
                app.router.add_route("*", f"{path}/{{name}}/{{action:{action}}}", volume_action)
    actions = _Actions(deps)
    app.router.add_route("*", ACTION_PATH, actions.handle)
    forwards = ((RESOURCE, ACTIONS[Action.PORT_FORWARD]), (VM_RESOURCE, VM_PORT_FORWARD))
    for resource, spec in forwards:
        for tail in ("{port}", "{port}/{protocol}"):
            path = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{resource}/{{name}}/portforward"
            app.router.add_get(f"{path}/{tail}", functools.partial(actions.port_forward, spec))
    vm_actions = VmActions(authorizer=deps.authorizer, store=deps.vms)

    async def vm_action(request: web.Request) -> web.StreamResponse:
        return await vm_actions.handle(request, request[USER_KEY])

    app.router.add_route("*", VM_ACTION_PATH, vm_action)
    return app


def _text(text: str) -> Handler:
    async def handle(_: web.Request) -> web.StreamResponse:
        return web.Response(text=text)

    return handle


def _json(render: Callable[[], dict[str, Any]]) -> Handler:
    async def handle(_: web.Request) -> web.StreamResponse:
        return web.json_response(render())

    return handle


def _groups(deps: AppDeps) -> dict[str, Any]:
    groups = discovery.api_group_list()
    if deps.uploads is not None:
        groups["groups"].append(
            {k: v for k, v in api_group().items() if k not in ("kind", "apiVersion")}
        )
    return groups


def _status_errors(deps: AppDeps) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except SubresourceError as e:
            log.info("subresource_refused", path=request.path, code=e.code, reason=e.reason)
            response = web.json_response(e.to_status(), status=e.code)
        except web.HTTPNotFound:
            response = _status(404, StatusReason.NOT_FOUND, f"{request.path} is not served")
        except web.HTTPMethodNotAllowed:
            response = _status(405, StatusReason.METHOD_NOT_ALLOWED, f"{request.method} refused")
        action = request.match_info.get("action")
        if action is not None and (
            action in ACTIONS or action in VM_ACTIONS or action in set(VolumeAction)
        ):
            deps.requests.labels(action, str(response.status)).inc()
        return response

    return middleware


def _authenticate(deps: AppDeps) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The upload proxy's callers hold a token, not the front proxy's certificate.
        if request.path not in PROBE_PATHS and not (
            deps.uploads is not None and request.path in PROXY_PATHS
        ):
            request[USER_KEY] = authenticate(
                deps.front_proxy.config,
                peer_cn=deps.peer_name(request),
                headers=request.headers.items(),
            )
        return await handler(request)

    return middleware


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_body(code, reason, message), status=code)


class _Actions:
    """PUT/GET …/virtualmachineinstances/<name>/<action>."""

    def __init__(self, deps: AppDeps) -> None:
        self._deps = deps

    async def handle(self, request: web.Request) -> web.StreamResponse:
        vmi = VmiRef(namespace=request.match_info["namespace"], name=request.match_info["name"])
        spec = _spec(request, vmi)
        user = request[USER_KEY]
        with structlog.contextvars.bound_contextvars(
            vmi=f"{vmi.namespace}/{vmi.name}", action=str(spec.action), user=user.name
        ):
            await require(self._deps.authorizer, user, ResourceAttributes.of(spec, vmi))
            ws = self._websocket(request, spec, vmi)
            target = await locate(self._deps.reader, vmi)
            if ws is not None:
                return await self._stream(request, ws, target, spec)
            args = await action_args(request, spec, vmi)
            body = await self._deps.forwarder.call(target, spec, args=args)
            log.info("subresource_forwarded", node=target.node)
            if spec.method == "PUT" and spec.action is not Action.BACKUP:
                return web.Response(status=200)  # the backup controller reads its job's state
            return web.Response(body=body, content_type="application/json")

    async def port_forward(self, spec: ActionSpec, request: web.Request) -> web.StreamResponse:
        """GET …/portforward/<port>[/<protocol>] (protocol tcp by default)."""
        vmi = VmiRef(namespace=request.match_info["namespace"], name=request.match_info["name"])
        port_text = request.match_info["port"]
        protocol = request.match_info.get("protocol", "tcp")
        user = request[USER_KEY]
        with structlog.contextvars.bound_contextvars(
            vmi=f"{vmi.namespace}/{vmi.name}", action="portforward", port=port_text, user=user.name
        ):
            port = int(port_text) if port_text.isdigit() else 0
            if not 1 <= port <= 65535:
                raise BadRequest(f"port {port_text!r}: must be a port number 1-65535", vmi=vmi)
            if protocol not in ("tcp", "udp"):
                raise BadRequest(f"protocol {protocol!r}: must be tcp or udp", vmi=vmi)
            if protocol == "udp":
                raise BadRequest("udp port-forward is not supported by kubevirt-py", vmi=vmi)
            await require(self._deps.authorizer, user, ResourceAttributes.of(spec, vmi))
            ws = self._websocket(request, spec, vmi)
            assert ws is not None  # a stream action
            target = await locate(self._deps.reader, vmi)
            return await self._stream(request, ws, target, spec, subpath=f"/{port}/{protocol}")

    def _websocket(
        self, request: web.Request, spec: ActionSpec, vmi: VmiRef
    ) -> web.WebSocketResponse | None:
        if not spec.stream:
            return None
        ws = web.WebSocketResponse(protocols=STREAM_PROTOCOLS, heartbeat=self._deps.heartbeat)
        if not ws.can_prepare(request).ok:
            raise BadRequest(f"{spec.action} needs a websocket upgrade", vmi=vmi)
        return ws

    async def _stream(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        target: Target,
        spec: ActionSpec,
        *,
        subpath: str = "",
    ) -> web.StreamResponse:
        """Connect to the handler first, so its failures are still Status answers."""
        deps = self._deps
        async with deps.forwarder.stream(target, spec, subpath=subpath) as upstream:
            async with asyncio.timeout(deps.write_timeout):
                await ws.prepare(request)
            log.info("stream_opened", node=target.node)
            try:
                why = await relay(ws, upstream, write_timeout=deps.write_timeout)
                log.info("stream_closed", why=why)
            finally:
                with contextlib.suppress(TimeoutError, ConnectionError):
                    async with asyncio.timeout(deps.close_timeout):
                        await ws.close()
        return ws


def _spec(request: web.Request, vmi: VmiRef) -> ActionSpec:
    name = request.match_info["action"]
    if name not in ACTIONS:
        known = ", ".join(ACTIONS)
        raise NotFound(f"unknown action {name!r} (one of: {known})", vmi=vmi)
    spec = ACTIONS[Action(name)]
    if spec.action is Action.PORT_FORWARD:
        raise NotFound("portforward needs a port: …/portforward/<port>[/<protocol>]", vmi=vmi)
    if request.method != spec.method:
        raise MethodNotAllowed(f"{name} takes {spec.method}, not {request.method}", vmi=vmi)
    return spec
