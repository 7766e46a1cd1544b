"""The subresource API's routes: authentication, review, locate, forward, Status answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shared.actions import Action
from shared.kube import Registry
from tests.unit.virt_api.subresources.fakes import (
    FakeAuthorizer,
    FakeForwarder,
    FakeReader,
    deps,
    node,
    proxied,
    vmi,
)
from virt_api.subresources.app import AppDeps, build_app
from virt_api.subresources.errors import BadGateway, Cause, GatewayTimeout, SubresourceError

BASE = "/apis/subresources.kubevirt.io/v1"
VMI_PATH = f"{BASE}/namespaces/ns1/virtualmachineinstances/vm1"


def running() -> FakeReader:
    return FakeReader(vmis={("ns1", "vm1"): vmi()}, nodes={"node01": node()})


@pytest.fixture
async def echo_url() -> AsyncIterator[str]:
    """A websocket server standing in for the handler's console: answers b'echo:' + frame."""

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            await ws.send_bytes(b"echo:" + msg.data)
        return ws

    app = web.Application()
    app.router.add_get("/console", handler)
    async with TestServer(app) as server:
        yield str(server.make_url("/console"))


def client_for(app_deps: AppDeps) -> TestClient[web.Request, web.Application]:
    return TestClient(TestServer(build_app(app_deps)))


async def test_probe_needs_no_client_certificate() -> None:
    """/healthz answers kubelet without the front proxy."""
    async with client_for(deps()) as client:
        resp = await client.get("/healthz")
        assert (resp.status, await resp.text()) == (200, "ok")


@pytest.mark.parametrize(
    "path", ["/apis", "/apis/subresources.kubevirt.io", BASE, f"{BASE}/version", f"{BASE}/healthz"]
)
async def test_discovery_needs_the_front_proxy(path: str) -> None:
    """Discovery and version answer the front proxy, and 401 Status to anyone else."""
    async with client_for(deps()) as client:
        resp = await client.get(path, headers=proxied())
        assert resp.status == 200
        anonymous = await client.get(path, headers={"X-Remote-User": "system:admin"})
        assert anonymous.status == 401
        body = await anonymous.json()
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)


async def test_pause_is_reviewed_then_forwarded() -> None:
    """PUT pause: the review carries the proxied user, the handler of the VMI's node is called,
    and the answer is an empty 200 as KubeVirt's."""
    authorizer, forwarder, registry = FakeAuthorizer(), FakeForwarder(), Registry()
    app_deps = deps(reader=running(), authorizer=authorizer, forwarder=forwarder, registry=registry)
    async with client_for(app_deps) as client:
        resp = await client.put(
            f"{VMI_PATH}/pause", headers=proxied("alice", "devs", "system:authenticated")
        )
        assert (resp.status, await resp.read()) == (200, b"")
    user, attrs = authorizer.reviews[0]
    assert (user.name, user.groups) == ("alice", ("devs", "system:authenticated"))
    assert (attrs.verb, attrs.subresource, attrs.namespace, attrs.name) == (
        "update",
        "pause",
        "ns1",
        "vm1",
    )
    target, spec = forwarder.calls[0]
    assert (target.node, target.endpoint, spec.action) == (
        "node01",
        "https://10.0.0.5:8186",
        Action.PAUSE,
    )
    assert "kubevirt_subresource_requests_total" in registry.render()
    assert 'action="pause",code="200"' in registry.render()


async def test_guestosinfo_returns_the_handlers_json() -> None:
    """GET guestosinfo passes the launcher's JSON through."""
    forwarder = FakeForwarder(body=b'{"hostname":"tiny","os":{"name":"Debian"}}')
    async with client_for(deps(reader=running(), forwarder=forwarder)) as client:
        resp = await client.get(f"{VMI_PATH}/guestosinfo", headers=proxied())
        assert resp.status == 200
        assert resp.content_type == "application/json"
        assert await resp.json() == {"hostname": "tiny", "os": {"name": "Debian"}}


async def test_denied_review_is_403_and_nothing_is_forwarded() -> None:
    """A denied review answers a Forbidden Status naming what was denied."""
    forwarder = FakeForwarder()
    app_deps = deps(reader=running(), authorizer=FakeAuthorizer(allow=False), forwarder=forwarder)
    async with client_for(app_deps) as client:
        resp = await client.put(f"{VMI_PATH}/unpause", headers=proxied("mallory"))
        body = await resp.json()
    assert resp.status == 403
    assert body["reason"] == "Forbidden"
    assert (
        'User "mallory" cannot update resource "virtualmachineinstances/unpause"'
        in (body["message"])
    )
    assert forwarder.calls == []


@pytest.mark.parametrize(
    ("method", "path", "code", "reason"),
    [
        pytest.param("PUT", f"{VMI_PATH}/reboot", 404, "NotFound", id="unknown-action"),
        pytest.param("GET", f"{VMI_PATH}/pause", 405, "MethodNotAllowed", id="get-pause"),
        pytest.param("PUT", f"{VMI_PATH}/guestosinfo", 405, "MethodNotAllowed", id="put-get"),
        pytest.param("PUT", "/apis", 405, "MethodNotAllowed", id="put-discovery"),
        pytest.param("GET", f"{BASE}/namespaces/ns1/pods/p", 404, "NotFound", id="other-path"),
        pytest.param("GET", f"{VMI_PATH}/console", 400, "BadRequest", id="console-no-upgrade"),
    ],
)
async def test_bad_requests_are_status_objects(
    method: str, path: str, code: int, reason: str
) -> None:
    """Routing failures answer Kubernetes Status bodies with the matching code."""
    forwarder = FakeForwarder()
    async with client_for(deps(reader=running(), forwarder=forwarder)) as client:
        resp = await client.request(method, path, headers=proxied())
        body = await resp.json()
    assert (resp.status, body["kind"], body["code"], body["reason"]) == (
        code,
        "Status",
        code,
        reason,
    )
    assert forwarder.calls == []


@pytest.mark.parametrize(
    ("reader", "code"),
    [
        pytest.param(FakeReader(), 404, id="vmi-not-found"),
        pytest.param(FakeReader(vmis={("ns1", "vm1"): vmi(phase="Pending")}), 409, id="pending"),
    ],
)
async def test_unlocatable_vmi_answers_its_status(reader: FakeReader, code: int) -> None:
    """404 for a missing VMI and 409 for one not running, after the review passed."""
    authorizer = FakeAuthorizer()
    async with client_for(deps(reader=reader, authorizer=authorizer)) as client:
        resp = await client.put(f"{VMI_PATH}/softreboot", headers=proxied())
        assert resp.status == code
        assert (await resp.json())["details"]["name"] == "vm1"
    assert len(authorizer.reviews) == 1


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        pytest.param(
            BadGateway("failed", causes=[Cause(reason="agent_not_connected", message="no agent")]),
            502,
            "agent_not_connected",
            id="launcher-error",
        ),
        pytest.param(
            GatewayTimeout("slow", causes=[Cause(reason="handler_timeout", message="30s")]),
            504,
            "handler_timeout",
            id="timeout",
        ),
    ],
)
async def test_handler_failures_keep_the_launcher_code(
    error: SubresourceError, code: int, reason: str
) -> None:
    """502/504 Status bodies carry the handler's (launcher's) code in details.causes."""
    async with client_for(deps(reader=running(), forwarder=FakeForwarder(error=error))) as client:
        resp = await client.get(f"{VMI_PATH}/userlist", headers=proxied())
        body = await resp.json()
    assert resp.status == code
    assert body["details"]["causes"][0]["reason"] == reason


async def test_console_relays_frames_both_ways(echo_url: str) -> None:
    """The console websocket is reviewed with verb get and relays binary frames."""
    authorizer = FakeAuthorizer()
    forwarder = FakeForwarder(console_url=echo_url)
    app_deps = deps(reader=running(), authorizer=authorizer, forwarder=forwarder)
    async with (
        client_for(app_deps) as client,
        client.ws_connect(f"{VMI_PATH}/console", headers=proxied()) as ws,
    ):
        await ws.send_bytes(b"\x00hello\xff")
        msg = await ws.receive(timeout=10)
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.BINARY, b"echo:\x00hello\xff")
        await ws.send_str("text becomes bytes")
        msg = await ws.receive(timeout=10)
        assert msg.data == b"echo:text becomes bytes"
    assert authorizer.reviews[0][1].verb == "get"
    assert authorizer.reviews[0][1].subresource == "console"
    assert forwarder.consoles[0].node == "node01"


async def test_vnc_is_relayed_like_the_console(echo_url: str) -> None:
    """vnc is a websocket too, reviewed as `get virtualmachineinstances/vnc` and relayed
    to the handler's vnc stream."""
    authorizer = FakeAuthorizer()
    forwarder = FakeForwarder(console_url=echo_url)
    app_deps = deps(reader=running(), authorizer=authorizer, forwarder=forwarder)
    async with (
        client_for(app_deps) as client,
        client.ws_connect(f"{VMI_PATH}/vnc", headers=proxied()) as ws,
    ):
        await ws.send_bytes(b"RFB 003.008\n")
        assert (await ws.receive(timeout=10)).data == b"echo:RFB 003.008\n"
    assert (authorizer.reviews[0][1].verb, authorizer.reviews[0][1].subresource) == ("get", "vnc")
    assert [(spec.action, sub) for _, spec, sub in forwarder.streams] == [("vnc", "")]


@pytest.mark.parametrize(
    ("path", "resource", "subpath"),
    [
        pytest.param(f"{VMI_PATH}/portforward/22", "virtualmachineinstances", "/22/tcp", id="vmi"),
        pytest.param(
            f"{VMI_PATH}/portforward/8080/tcp", "virtualmachineinstances", "/8080/tcp", id="tcp"
        ),
        pytest.param(
            f"{BASE}/namespaces/ns1/virtualmachines/vm1/portforward/22/tcp",
            "virtualmachines",
            "/22/tcp",
            id="vm",
        ),
    ],
)
async def test_port_forward_is_reviewed_and_tunnelled(
    echo_url: str, path: str, resource: str, subpath: str
) -> None:
    """portforward/<port>[/<protocol>] is reviewed as `get <resource>/portforward` and
    tunnelled to the handler's portforward/<port>/<protocol> of the VMI of that name."""
    authorizer = FakeAuthorizer()
    forwarder = FakeForwarder(console_url=echo_url)
    app_deps = deps(reader=running(), authorizer=authorizer, forwarder=forwarder)
    async with client_for(app_deps) as client, client.ws_connect(path, headers=proxied()) as ws:
        await ws.send_bytes(b"SSH-2.0-x\r\n")
        assert (await ws.receive(timeout=10)).data == b"echo:SSH-2.0-x\r\n"
    attrs = authorizer.reviews[0][1]
    assert (attrs.verb, attrs.resource, attrs.subresource) == ("get", resource, "portforward")
    assert [(t.vmi.name, sub) for t, _, sub in forwarder.streams] == [("vm1", subpath)]


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        pytest.param("portforward", 404, id="no-port"),
        pytest.param("portforward/0", 400, id="port-zero"),
        pytest.param("portforward/65536/tcp", 400, id="port-too-big"),
        pytest.param("portforward/ssh", 400, id="not-a-number"),
        pytest.param("portforward/22/udp", 400, id="udp"),
        pytest.param("portforward/22/sctp", 400, id="bad-protocol"),
    ],
)
async def test_port_forward_bad_input_is_a_status(tail: str, code: int) -> None:
    """A missing or bad port, or a protocol other than tcp, is refused before any review,
    lookup or tunnel, with a Status naming it."""
    forwarder = FakeForwarder()
    async with client_for(deps(reader=running(), forwarder=forwarder)) as client:
        resp = await client.get(f"{VMI_PATH}/{tail}", headers=proxied())
        body = await resp.json()
    assert resp.status == code, body
    assert body["kind"] == "Status" and body["code"] == code
    assert forwarder.streams == []


async def test_console_failure_before_upgrade_is_a_status() -> None:
    """When the handler cannot open the console, the client gets a Status, not a websocket."""
    error = BadGateway("down", causes=[Cause(reason="console_unavailable", message="refused")])
    async with client_for(deps(reader=running(), forwarder=FakeForwarder(error=error))) as c:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await c.ws_connect(f"{VMI_PATH}/console", headers=proxied())
    assert info.value.status == 502
