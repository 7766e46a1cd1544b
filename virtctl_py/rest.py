"""A small synchronous HTTPS client for the verbs that are one or two API requests.

    with Rest.open(target) as api:
        api.subresource("PUT", VMI_ACTIONS, "demo", namespace="ns", subresource="pause", body={})

Its object calls take shared.kube.KubeClient's arguments (get, create, update, patch with a
PatchType, delete; `list` returns the items), so a verb moves from the full client to this
one by dropping `async`/`await`.

http.client and ssl with the kubeconfig's credentials (shared.kube.connection reads them:
CA, client certificate, token, tokenFile, tls-server-name, insecure-skip-tls-verify), one
kept-alive connection for the command's requests. Nothing here imports asyncio, aiohttp,
kubernetes-asyncio or the model: such a verb costs the interpreter's start, a TLS handshake
and its requests. Users whose credentials need kubernetes-asyncio's loader (exec plugins,
auth providers, basic auth) get their token through it once, then the same client.

Errors are shared.kube's, as the full client raises them: ApiError subclasses by status
(the API server's Status body decoded), TransportError when no answer came.
"""

from __future__ import annotations

import builtins
import functools
import http.client
import json
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from shared.kube.connection import Connection, parse_connection
from shared.kube.errors import ConfigError, TransportError, error_from_status
from shared.kube.resources import Resource
from virtctl_py.session import Target

USER_AGENT = "virtctl-py"
MERGE_PATCH = "application/merge-patch+json"  # PatchType.MERGE
JSON_PATCH = "application/json-patch+json"  # PatchType.JSON
# What a kept-alive connection may raise when the server closed it between two requests.
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Rest:
    """One API server, one connection reused for the command's requests; close() ends it."""

    def __init__(
        self,
        load: Callable[[], Connection],
        *,
        timeout: float,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self._load = load  # read at the first request: errors surface where requests fail
        self._conn: Connection | None = None
        self._timeout = timeout
        self._headers = [("Accept", "application/json"), ("User-Agent", USER_AGENT), *headers]
        self._client: http.client.HTTPConnection | None = None

    @classmethod
    def open(cls, target: Target) -> Self:
        """The client of a resolved target (its kubeconfig, context, timeout, headers)."""
        return cls(
            functools.partial(connection, target.kubeconfig, context=target.context),
            timeout=target.request_timeout,
            headers=target.headers,
        )

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._load()
            if conn.proxy:
                raise ConfigError("a proxy-url is not supported by virtctl-py")
            bearer = _bearer(conn)
            if bearer:
                self._headers.append(("Authorization", bearer))
            self._conn = conn
        return self._conn

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def connect(self) -> None:
        """Open the connection now (TCP and the TLS handshake) rather than at the first
        request."""
        if self._client is None:
            self._client = self._connect()
            self._client.connect()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ---- the requests the verbs make ----------------------------------------------------

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", resource.path(namespace=namespace, name=name))

    def list(
        self, resource: Resource, *, namespace: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The items of a list (one page: the CLI lists a VM's migrations, never thousands)."""
        items = self.request("GET", resource.path(namespace=namespace)).get("items")
        return [i for i in items or () if isinstance(i, dict)]

    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        return self.request("POST", resource.path(namespace=ns), body=body)

    def update(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object (metadata.resourceVersion makes it conditional)."""
        meta = body.get("metadata") or {}
        path = resource.path(namespace=meta.get("namespace"), name=str(meta.get("name") or ""))
        return self.request("PUT", path, body=body)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | builtins.list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: str = MERGE_PATCH,
    ) -> dict[str, Any]:
        """A merge patch (an object) or a JSON patch (a list of operations); `patch_type` is
        a shared.kube.PatchType (its values: this module does not import it)."""
        path = resource.path(namespace=namespace, name=name)
        return self.request("PATCH", path, body=patch, content_type=str(patch_type))

    def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        return self.request("DELETE", resource.path(namespace=namespace, name=name), body=body)

    def subresource(
        self,
        method: str,
        resource: Resource,
        name: str,
        *,
        namespace: str | None,
        subresource: str,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """An imperative subresource (e.g. PUT .../virtualmachineinstances/x/pause)."""
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        return self.request(method, path, body=body)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | builtins.list[dict[str, Any]] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """Send one request; the decoded answer (a list answer under "items", a non-JSON one
        under "message", as the full client decodes them), or its typed error."""
        url = urlsplit(self._connection().host)
        target = url.path.rstrip("/") + path  # a server URL may carry a path prefix
        payload = json.dumps(body).encode() if body is not None else None
        try:
            status, raw = self._exchange(method, target, payload, content_type)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise TransportError(f"{method} {path}: {e!r}") from e
        decoded = _decode(raw)
        if not 200 <= status < 300:
            raise error_from_status(status, decoded)
        return decoded or {}

    def _exchange(
        self, method: str, path: str, payload: bytes | None, content_type: str
    ) -> tuple[int, bytes]:
        reused = self._client is not None
        try:
            return self._send(method, path, payload, content_type)
        except STALE:
            if not reused:
                raise
        self.close()  # the server closed the idle connection: once more on a fresh one
        return self._send(method, path, payload, content_type)

    def _send(
        self, method: str, path: str, payload: bytes | None, content_type: str
    ) -> tuple[int, bytes]:
        client = self._client = self._client or self._connect()
        client.putrequest(method, path, skip_accept_encoding=True)
        for key, value in self._headers:  # a header may repeat (Impersonate-Group)
            client.putheader(key, value)
        if payload is not None:
            client.putheader("Content-Type", content_type)
            client.putheader("Content-Length", str(len(payload)))
        client.endheaders(payload)
        response = client.getresponse()
        return response.status, response.read()

    def _connect(self) -> http.client.HTTPConnection:
        conn = self._connection()
        url = urlsplit(conn.host)
        host, port = url.hostname or "", url.port
        if url.scheme != "https":
            return http.client.HTTPConnection(host, port, timeout=self._timeout)
        return _TLSConnection(
            host, port, timeout=self._timeout, context=conn.ssl_context(),
            server_hostname=conn.tls_server_name or host,
        )  # fmt: skip


def connection(kubeconfig: Path, *, context: str | None) -> Connection:
    """The kubeconfig's connection; kubernetes-asyncio's loader only for the users that need
    it (exec plugins, auth providers, basic auth)."""
    import yaml  # noqa: PLC0415 - after the interpreter's own imports, as late as can be

    try:
        raw = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot load Kubernetes client config from {kubeconfig}: {e}") from e
    parsed = parse_connection(raw, context=context, path=kubeconfig)
    if parsed is not None:
        return parsed
    import asyncio  # noqa: PLC0415 - the delegated loader is kubernetes-asyncio's

    from shared.kube.connection import load_connection  # noqa: PLC0415

    return asyncio.run(load_connection(kubeconfig, context=context))


def _bearer(conn: Connection) -> str | None:
    """The Authorization value: the token, else the token source's (a token file, a plugin)."""
    if conn.token_source is None:
        return f"Bearer {conn.token}" if conn.token else None
    import asyncio  # noqa: PLC0415 - token sources are coroutines (the daemons refresh them)

    return asyncio.run(conn.bearer())


def _decode(body: bytes) -> dict[str, Any] | None:
    if not body:
        return None
    try:
        decoded = json.loads(body)
    except ValueError:
        return {"message": body[:500].decode(errors="replace")}
    return decoded if isinstance(decoded, dict) else {"items": decoded}


class _TLSConnection(http.client.HTTPSConnection):
    """HTTPS with a server name other than the host (the kubeconfig's tls-server-name)."""

    def __init__(
        self,
        host: str,
        port: int | None,
        *,
        timeout: float,
        context: ssl.SSLContext,
        server_hostname: str,
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._context = context
        self._server_hostname = server_hostname

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname)
