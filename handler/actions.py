"""The handler's actions endpoint: what the controller's subresource API forwards to.

Mutual TLS: only a client certificate of the kubevirt-py CA with CN kubevirt-py-controller
gets in (the controller authenticated the user and asked RBAC; we trust the controller).
`PUT .../virtualmachineinstances/<name>/{pause,unpause,softreboot}` and `GET .../{guestosinfo,
userlist,filesystemlist}` under /v1/namespaces/<ns>/ answer the launcher's result as JSON,
or `{code, message, details}`: 404 VMI not here, 502 launcher failed or unreachable, 504
launcher timed out. `GET .../console` and `GET .../vnc` are websockets bridged to the
serial-console and VNC sockets in the launcher's pod; `GET .../portforward/<port>/<protocol>`
a websocket bridged to a TCP connection to the guest's port (masquerade forwards it on the
pod's IP; the launcher adds the forward on demand).
Once listening, the endpoint is published as the Node annotation
`kubevirt.io/handler-endpoint: https://<advertise-host>:<port>`. In the daemon (with
handler.launcher_target's LauncherTarget):

    config = ActionsConfig.from_env(os.environ)          # None: no certificates mounted
    if config is not None:
        target = LauncherTarget(api.get_vmi, node=node, pods_dir=pods_dir)
        publish = node_publisher(api.patch_node, node)
        tg.create_task(ActionsServer(config, target, publish=publish).run(stop))
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

import structlog
from aiohttp import WSCloseCode, web

from handler.errors import HandlerError
from shared import podlayout
from shared.actions import (
    ACTIONS,
    HANDLER_ACTION_PATH,
    HANDLER_PORT_FORWARD_PATH,
    STREAM_PROTOCOLS,
    Action,
)
from shared.kube import KubeError
from shared.kube.ratelimit import Backoff, BackoffPolicy
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from shared.model import VirtualMachineInstance
from shared.mtls import certificate_cn
from shared.tasks import cancelling
from shared.wire.errors import CallTimeout, RemoteError, WireError
from shared.wire.launcher_api import Method
from shared.wire.unixpath import short_path
from shared.wsbridge import bridge

log = structlog.get_logger("handler.actions")

CONTROLLER_CN = "kubevirt-py-controller"
ENV_PREFIX = "VIRT_HANDLER_ACTIONS_"
DEFAULT_CERT_DIR = Path("/etc/kubevirt-py/virt-handler-certs")
DEFAULT_PORT = 8186
EMPTY_DIRS = Path(podlayout.EMPTY_DIRS)
# Where the launcher's QEMU binds the serial console, inside the pod's `private` emptyDir.
CONSOLE_SOCKET = Path(podlayout.PRIVATE_VOLUME, podlayout.CONSOLE_SOCKET)
VNC_SOCKET = Path(podlayout.PRIVATE_VOLUME, podlayout.VNC_SOCKET)
MAX_ARGS = 64 * 1024

# action → (HTTP method, launcher command): the forwarded rows of shared.actions; console and
# vnc (launcher None) are relayed, not called. Port-forward has a route of its own.
ROUTES: Mapping[str, tuple[str, Method | None]] = {
    str(a): (spec.method, spec.launcher) for a, spec in ACTIONS.items() if a != Action.PORT_FORWARD
}

Publish = Callable[[str], Awaitable[None]]  # puts the endpoint URL on this handler's Node
GetVmi = Callable[[str, str], Awaitable[VirtualMachineInstance]]


class ActionTarget(Protocol):
    """Where actions land: the launcher of a VMI on this node. Both raise NotOnThisNode
    when it is not here; `command` raises shared.wire's errors as the launcher answers."""

    async def command(
        self, namespace: str, name: str, method: Method, args: Mapping[str, Any] | None = None
    ) -> Any: ...

    async def console_socket(self, namespace: str, name: str) -> Path: ...

    async def vnc_socket(self, namespace: str, name: str) -> Path: ...

    async def forward_port(self, namespace: str, name: str, port: int) -> tuple[str, int]: ...


class NotOnThisNode(HandlerError):
    """The VMI has no launcher on this node (not here, not yet, or no longer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionsConfig:
    """Where to listen and what to advertise; cert_dir is a mounted kubernetes.io/tls Secret
    (tls.crt, tls.key, and ca.crt: the CA the controller's client certificate chains to)."""

    cert_dir: Path
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT  # 0: any free port (local clusters: nodes share one host)
    advertise_host: str = "127.0.0.1"
    allowed_cn: str = CONTROLLER_CN
    connect_timeout: float = 5.0
    write_timeout: float = 10.0
    heartbeat: float = 30.0  # websocket pings: how a dead console peer is noticed
    shutdown_timeout: float = 3.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self | None:
        """VIRT_HANDLER_ACTIONS_{CERT_DIR,HOST,PORT,ADVERTISE_HOST} (advertise defaults to
        POD_IP, the node's IP for a host-network DaemonSet); None without certificates."""

        def env(name: str, default: str) -> str:
            return environ.get(ENV_PREFIX + name) or default

        cert_dir = Path(env("CERT_DIR", str(DEFAULT_CERT_DIR)))
        if not all((cert_dir / f).is_file() for f in ("tls.crt", "tls.key", "ca.crt")):
            return None
        return cls(
            cert_dir=cert_dir,
            host=env("HOST", "0.0.0.0"),
            port=int(env("PORT", str(DEFAULT_PORT))),
            advertise_host=env("ADVERTISE_HOST", environ.get("POD_IP") or "127.0.0.1"),
        )

    def server_context(self) -> ssl.SSLContext:
        """TLS that requires a client certificate of our CA."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # only our CA, never the system's
        ctx.load_verify_locations(cafile=self.cert_dir / "ca.crt")
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_dir / "tls.crt", self.cert_dir / "tls.key")
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx


def endpoint_patch(url: str) -> dict[str, Any]:
    """The Node merge patch publishing `url`."""
    return {"metadata": {"annotations": {HANDLER_ENDPOINT_ANNOTATION: url}}}


def node_publisher(patch_node: Callable[[str, Any], Awaitable[Any]], node: str) -> Publish:
    """Publish by merge-patching `node` (with HandlerApi.patch_node)."""

    async def publish(url: str) -> None:
        await patch_node(node, endpoint_patch(url))

    return publish


def transport_peer_cn(request: web.Request) -> str | None:
    """The CN of the verified client certificate."""
    transport = request.transport
    return certificate_cn(transport.get_extra_info("peercert")) if transport else None


class _Failure(Exception):
    """An answer other than success, as `{code, message, details}` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.details = dict(details or {})

    def response(self) -> web.Response:
        body = {"code": self.code, "message": self.message, "details": self.details}
        return web.json_response(body, status=self.status)


def _failure(error: Exception) -> _Failure:
    """Map target and wire errors to the answer the controller turns into a Status."""
    if isinstance(error, NotOnThisNode):
        return _Failure(404, "vmi_not_on_node", str(error))
    if isinstance(error, CallTimeout):
        return _Failure(504, "launcher_timeout", str(error))
    if isinstance(error, RemoteError):
        return _Failure(502, error.code, error.message, error.details)
    if isinstance(error, KubeError):
        return _Failure(503, "kube_api_unavailable", f"cannot read the VMI: {error}")
    return _Failure(502, "launcher_unreachable", str(error))


def build_app(
    target: ActionTarget,
    config: ActionsConfig,
    *,
    peer_name: Callable[[web.Request], str | None] = transport_peer_cn,
) -> web.Application:
    """The application (TLS and the port are `ActionsServer`'s business)."""

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        cn = peer_name(request)
        try:
            if cn != config.allowed_cn:
                raise _Failure(403, "forbidden", f"client {cn!r} is not {config.allowed_cn!r}")
            return await handler(request)
        except _Failure as f:
            log.info("action_refused", path=request.path, code=f.code, status=f.status)
            return f.response()
        except web.HTTPNotFound:
            return _Failure(404, "not_found", f"{request.path} is not served").response()

    actions = _Actions(target, config)
    app = web.Application(middlewares=[guard])
    app.router.add_route("*", HANDLER_ACTION_PATH, actions.handle)
    app.router.add_get(HANDLER_PORT_FORWARD_PATH, actions.port_forward)
    return app


async def _args(request: web.Request) -> dict[str, Any]:
    """The launcher command's arguments: the JSON body the controller forwarded, if any."""
    body = await request.content.read(MAX_ARGS + 1)
    if not body.strip():
        return {}
    if len(body) > MAX_ARGS:
        raise _Failure(400, "invalid_argument", f"the body is larger than {MAX_ARGS} bytes")
    try:
        args = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _Failure(400, "invalid_argument", f"the body is not JSON: {e}") from e
    if not isinstance(args, dict):
        raise _Failure(400, "invalid_argument", "the body must be a JSON object")
    return args


class _Actions:
    def __init__(self, target: ActionTarget, config: ActionsConfig) -> None:
        self._target = target
        self._config = config

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        action = request.match_info["action"]
        with structlog.contextvars.bound_contextvars(vmi=f"{ns}/{name}", action=action):
            if action not in ROUTES:
                raise _Failure(404, "unknown_action", f"no action {action!r}")
            http, method = ROUTES[action]
            if request.method != http:
                raise _Failure(405, "method_not_allowed", f"{action} takes {http}")
            if method is None:
                return await self._relay(request, ns, name, action)
            try:
                result = await self._target.command(ns, name, method, await _args(request))
            except (NotOnThisNode, KubeError, WireError) as e:
                raise _failure(e) from e
            log.info("action_done", method=str(method))
            return web.json_response(result)

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        """GET .../portforward/<port>/<protocol>: a TCP connection to the guest's port
        (forwarded by masquerade on the pod's IP), bridged to a websocket."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        port_text, protocol = request.match_info["port"], request.match_info["protocol"]
        with structlog.contextvars.bound_contextvars(
            vmi=f"{ns}/{name}", action="portforward", port=port_text
        ):
            port = int(port_text) if port_text.isdigit() else 0
            if not 1 <= port <= 65535:
                raise _Failure(400, "bad_port", f"port {port_text!r} is not 1-65535")
            if protocol != "tcp":
                raise _Failure(400, "bad_protocol", f"protocol {protocol!r}: only tcp is forwarded")
            ws = self._websocket(request, "portforward")
            try:
                host, pod_port = await self._target.forward_port(ns, name, port)
                async with asyncio.timeout(self._config.connect_timeout):
                    reader, writer = await asyncio.open_connection(host, pod_port)
            except (NotOnThisNode, KubeError, WireError) as e:
                raise _failure(e) from e
            except (OSError, TimeoutError) as e:
                if cancelling():
                    raise
                # Nothing listens there: the tunnel opens and closes without a byte, as a
                # refused connection through a forwarded port does (the CLI names the port).
                log.info("guest_port_unreachable", error=str(e))
                await ws.prepare(request)
                reason = f"cannot connect to guest port {port}"
                await ws.close(code=WSCloseCode.TRY_AGAIN_LATER, message=reason.encode())
                return ws
            return await self._serve(request, ws, reader, writer)

    def _websocket(self, request: web.Request, action: str) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=STREAM_PROTOCOLS, heartbeat=self._config.heartbeat)
        if not ws.can_prepare(request).ok:
            raise _Failure(400, "websocket_required", f"the {action} is a websocket")
        return ws

    async def _relay(
        self, request: web.Request, ns: str, name: str, action: str
    ) -> web.StreamResponse:
        """The console or VNC socket of the VMI's launcher, bridged to a websocket."""
        cfg = self._config
        ws = self._websocket(request, action)
        socket_of = self._target.vnc_socket if action == Action.VNC else self._target.console_socket
        try:
            path = await socket_of(ns, name)
            async with asyncio.timeout(cfg.connect_timeout):
                with short_path(path) as sock:
                    reader, writer = await asyncio.open_unix_connection(sock)
        except (NotOnThisNode, KubeError) as e:
            raise _failure(e) from e
        except (OSError, TimeoutError) as e:
            if cancelling():
                raise
            raise _Failure(502, f"{action}_unavailable", f"cannot open the {action}: {e}") from e
        return await self._serve(request, ws, reader, writer)

    async def _serve(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> web.WebSocketResponse:
        """Upgrade, bridge until either side ends, close both."""
        cfg = self._config
        try:
            async with asyncio.timeout(cfg.write_timeout):
                await ws.prepare(request)
            log.info("stream_opened")
            why = await bridge(ws, reader, writer, write_timeout=cfg.write_timeout)
            log.info("stream_closed", why=why)
        finally:
            writer.close()
            if ws.prepared:
                with contextlib.suppress(TimeoutError, ConnectionError):
                    async with asyncio.timeout(cfg.shutdown_timeout):
                        await ws.close()
        return ws


class ActionsServer:
    """Serves `build_app` over mutual TLS; publishes the endpoint once it listens."""

    def __init__(
        self, config: ActionsConfig, target: ActionTarget, *, publish: Publish | None = None
    ) -> None:
        self._config = config
        self._app = build_app(target, config)
        self._publish = publish
        self.url: str | None = None
        self.started = asyncio.Event()
        self.published = asyncio.Event()

    @property
    def serving(self) -> bool:
        """Listening, and its endpoint published (`published` is set after `started`, at
        once when there is nothing to publish)."""
        return self.published.is_set()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until `stop` is set (or until cancelled)."""
        cfg = self._config
        runner = web.AppRunner(self._app, shutdown_timeout=cfg.shutdown_timeout)
        await runner.setup()
        try:
            site = web.TCPSite(runner, cfg.host, cfg.port, ssl_context=cfg.server_context())
            await site.start()
            port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
            host = f"[{cfg.advertise_host}]" if ":" in cfg.advertise_host else cfg.advertise_host
            self.url = f"https://{host}:{port}"
            log.info("actions_server_started", url=self.url, listen=cfg.host)
            self.started.set()
            async with asyncio.TaskGroup() as tg:
                publishing = tg.create_task(self._publish_until_done(), name="publish-endpoint")
                await (stop.wait() if stop is not None else asyncio.Event().wait())
                publishing.cancel()
        finally:
            await runner.cleanup()
            log.info("actions_server_stopped")

    async def _publish_until_done(self, policy: BackoffPolicy | None = None) -> None:
        if self._publish is None or self.url is None:
            self.published.set()  # nothing to publish: serving once listening
            return
        backoff = Backoff(policy or BackoffPolicy(initial=0.5, cap=30.0))
        while True:
            try:
                async with asyncio.timeout(30.0):
                    await self._publish(self.url)
            except Exception as e:  # a task boundary: log, retry, never take the server down
                if isinstance(e, TimeoutError) and cancelling():
                    raise
                log.warning("actions_endpoint_publish_failed", error=str(e))
                await asyncio.sleep(backoff.next_delay())
                continue
            log.info("actions_endpoint_published", url=self.url)
            self.published.set()
            return
