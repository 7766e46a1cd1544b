"""The handler's actions endpoint: the controller-only guard, commands, errors, the console."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from handler.actions import CONTROLLER_CN, ActionsConfig, NotOnThisNode, build_app, endpoint_patch
from shared.wire.errors import CallTimeout, CommandFailed, Disconnected, ErrorCode
from shared.wire.launcher_api import Method

PEER = "X-Test-Peer-CN"
AS_CONTROLLER = {PEER: CONTROLLER_CN}
VMI_PATH = "/v1/namespaces/ns1/virtualmachineinstances/vm1"


@dataclass
class FakeTarget:
    """Answers `results[method]` or raises `error`; the console is `socket`."""

    results: dict[Method, Any] = field(default_factory=dict)
    error: Exception | None = None
    socket: Path = Path("/nonexistent/console.sock")
    commands: list[tuple[str, str, Method]] = field(default_factory=list)
    guest_port: int = 1  # where the "pod" forwards to (a local listener in tests)
    forwarded: list[int] = field(default_factory=list)
    args: list[Mapping[str, Any] | None] = field(default_factory=list)

    async def command(
        self, namespace: str, name: str, method: Method, args: Mapping[str, Any] | None = None
    ) -> Any:
        self.commands.append((namespace, name, method))
        self.args.append(args)
        if self.error is not None:
            raise self.error
        return self.results.get(method)

    async def console_socket(self, namespace: str, name: str) -> Path:
        if self.error is not None:
            raise self.error
        return self.socket

    async def vnc_socket(self, namespace: str, name: str) -> Path:
        return (await self.console_socket(namespace, name)).with_name("vnc.sock")

    async def forward_port(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        if self.error is not None:
            raise self.error
        self.forwarded.append(port)
        return "127.0.0.1", self.guest_port


def client_for(target: FakeTarget) -> TestClient[web.Request, web.Application]:
    config = ActionsConfig(cert_dir=Path("/unused"), write_timeout=5.0)
    app = build_app(target, config, peer_name=lambda request: request.headers.get(PEER))
    return TestClient(TestServer(app))


@pytest.fixture
async def console_socket(tmp_path: Path) -> AsyncIterator[Path]:
    """A Unix socket standing in for QEMU's serial console: greets, then upper-cases input."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"login: ")
        while data := await reader.read(1024):
            writer.write(data.upper())
            await writer.drain()
        writer.close()

    path = tmp_path / "console.sock"
    server = await asyncio.start_unix_server(serve, path)
    async with server:
        yield path


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-certificate"),
        pytest.param({PEER: "kubevirt-py-handler"}, id="another-component"),
        pytest.param({PEER: "front-proxy-client"}, id="front-proxy"),
    ],
)
async def test_only_the_controller_gets_in(headers: dict[str, str]) -> None:
    """Any client certificate CN but kubevirt-py-controller is refused with 403."""
    target = FakeTarget()
    async with client_for(target) as client:
        resp = await client.put(f"{VMI_PATH}/pause", headers=headers)
        assert resp.status == 403
        assert (await resp.json())["code"] == "forbidden"
    assert target.commands == []


@pytest.mark.parametrize(
    ("http", "action", "method"),
    [
        pytest.param("PUT", "pause", Method.PAUSE, id="pause"),
        pytest.param("PUT", "unpause", Method.UNPAUSE, id="unpause"),
        pytest.param("PUT", "softreboot", Method.SOFT_REBOOT, id="softreboot"),
        pytest.param("GET", "guestosinfo", Method.GET_GUEST_INFO, id="guestosinfo"),
        pytest.param("GET", "userlist", Method.GET_USERS, id="userlist"),
        pytest.param("GET", "filesystemlist", Method.GET_FILESYSTEMS, id="filesystemlist"),
    ],
)
async def test_actions_call_their_launcher_method(http: str, action: str, method: Method) -> None:
    """Each action calls its launcher command and answers the result as JSON."""
    target = FakeTarget(results={method: {"answer": action}})
    async with client_for(target) as client:
        resp = await client.request(http, f"{VMI_PATH}/{action}", headers=AS_CONTROLLER)
        assert resp.status == 200
        assert await resp.json() == {"answer": action}
    assert target.commands == [("ns1", "vm1", method)]


@pytest.mark.parametrize(
    ("http", "action", "status", "code"),
    [
        pytest.param("GET", "pause", 405, "method_not_allowed", id="get-pause"),
        pytest.param("PUT", "guestosinfo", 405, "method_not_allowed", id="put-guestosinfo"),
        pytest.param("PUT", "console", 405, "method_not_allowed", id="put-console"),
        pytest.param("PUT", "vnc-not-here", 404, "unknown_action", id="unknown"),
        pytest.param("GET", "console", 400, "websocket_required", id="console-no-upgrade"),
    ],
)
async def test_bad_calls(http: str, action: str, status: int, code: str) -> None:
    """Wrong methods and unknown actions are refused before the launcher is called."""
    target = FakeTarget()
    async with client_for(target) as client:
        resp = await client.request(http, f"{VMI_PATH}/{action}", headers=AS_CONTROLLER)
        assert resp.status == status
        assert (await resp.json())["code"] == code
    assert target.commands == []


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        pytest.param(NotOnThisNode("not here"), 404, "vmi_not_on_node", id="not-here"),
        pytest.param(
            CommandFailed(ErrorCode.AGENT_NOT_CONNECTED, "no agent", {"x": 1}),
            502,
            "agent_not_connected",
            id="launcher-error",
        ),
        pytest.param(CallTimeout("get_users", 20.0), 504, "launcher_timeout", id="timeout"),
        pytest.param(Disconnected("refused"), 502, "launcher_unreachable", id="unreachable"),
    ],
)
async def test_failures_answer_code_message_details(
    error: Exception, status: int, code: str
) -> None:
    """Target and wire errors become {code, message, details} with 404/502/504."""
    async with client_for(FakeTarget(error=error)) as client:
        resp = await client.get(f"{VMI_PATH}/userlist", headers=AS_CONTROLLER)
        body = await resp.json()
    assert resp.status == status
    assert body["code"] == code
    assert set(body) == {"code", "message", "details"}


async def test_launcher_error_details_pass_through() -> None:
    """The launcher's error details (e.g. libvirtCode) reach the controller unchanged."""
    error = CommandFailed(ErrorCode.LIBVIRT, "operation failed", {"libvirtCode": 55})
    async with client_for(FakeTarget(error=error)) as client:
        resp = await client.put(f"{VMI_PATH}/pause", headers=AS_CONTROLLER)
        body = await resp.json()
    assert body == {
        "code": "libvirt_error",
        "message": "operation failed",
        "details": {"libvirtCode": 55},
    }


async def test_console_bridges_the_unix_socket(console_socket: Path) -> None:
    """Console output reaches the websocket and keystrokes reach the console, as bytes."""
    async with (
        client_for(FakeTarget(socket=console_socket)) as client,
        client.ws_connect(f"{VMI_PATH}/console", headers=AS_CONTROLLER) as ws,
    ):
        greeting = await ws.receive(timeout=10)
        assert (greeting.type, greeting.data) == (aiohttp.WSMsgType.BINARY, b"login: ")
        await ws.send_bytes(b"root\n")
        echoed = await ws.receive(timeout=10)
        assert echoed.data == b"ROOT\n"


async def test_console_socket_closing_ends_the_websocket(tmp_path: Path) -> None:
    """When the console socket closes (guest gone), the websocket is closed too."""

    async def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        writer.close()

    path = tmp_path / "c.sock"
    async with (
        await asyncio.start_unix_server(hang_up, path),
        client_for(FakeTarget(socket=path)) as client,
        client.ws_connect(f"{VMI_PATH}/console", headers=AS_CONTROLLER) as ws,
    ):
        assert (await ws.receive(timeout=10)).data == b"bye"
        assert (await ws.receive(timeout=10)).type is aiohttp.WSMsgType.CLOSE


@pytest.mark.parametrize(
    ("target", "status", "code"),
    [
        pytest.param(FakeTarget(), 502, "console_unavailable", id="no-socket"),
        pytest.param(FakeTarget(error=NotOnThisNode("gone")), 404, "vmi_not_on_node", id="gone"),
    ],
)
async def test_console_failures_come_before_the_upgrade(
    target: FakeTarget, status: int, code: str
) -> None:
    """A console that cannot be opened is an HTTP error, not an empty websocket."""
    async with client_for(target) as client:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await client.ws_connect(f"{VMI_PATH}/console", headers=AS_CONTROLLER)
    assert info.value.status == status


def test_endpoint_patch_is_the_node_annotation() -> None:
    """The published endpoint is the kubevirt.io/handler-endpoint annotation of the Node."""
    assert endpoint_patch("https://10.0.0.5:8186") == {
        "metadata": {"annotations": {"kubevirt.io/handler-endpoint": "https://10.0.0.5:8186"}}
    }


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, ("0.0.0.0", 8186, "127.0.0.1"), id="defaults"),
        pytest.param({"POD_IP": "10.1.2.3"}, ("0.0.0.0", 8186, "10.1.2.3"), id="pod-ip"),
        pytest.param(
            {
                "VIRT_HANDLER_ACTIONS_PORT": "0",
                "VIRT_HANDLER_ACTIONS_HOST": "127.0.0.1",
                "VIRT_HANDLER_ACTIONS_ADVERTISE_HOST": "192.0.2.9",
                "POD_IP": "10.1.2.3",
            },
            ("127.0.0.1", 0, "192.0.2.9"),
            id="explicit",
        ),
    ],
)
def test_config_from_env(
    tmp_path: Path, env: dict[str, str], expected: tuple[str, int, str]
) -> None:
    """Host, port and advertised host come from the environment; certificates are required."""
    assert ActionsConfig.from_env({"VIRT_HANDLER_ACTIONS_CERT_DIR": str(tmp_path)}) is None
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    config = ActionsConfig.from_env({"VIRT_HANDLER_ACTIONS_CERT_DIR": str(tmp_path), **env})
    assert config is not None
    assert (config.host, config.port, config.advertise_host) == expected


async def test_vnc_bridges_the_vnc_socket(tmp_path: Path) -> None:
    """`vnc` relays QEMU's VNC socket (not the console's): the RFB greeting reaches the
    websocket and the client's answer reaches the socket, byte for byte."""
    answers: list[bytes] = []

    async def rfb(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"RFB 003.008\n")
        answers.append(await reader.readexactly(12))
        writer.close()

    async with (
        await asyncio.start_unix_server(rfb, tmp_path / "vnc.sock"),
        client_for(FakeTarget(socket=tmp_path / "console.sock")) as client,
        client.ws_connect(f"{VMI_PATH}/vnc", headers=AS_CONTROLLER) as ws,
    ):
        assert (await ws.receive(timeout=10)).data == b"RFB 003.008\n"
        await ws.send_bytes(b"RFB 003.008\n")
        assert (await ws.receive(timeout=10)).type is aiohttp.WSMsgType.CLOSE
    assert answers == [b"RFB 003.008\n"]


async def test_vnc_without_a_display_is_an_http_error(tmp_path: Path) -> None:
    """No VNC socket (autoattachGraphicsDevice: false) is a 502 before any upgrade."""
    async with client_for(FakeTarget(socket=tmp_path / "console.sock")) as client:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await client.ws_connect(f"{VMI_PATH}/vnc", headers=AS_CONTROLLER)
    assert info.value.status == 502


async def test_port_forward_bridges_a_tcp_connection_to_the_guest_port() -> None:
    """portforward/<port>/tcp asks the target to forward the port, connects to where it
    says, and relays bytes both ways."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(b"echo:" + data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    target = FakeTarget(guest_port=server.sockets[0].getsockname()[1])
    async with (
        server,
        client_for(target) as client,
        client.ws_connect(f"{VMI_PATH}/portforward/22/tcp", headers=AS_CONTROLLER) as ws,
    ):
        await ws.send_bytes(b"hi")
        assert (await ws.receive(timeout=10)).data == b"echo:hi"
    assert target.forwarded == [22]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        pytest.param("portforward/0/tcp", 400, id="port-zero"),
        pytest.param("portforward/70000/tcp", 400, id="port-too-big"),
        pytest.param("portforward/ssh/tcp", 400, id="port-not-a-number"),
        pytest.param("portforward/22/udp", 400, id="udp"),
    ],
)
async def test_port_forward_refusals_come_before_the_upgrade(path: str, status: int) -> None:
    """A bad port or protocol is a 400 naming it, before any websocket, and nothing is
    forwarded."""
    target = FakeTarget(guest_port=1)
    async with client_for(target) as client:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await client.ws_connect(f"{VMI_PATH}/{path}", headers=AS_CONTROLLER)
    assert info.value.status == status
    assert target.forwarded == []


async def test_port_forward_to_a_closed_guest_port_closes_without_a_byte() -> None:
    """A guest port nobody answers on: the tunnel opens and closes at once without a byte,
    its close reason naming the port (as a refused connection through a forward looks)."""
    target = FakeTarget(guest_port=1)
    async with (
        client_for(target) as client,
        client.ws_connect(f"{VMI_PATH}/portforward/22/tcp", headers=AS_CONTROLLER) as ws,
    ):
        msg = await ws.receive(timeout=10)
    assert msg.type == aiohttp.WSMsgType.CLOSE
    assert "guest port 22" in str(msg.extra)
    assert target.forwarded == [22]


async def test_freeze_passes_its_arguments_to_the_launcher() -> None:
    """The controller's JSON body becomes the launcher command's arguments; actions without
    a body call with none; a body that is not a JSON object is a 400."""
    target = FakeTarget()
    async with client_for(target) as client:
        body = {"unfreezeTimeoutSeconds": 300.0}
        resp = await client.put(f"{VMI_PATH}/freeze", json=body, headers=AS_CONTROLLER)
        assert resp.status == 200
        assert (await client.put(f"{VMI_PATH}/reset", headers=AS_CONTROLLER)).status == 200
        bad = await client.put(f"{VMI_PATH}/unfreeze", data=b"[1]", headers=AS_CONTROLLER)
        assert bad.status == 400
    assert [m for _, _, m in target.commands] == [Method.FREEZE, Method.RESET]
    assert target.args == [{"unfreezeTimeoutSeconds": 300.0}, {}]
