"""The typed facade the daemons call: get/list/watch/create/update/patch/delete on any
`Resource`, raw dicts in and out, typed errors, client-side rate limiting and metrics.

    async with await KubeClient.connect(ClientConfig(kubeconfig=path), registry=reg) as kube:
        vmi = VirtualMachineInstance.from_dict(await kube.get(VMIS, "vm1", namespace="ns"))

Every request waits on the token bucket, runs under `asyncio.timeout`, and is counted in
kubevirt_rest_client_requests_total{code,method,host,resource,verb} and timed in
kubevirt_rest_client_request_latency_seconds{verb,url} (url is the path template).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import json
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from shared.kube.api_types import (
    DeleteOptions,
    ListResult,
    PatchType,
    WatchEvent,
    parse_watch_event,
)
from shared.kube.connection import load_connection
from shared.kube.errors import TransportError, error_from_status
from shared.kube.metrics import Registry
from shared.kube.ratelimit import CONTROLLER_RATE_LIMIT, MonotonicClock, RateLimit, TokenBucket
from shared.kube.resources import Resource, with_kind
from shared.kube.restmetrics import RestMetrics
from shared.kube.transport import AioTransport, Query, Stream, Transport
from shared.tasks import cancelling

ERROR_CODE = "<error>"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to reach the API server; `kubeconfig=None` means in-cluster."""

    kubeconfig: Path | None = None
    context: str | None = None
    rate_limit: RateLimit = field(default_factory=lambda: CONTROLLER_RATE_LIMIT)
    request_timeout: float = 30.0
    connect_timeout: float = 10.0
    # Client-side slack on top of a watch's server-side timeoutSeconds.
    watch_slack: float = 30.0
    user_agent: str = "kubevirt-py"
    max_connections: int = 100
    # Sent with every request, e.g. Impersonate-User / Impersonate-Group (a CLI's --as).
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class _Op:
    """One request, described for the transport and the metrics."""

    verb: str
    method: str
    resource: Resource
    path: str
    url: str
    query: Query = ()


class KubeClient:
    """Raw-dict CRUD + watch on any `Resource`, with typed errors and metrics."""

    def __init__(
        self,
        transport: Transport,
        *,
        config: ClientConfig,
        registry: Registry,
        clock: MonotonicClock = time.monotonic,
        limiter: TokenBucket | None = None,
    ) -> None:
        self._transport = transport
        self._config = config
        self._clock = clock
        self._limiter = limiter or TokenBucket(config.rate_limit, clock=clock)
        self._m = RestMetrics(registry)

    @classmethod
    async def connect(cls, config: ClientConfig, *, registry: Registry) -> KubeClient:
        """A client from a kubeconfig path or the in-cluster service account."""
        conn = await load_connection(config.kubeconfig, context=config.context)
        transport = AioTransport.from_connection(
            conn,
            user_agent=config.user_agent,
            max_connections=config.max_connections,
            headers=config.headers,
        )
        return cls(transport, config=config, registry=registry)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- reads --------------------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """One object; NotFound when absent."""
        op = self._op("get", "GET", resource, namespace=namespace, name=name)
        return with_kind(resource, await self._send(op))

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult:
        """One page of objects (consistent read); `list_all` follows continue tokens."""
        query = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=str(limit) if limit else None,
            **{"continue": continue_token},
        )
        op = self._op("list", "GET", resource, namespace=namespace, query=query)
        body = await self._send(op)
        meta = body.get("metadata") or {}
        items = [with_kind(resource, i) for i in body.get("items") or ()]
        return ListResult(items, str(meta.get("resourceVersion") or ""), meta.get("continue"))

    async def list_all(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ListResult:
        """Every object, paging by `page_size`; the resourceVersion is the first page's."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        first_rv: str | None = None
        while True:
            page = await self.list(
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            items.extend(page.items)
            first_rv = first_rv or page.resource_version
            token = page.continue_token
            if not token:
                return ListResult(items, first_rv)

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Watch events from `resource_version`, with bookmarks; ERROR events raise (410 → Gone).

        An async generator: close it (`contextlib.aclosing`) to release the connection.
        The server ends the watch after `timeout_seconds`; the socket read times out after
        that plus `watch_slack`, so a silently dead connection cannot hang the caller.
        """
        query = _query(
            watch="true",
            allowWatchBookmarks="true",
            timeoutSeconds=str(timeout_seconds),
            resourceVersion=resource_version,
            labelSelector=label_selector,
            fieldSelector=field_selector,
        )
        op = self._op("watch", "GET", resource, namespace=namespace, query=query)
        stream = await self._open_stream(
            op, read_timeout=timeout_seconds + self._config.watch_slack
        )
        try:
            async for line in stream.lines():
                if line.strip():
                    yield parse_watch_event(resource, line)
        finally:
            stream.close()

    # ---- writes -------------------------------------------------------------------------

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Create; AlreadyExists when the name is taken."""
        ns = namespace or _meta(body).get("namespace")
        op = self._op("create", "POST", resource, namespace=ns)
        return with_kind(resource, await self._send(op, body=dict(body)))

    async def update(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object; Conflict when metadata.resourceVersion is stale."""
        return await self._put(resource, body, subresource=None)

    async def update_status(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT to the status subresource (only .status changes); Conflict when stale."""
        return await self._put(resource, body, subresource="status")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | builtins.list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Merge patch (a dict) or JSON patch (a list of ops, `test` ops included)."""
        if (patch_type is PatchType.JSON) != isinstance(patch, list):
            raise ValueError("a JSON patch is a list of operations; other patches are objects")
        op = self._op(
            "patch", "PATCH", resource, namespace=namespace, name=name, subresource=subresource
        )
        body: Any = list(patch) if isinstance(patch, list) else dict(patch)
        return with_kind(resource, await self._send(op, body=body, content_type=patch_type))

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]:
        """Delete (the answer is the object being finalized, or a Status); NotFound if gone."""
        op = self._op("delete", "DELETE", resource, namespace=namespace, name=name)
        body = (options or DeleteOptions()).to_dict()
        return dict(await self._send(op, body=body))

    async def call_subresource(
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
        verb = "get" if method == "GET" else "update"
        op = self._op(
            verb, method, resource, namespace=namespace, name=name, subresource=subresource
        )
        return await self._send(op, body=dict(body) if body is not None else None)

    async def get_path(self, resource: Resource, suffix: str) -> dict[str, Any]:
        """GET a path under a group/version that is not an object (e.g. ``version``)."""
        op = self._op("get", "GET", resource)
        base = op.path.rsplit("/", 1)[0]
        return await self._send(dataclasses.replace(op, path=f"{base}/{suffix}", url=suffix))

    async def _put(
        self, resource: Resource, body: Mapping[str, Any], *, subresource: str | None
    ) -> dict[str, Any]:
        meta = _meta(body)
        name = meta.get("name")
        if not name:
            raise ValueError("update needs metadata.name")
        op = self._op(
            "update",
            "PUT",
            resource,
            namespace=meta.get("namespace"),
            name=str(name),
            subresource=subresource,
        )
        return with_kind(resource, await self._send(op, body=dict(body)))

    # ---- plumbing -----------------------------------------------------------------------

    def _op(
        self,
        verb: str,
        method: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        query: Query = (),
    ) -> _Op:
        namespace = namespace if resource.namespaced else None
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        url = resource.template(
            namespaced=bool(namespace), named=name is not None, subresource=subresource
        )
        return _Op(verb, method, resource, path, url, tuple(query))

    async def _throttle(self, op: _Op) -> None:
        waited = await self._limiter.acquire()
        self._m.limiter.labels(op.verb, op.url).observe(waited)

    def _record(self, op: _Op, code: str, started: float) -> None:
        host = self._transport.host
        self._m.requests.labels(code, op.method, host, op.resource.plural, op.verb).inc()
        self._m.latency.labels(op.verb, op.url).observe(self._clock() - started)

    async def _send(
        self, op: _Op, *, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        await self._throttle(op)
        started, code = self._clock(), ERROR_CODE
        timeout = self._config.request_timeout
        try:
            async with asyncio.timeout(timeout):
                resp = await self._transport.request(
                    op.method, op.path, query=op.query, body=body,
                    content_type=content_type, timeout=timeout,
                )  # fmt: skip
            code = str(resp.status)
        except TimeoutError as e:
            if cancelling():
                raise
            raise TransportError(f"{op.method} {op.path}: timed out after {timeout}s") from e
        finally:
            self._record(op, code, started)
        decoded = _decode(resp.body)
        if not 200 <= resp.status < 300:
            raise error_from_status(resp.status, decoded)
        return decoded or {}

    async def _open_stream(self, op: _Op, *, read_timeout: float) -> Stream:
        await self._throttle(op)
        started, code = self._clock(), ERROR_CODE
        connect = self._config.connect_timeout
        try:
            async with asyncio.timeout(self._config.request_timeout):
                stream = await self._transport.open_stream(
                    op.path, query=op.query, connect_timeout=connect, read_timeout=read_timeout
                )
                code = str(stream.status)
                if stream.status != 200:
                    raise error_from_status(stream.status, _decode(await stream.read_all()))
        except TimeoutError as e:
            if cancelling():
                raise
            raise TransportError(f"watch {op.path}: no answer in time") from e
        finally:
            self._record(op, code, started)
        return stream


def _decode(body: bytes) -> dict[str, Any] | None:
    if not body:
        return None
    try:
        decoded = json.loads(body)
    except ValueError:
        return {"message": body[:500].decode(errors="replace")}
    return decoded if isinstance(decoded, dict) else {"items": decoded}


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _query(**params: str | None) -> Query:
    return tuple((k, v) for k, v in params.items() if v)
