"""The real transport (shared.kube.connection's config + aiohttp) against a small local HTTP
server standing in for the API server: auth header, errors, patch bodies, streaming watch;
and loading config from a kubeconfig or an in-cluster service account."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from shared.kube.api_types import PatchType, WatchEventType
from shared.kube.client import ClientConfig, KubeClient
from shared.kube.connection import Connection, InClusterPaths, load_connection
from shared.kube.errors import ConfigError, NotFound, TransportError
from shared.kube.metrics import Registry
from shared.kube.resources import PODS
from shared.kube.transport import AioTransport

TOKEN = "s3cr3t"


def fake_apiserver() -> web.Application:
    seen: list[dict[str, Any]] = []

    def authorized(request: web.Request) -> None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            raise web.HTTPUnauthorized()

    async def get_pod(request: web.Request) -> web.Response:
        authorized(request)
        name = request.match_info["name"]
        if name == "missing":
            body = {
                "kind": "Status",
                "code": 404,
                "reason": "NotFound",
                "message": 'pods "missing" not found',
            }
            return web.json_response(body, status=404)
        return web.json_response(
            {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "7"}}
        )

    async def patch_pod(request: web.Request) -> web.Response:
        authorized(request)
        seen.append({"ctype": request.content_type, "body": await request.json()})
        return web.json_response(
            {"metadata": {"name": request.match_info["name"]}, "echo": seen[-1]}
        )

    async def list_or_watch(request: web.Request) -> web.StreamResponse:
        authorized(request)
        if request.query.get("watch") != "true":
            return web.json_response(
                {"metadata": {"resourceVersion": "9"}, "items": [{"metadata": {"name": "a"}}]}
            )
        resp = web.StreamResponse()
        await resp.prepare(request)
        for kind, rv in [("ADDED", "10"), ("BOOKMARK", "11")]:
            line = {
                "type": kind,
                "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": rv}},
            }
            await resp.write(json.dumps(line).encode() + b"\n")
        if request.query.get("resourceVersion") == "hang":
            await asyncio.sleep(30)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods/{name}", get_pod)
    app.router.add_patch("/api/v1/namespaces/ns/pods/{name}", patch_pod)
    app.router.add_get("/api/v1/namespaces/ns/pods", list_or_watch)
    return app


def write_kubeconfig(path: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubeClient]:
    server = TestServer(fake_apiserver())
    await server.start_server()
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{server.port}")
        config = ClientConfig(kubeconfig=kubeconfig, watch_slack=0.2)
        async with await KubeClient.connect(config, registry=Registry()) as client:
            yield client
    finally:
        await server.close()


async def test_get_sends_bearer_token_and_parses(kube: KubeClient) -> None:
    """A kubeconfig token reaches the server; the answer comes back as a dict."""
    pod = await kube.get(PODS, "p1", namespace="ns")
    assert pod["metadata"]["resourceVersion"] == "7"


async def test_escaped_names_are_not_escaped_twice(kube: KubeClient) -> None:
    """A name with characters Resource.path escapes (e.g. ':' in RBAC names) reaches the
    server once-escaped, so the server decodes it back to the name."""
    pod = await kube.get(PODS, "kubevirt.io:admin", namespace="ns")
    assert pod["metadata"]["name"] == "kubevirt.io:admin"


async def test_error_status_is_typed(kube: KubeClient) -> None:
    """A 404 Status answer raises NotFound with the server's message."""
    with pytest.raises(NotFound, match="not found"):
        await kube.get(PODS, "missing", namespace="ns")


@pytest.mark.parametrize(
    ("patch", "ptype", "ctype"),
    [
        pytest.param(
            {"metadata": {"labels": {"a": "b"}}},
            PatchType.MERGE,
            "application/merge-patch+json",
            id="merge",
        ),
        pytest.param(
            [{"op": "add", "path": "/metadata/labels/a", "value": "b"}],
            PatchType.JSON,
            "application/json-patch+json",
            id="json",
        ),
    ],
)
async def test_patch_body_and_content_type_reach_server(
    kube: KubeClient, patch: Any, ptype: PatchType, ctype: str
) -> None:
    """Patches arrive with their content type and JSON body intact."""
    answer = await kube.patch(PODS, "p1", patch, namespace="ns", patch_type=ptype)
    assert answer["echo"] == {"ctype": ctype, "body": patch}


async def test_list_and_watch_stream(kube: KubeClient) -> None:
    """list returns the collection resourceVersion; watch streams events until the server ends."""
    listed = await kube.list(PODS, namespace="ns")
    assert listed.resource_version == "9"
    events = [
        e async for e in kube.watch(PODS, namespace="ns", resource_version="9", timeout_seconds=5)
    ]
    assert [(e.type, e.resource_version) for e in events] == [
        (WatchEventType.ADDED, "10"),
        (WatchEventType.BOOKMARK, "11"),
    ]


async def test_silent_watch_hits_the_read_timeout(kube: KubeClient) -> None:
    """A watch that stops sending is broken by the socket read timeout (timeoutSeconds + slack)."""
    with pytest.raises(TransportError):
        async for _ in kube.watch(PODS, namespace="ns", resource_version="hang", timeout_seconds=0):
            pass


async def test_unreachable_server_is_a_transport_error(tmp_path: Path) -> None:
    """Connection refused surfaces as TransportError."""
    kubeconfig = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1")
    async with await KubeClient.connect(
        ClientConfig(kubeconfig=kubeconfig), registry=Registry()
    ) as kube:
        with pytest.raises(TransportError):
            await kube.get(PODS, "p", namespace="ns")


async def test_in_cluster_config_uses_service_account(tmp_path: Path) -> None:
    """In-cluster: host from KUBERNETES_SERVICE_HOST/PORT, bearer token from the token file."""
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    paths = InClusterPaths(token=tmp_path / "token", ca_cert=tmp_path / "ca.crt")
    conn = await load_connection(None, environ=env, in_cluster=paths)
    assert conn.host == "https://10.0.0.1:443"
    assert await conn.bearer() == "Bearer sa-token"
    (tmp_path / "token").write_text("rotated")
    assert await conn.bearer() == "Bearer rotated"


@pytest.mark.parametrize(
    ("env", "make_files"),
    [
        pytest.param({}, True, id="no-service-env"),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            False,
            id="no-token",
        ),
    ],
)
async def test_missing_in_cluster_config_is_a_config_error(
    tmp_path: Path, env: dict[str, str], make_files: bool
) -> None:
    """Without the service env or the token file, loading fails with ConfigError."""
    if make_files:
        (tmp_path / "token").write_text("t")
        (tmp_path / "ca.crt").write_text("c")
    paths = InClusterPaths(token=tmp_path / "token", ca_cert=tmp_path / "ca.crt")
    with pytest.raises(ConfigError):
        await load_connection(None, environ=env, in_cluster=paths)


async def test_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    """A kubeconfig path that does not exist fails with ConfigError."""
    with pytest.raises(ConfigError):
        await load_connection(tmp_path / "nope")


async def test_rotated_token_is_re_read_through_the_refresh_hook() -> None:
    """With a token source (in-cluster token rotation, exec plugins) each request past the
    refresh interval carries the token the source now yields; the user agent is ours."""
    seen: list[tuple[str | None, str | None]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Authorization"), request.headers.get("User-Agent")))
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/version", record)
    server = TestServer(app)
    await server.start_server()
    token = {"value": "Bearer one"}

    async def source() -> str | None:
        return token["value"]

    conn = Connection(host=f"http://127.0.0.1:{server.port}", token_source=source)
    transport = AioTransport(conn, user_agent="ua/1", max_connections=2, auth_refresh_every=0.0)
    try:
        get = {"query": (), "body": None, "content_type": "application/json", "timeout": 5.0}
        await transport.request("GET", "/version", **get)  # type: ignore[arg-type]
        token["value"] = "Bearer two"
        await transport.request("GET", "/version", **get)  # type: ignore[arg-type]
    finally:
        await transport.close()
        await server.close()
    assert seen == [("Bearer one", "ua/1"), ("Bearer two", "ua/1")]
