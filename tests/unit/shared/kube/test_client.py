"""The client facade over a fake transport: paths, verbs, bodies, typed errors, paging,
watch parsing, rate limiting and the kubevirt_rest_client_* metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from shared.kube.api_types import DeleteOptions, PatchType, WatchEventType
from shared.kube.client import ClientConfig, KubeClient
from shared.kube.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from shared.kube.metrics import Registry
from shared.kube.ratelimit import RateLimit, TokenBucket
from shared.kube.resources import LEASES, NODES, PODS, VMIS
from shared.kube.transport import RawResponse
from tests.unit.shared.kube.fakes import FakeClock, RecordingSleep

HOST = "https://127.0.0.1:6443"


@dataclass
class Sent:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str


@dataclass
class FakeStream:
    status: int
    chunks: list[bytes]
    closed: bool = False

    async def read_all(self) -> bytes:
        return b"".join(self.chunks)

    async def lines(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeTransport:
    """Answers requests from a queue of (status, body) and records what was sent."""

    answers: list[tuple[int, Any] | Exception] = field(default_factory=list)
    streams: list[FakeStream] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    hang: bool = False

    @property
    def host(self) -> str:
        return HOST

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: float,
    ) -> RawResponse:
        self.sent.append(Sent(method, path, dict(query), body, content_type))
        if self.hang:
            await asyncio.Event().wait()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, payload = answer
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return RawResponse(status, raw)

    async def open_stream(
        self,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        connect_timeout: float,
        read_timeout: float,
    ) -> FakeStream:
        self.sent.append(Sent("GET", path, dict(query), None, ""))
        return self.streams.pop(0)

    async def close(self) -> None:
        return None


def make(
    transport: FakeTransport, *, limiter: TokenBucket | None = None, timeout: float = 30.0
) -> tuple[KubeClient, Registry]:
    registry = Registry()
    config = ClientConfig(request_timeout=timeout)
    client = KubeClient(
        transport, config=config, registry=registry, clock=FakeClock(), limiter=limiter
    )
    return client, registry


def status_body(code: int, reason: str, message: str = "msg") -> dict[str, Any]:
    return {
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


async def test_get_fills_kind_and_counts_the_request() -> None:
    """get returns the raw object (apiVersion/kind filled) and is counted by code/verb."""
    t = FakeTransport(answers=[(200, {"metadata": {"name": "p", "namespace": "ns"}})])
    client, registry = make(t)
    obj = await client.get(PODS, "p", namespace="ns")
    assert (obj["apiVersion"], obj["kind"]) == ("v1", "Pod")
    assert t.sent[0].path == "/api/v1/namespaces/ns/pods/p"
    labels = {"code": "200", "method": "GET", "host": HOST, "resource": "pods", "verb": "get"}
    assert registry.sample("kubevirt_rest_client_requests_total", labels) == 1
    url = "/api/v1/namespaces/{namespace}/pods/{name}"
    latency = "kubevirt_rest_client_request_latency_seconds_count"
    assert registry.sample(latency, {"verb": "get", "url": url}) == 1


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        pytest.param(400, "BadRequest", BadRequest, id="400"),
        pytest.param(401, "Unauthorized", Unauthorized, id="401"),
        pytest.param(403, "Forbidden", Forbidden, id="403"),
        pytest.param(404, "NotFound", NotFound, id="404"),
        pytest.param(409, "Conflict", Conflict, id="409-conflict"),
        pytest.param(409, "AlreadyExists", AlreadyExists, id="409-exists"),
        pytest.param(410, "Expired", Gone, id="410"),
        pytest.param(422, "Invalid", Invalid, id="422"),
        pytest.param(429, "TooManyRequests", TooManyRequests, id="429"),
        pytest.param(503, "ServiceUnavailable", ServerError, id="503"),
        pytest.param(418, "Teapot", ApiError, id="other"),
    ],
)
async def test_error_statuses_map_to_typed_errors(
    status: int, reason: str, cls: type[ApiError]
) -> None:
    """Each HTTP failure status becomes its error class, carrying status, reason, message."""
    t = FakeTransport(answers=[(status, status_body(status, reason, "why"))])
    client, registry = make(t)
    with pytest.raises(cls) as info:
        await client.get(VMIS, "v", namespace="ns")
    assert type(info.value) is cls
    assert (info.value.status, info.value.reason, info.value.message) == (status, reason, "why")
    counter = registry.get("kubevirt_rest_client_requests_total")
    assert counter is not None and f'code="{status}"' in registry.render()


async def test_non_json_error_body_still_maps() -> None:
    """A plain-text error answer (a proxy's) still yields the typed error."""
    t = FakeTransport(answers=[(503, b"upstream connect error")])
    client, _ = make(t)
    with pytest.raises(ServerError, match="upstream connect error"):
        await client.get(PODS, "p", namespace="ns")


async def test_transport_failure_is_counted_as_error() -> None:
    """A request without an HTTP answer raises TransportError and counts code <error>."""
    t = FakeTransport(answers=[TransportError("connection refused")])
    client, registry = make(t)
    with pytest.raises(TransportError):
        await client.get(PODS, "p", namespace="ns")
    assert 'code="<error>"' in registry.render()


async def test_request_timeout_becomes_transport_error() -> None:
    """A request with no answer within request_timeout raises TransportError."""
    t = FakeTransport(hang=True)
    client, _ = make(t, timeout=0.01)
    with pytest.raises(TransportError, match="timed out"):
        await client.get(PODS, "p", namespace="ns")


async def test_cancellation_is_not_turned_into_an_error() -> None:
    """Cancelling a caller mid-request propagates CancelledError."""
    t = FakeTransport(hang=True)
    client, _ = make(t)
    task = asyncio.create_task(client.get(PODS, "p", namespace="ns"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    ("call", "method", "path", "content_type"),
    [
        pytest.param(
            lambda c: c.create(VMIS, {"metadata": {"name": "v", "namespace": "ns"}}),
            "POST",
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances",
            "application/json",
            id="create",
        ),
        pytest.param(
            lambda c: c.update(
                LEASES, {"metadata": {"name": "l", "namespace": "kv", "resourceVersion": "5"}}
            ),
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kv/leases/l",
            "application/json",
            id="update",
        ),
        pytest.param(
            lambda c: c.update_status(VMIS, {"metadata": {"name": "v", "namespace": "ns"}}),
            "PUT",
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/v/status",
            "application/json",
            id="update-status",
        ),
        pytest.param(
            lambda c: c.patch(
                NODES, "n1", {"metadata": {"labels": {"a": "b"}}}, namespace="ignored"
            ),
            "PATCH",
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            id="merge-patch-cluster-scoped",
        ),
        pytest.param(
            lambda c: c.patch(
                PODS,
                "p",
                [{"op": "test", "path": "/x", "value": 1}],
                namespace="ns",
                patch_type=PatchType.JSON,
            ),
            "PATCH",
            "/api/v1/namespaces/ns/pods/p",
            "application/json-patch+json",
            id="json-patch",
        ),
        pytest.param(
            lambda c: c.patch(VMIS, "v", {"status": {}}, namespace="ns", subresource="status"),
            "PATCH",
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/v/status",
            "application/merge-patch+json",
            id="status-patch",
        ),
        pytest.param(
            lambda c: c.delete(PODS, "p", namespace="ns"),
            "DELETE",
            "/api/v1/namespaces/ns/pods/p",
            "application/json",
            id="delete",
        ),
    ],
)
async def test_writes_use_the_right_method_path_and_content_type(
    call: Any, method: str, path: str, content_type: str
) -> None:
    """Each write verb maps to its HTTP method, path and content type."""
    t = FakeTransport(answers=[(200, {"metadata": {"name": "x"}})])
    client, _ = make(t)
    await call(client)
    sent = t.sent[0]
    assert (sent.method, sent.path, sent.content_type) == (method, path, content_type)


async def test_patch_type_and_body_must_agree() -> None:
    """A JSON patch must be a list of ops; a merge patch must be an object."""
    client, _ = make(FakeTransport())
    with pytest.raises(ValueError):
        await client.patch(PODS, "p", {"a": 1}, namespace="ns", patch_type=PatchType.JSON)
    with pytest.raises(ValueError):
        await client.patch(PODS, "p", [{"op": "remove", "path": "/a"}], namespace="ns")


async def test_delete_sends_options_with_preconditions() -> None:
    """Delete options carry grace period, UID/resourceVersion preconditions and propagation."""
    t = FakeTransport(answers=[(200, {"kind": "Status", "status": "Success"})])
    client, _ = make(t)
    opts = DeleteOptions(grace_period_seconds=0, uid="u1", propagation_policy="Foreground")
    await client.delete(PODS, "p", namespace="ns", options=opts)
    assert t.sent[0].body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u1"},
        "propagationPolicy": "Foreground",
    }


async def test_list_all_follows_continue_tokens() -> None:
    """list_all pages with limit/continue and returns the first page's resourceVersion."""
    t = FakeTransport(
        answers=[
            (
                200,
                {
                    "metadata": {"resourceVersion": "50", "continue": "c1"},
                    "items": [{"metadata": {"name": "a"}}],
                },
            ),
            (200, {"metadata": {"resourceVersion": "50"}, "items": [{"metadata": {"name": "b"}}]}),
        ]
    )
    client, _ = make(t)
    result = await client.list_all(
        PODS, namespace="ns", label_selector="kubevirt.io=virt-launcher", page_size=1
    )
    assert [i["metadata"]["name"] for i in result.items] == ["a", "b"]
    assert all(i["kind"] == "Pod" for i in result.items)
    assert result.resource_version == "50"
    assert t.sent[0].query == {"labelSelector": "kubevirt.io=virt-launcher", "limit": "1"}
    assert t.sent[1].query["continue"] == "c1"
    assert t.sent[1].path == "/api/v1/namespaces/ns/pods"


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


async def test_watch_yields_events_and_bookmarks() -> None:
    """Watch lines become typed events (blank keep-alive lines skipped); the request asks
    for bookmarks, the resourceVersion and a server timeout."""
    stream = FakeStream(
        200,
        [
            line("ADDED", {"metadata": {"name": "a", "resourceVersion": "11"}}),
            b"\n",
            line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "12"}}),
            line("DELETED", {"metadata": {"name": "a", "resourceVersion": "13"}}),
        ],
    )
    t = FakeTransport(streams=[stream])
    client, registry = make(t)
    events = [
        e
        async for e in client.watch(PODS, namespace="ns", resource_version="10", timeout_seconds=60)
    ]
    assert [(e.type, e.resource_version) for e in events] == [
        (WatchEventType.ADDED, "11"),
        (WatchEventType.BOOKMARK, "12"),
        (WatchEventType.DELETED, "13"),
    ]
    assert events[0].object["kind"] == "Pod"
    assert t.sent[0].query == {
        "watch": "true",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "60",
        "resourceVersion": "10",
    }
    assert stream.closed
    assert 'verb="watch"' in registry.render()


async def test_watch_error_event_raises_gone() -> None:
    """An ERROR event with code 410 raises Gone after the events before it."""
    stream = FakeStream(
        200,
        [
            line("ADDED", {"metadata": {"name": "a", "resourceVersion": "11"}}),
            line("ERROR", status_body(410, "Expired", "too old resource version: 5 (100)")),
        ],
    )
    client, _ = make(FakeTransport(streams=[stream]))
    seen = []
    with pytest.raises(Gone, match="too old"):
        async for e in client.watch(PODS, resource_version="5"):
            seen.append(e)
    assert len(seen) == 1
    assert stream.closed


async def test_watch_refused_at_open_raises_typed_error() -> None:
    """A watch answered with an HTTP error status raises before any event."""
    stream = FakeStream(403, [json.dumps(status_body(403, "Forbidden")).encode()])
    client, _ = make(FakeTransport(streams=[stream]))
    with pytest.raises(Forbidden):
        async for _ in client.watch(VMIS):
            pass


async def test_malformed_watch_line_is_a_transport_error() -> None:
    """A line that is not a watch event breaks the watch with TransportError."""
    client, _ = make(FakeTransport(streams=[FakeStream(200, [b"{not json\n"])]))
    with pytest.raises(TransportError, match="malformed"):
        async for _ in client.watch(PODS):
            pass


async def test_abandoned_watch_closes_its_stream() -> None:
    """Leaving a watch early (aclosing) closes the HTTP stream."""
    stream = FakeStream(200, [line("ADDED", {"metadata": {"name": str(i)}}) for i in range(5)])
    client, _ = make(FakeTransport(streams=[stream]))
    async with contextlib.aclosing(client.watch(PODS)) as events:
        async for _ in events:
            break
    assert stream.closed


async def test_requests_wait_for_the_rate_limiter() -> None:
    """Requests beyond the burst wait their turn and the wait is recorded."""
    sleep = RecordingSleep()
    limiter = TokenBucket(RateLimit(qps=10.0, burst=1), clock=FakeClock(), sleep=sleep)
    t = FakeTransport(answers=[(200, {}), (200, {}), (200, {})])
    client, registry = make(t, limiter=limiter)
    for _ in range(3):
        await client.get(NODES, "n1")
    assert sleep.delays == pytest.approx([0.1, 0.2])
    waited = "kubevirt_rest_client_rate_limiter_duration_seconds_count"
    assert registry.sample(waited, {"verb": "get", "url": "/api/v1/nodes/{name}"}) == 3
