"""The command protocol end to end over a real Unix socket: happy paths and hostile input."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import msgpack
import pytest

from launcher.commands import COMMANDS, HOTPLUG_COMMANDS, MIGRATION_COMMANDS
from shared.actions import ACTIONS
from shared.wire.client import RpcClient, Tier, Timeouts, pick_version
from shared.wire.errors import (
    BadRequest,
    CallTimeout,
    CommandFailed,
    Disconnected,
    InvalidArgument,
    UnknownMethod,
    VersionMismatch,
    error_from_wire,
)
from shared.wire.framing import encode_frame
from shared.wire.launcher_api import TIERS, Method
from shared.wire.limits import Limits
from shared.wire.server import RpcServer, ServerInfo

MAX_FRAME = 64 * 1024


async def _echo(args: Mapping[str, Any]) -> Any:
    return dict(args)


async def _slow(args: Mapping[str, Any]) -> Any:
    await asyncio.sleep(float(args.get("seconds", 0.2)))
    return args.get("tag")


async def _fail(args: Mapping[str, Any]) -> Any:
    raise CommandFailed("domain_not_found", "no domain", {"name": "x"})


async def _typed(args: Mapping[str, Any]) -> Any:
    if not isinstance(args.get("n"), int):
        raise InvalidArgument("n", "expected an integer")
    return args["n"] * 2


async def _buggy(args: Mapping[str, Any]) -> Any:
    raise RuntimeError("bug")


@pytest.fixture
async def socket_path(tmp_path: Path) -> AsyncIterator[Path]:
    path = tmp_path / "sock"
    server = RpcServer(info=ServerInfo(server="test"), limits=Limits(max_frame=MAX_FRAME))
    for name, handler in [
        ("echo", _echo),
        ("slow", _slow),
        ("fail", _fail),
        ("typed", _typed),
        ("buggy", _buggy),
    ]:
        server.register(name, handler)
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(path, started=started))
        await started.wait()
        yield path
        task.cancel()


async def _raw(path: Path, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(payload)
    await writer.drain()
    writer.write_eof()
    async with asyncio.timeout(5):
        data = await reader.read()
    writer.close()
    return data


def _replies(data: bytes) -> list[dict[str, Any]]:
    out = []
    while data:
        (size,) = struct.unpack(">I", data[:4])
        out.append(msgpack.unpackb(data[4 : 4 + size], raw=False))
        data = data[4 + size :]
    return out


async def test_call_returns_result(socket_path: Path) -> None:
    """A call gets its own result back and the handshake picks v1."""
    async with RpcClient.connect(socket_path) as client:
        assert client.version == "v1"
        assert await client.call("echo", {"a": [1, 2]}, tier=Tier.SHORT) == {"a": [1, 2]}
        assert "echo" in client.server_info["methods"]


async def test_concurrent_requests_on_one_connection(socket_path: Path) -> None:
    """Slow and fast calls overlap on one connection; replies match their requests."""
    async with RpcClient.connect(socket_path) as client:
        results = await asyncio.gather(
            client.call("slow", {"seconds": 0.3, "tag": "slow"}, tier=Tier.SHORT),
            *(client.call("echo", {"i": i}, tier=Tier.SHORT) for i in range(50)),
        )
    assert results[0] == "slow"
    assert results[1:] == [{"i": i} for i in range(50)]


async def test_many_concurrent_clients(socket_path: Path) -> None:
    """Forty clients at once are all served."""

    async def one(i: int) -> Any:
        async with RpcClient.connect(socket_path) as client:
            return await client.call("echo", {"i": i}, tier=Tier.SHORT)

    results = await asyncio.gather(*(one(i) for i in range(40)))
    assert results == [{"i": i} for i in range(40)]


@pytest.mark.parametrize(
    ("method", "args", "error"),
    [
        pytest.param("nope", {}, UnknownMethod, id="unknown-method"),
        pytest.param("fail", {}, CommandFailed, id="command-failed"),
        pytest.param("typed", {"n": "x"}, InvalidArgument, id="wrong-type"),
        pytest.param("buggy", {}, CommandFailed, id="handler-bug"),
    ],
)
async def test_errors_are_typed(
    socket_path: Path, method: str, args: dict[str, Any], error: type[Exception]
) -> None:
    """Each failure reaches the caller as its typed exception, and the connection lives on."""
    async with RpcClient.connect(socket_path) as client:
        with pytest.raises(error):
            await client.call(method, args, tier=Tier.SHORT)
        assert await client.call("echo", {"ok": True}, tier=Tier.SHORT) == {"ok": True}


async def test_command_failed_carries_code_and_details(socket_path: Path) -> None:
    """The code and details the handler raised arrive intact."""
    async with RpcClient.connect(socket_path) as client:
        with pytest.raises(CommandFailed) as info:
            await client.call("fail", {}, tier=Tier.SHORT)
    assert info.value.code == "domain_not_found"
    assert info.value.details == {"name": "x"}


async def test_invalid_argument_names_the_field(socket_path: Path) -> None:
    """InvalidArgument names the field that failed to decode."""
    async with RpcClient.connect(socket_path) as client:
        with pytest.raises(InvalidArgument) as info:
            await client.call("typed", {"n": None}, tier=Tier.SHORT)
    assert info.value.field == "n"


async def test_timeout_tier(socket_path: Path) -> None:
    """A call slower than its tier raises CallTimeout naming the method."""
    timeouts = Timeouts(short=0.05)
    async with RpcClient.connect(socket_path, timeouts=timeouts) as client:
        with pytest.raises(CallTimeout, match="slow"):
            await client.call("slow", {"seconds": 1}, tier=Tier.SHORT)
        assert await client.call("echo", {}, tier=Tier.SHORT) == {}


async def test_version_mismatch(socket_path: Path) -> None:
    """A client that speaks no version the server knows is refused with VersionMismatch."""
    with pytest.raises(VersionMismatch):
        async with RpcClient.connect(socket_path, versions=("v9",)):
            pass


def test_pick_version_highest_common() -> None:
    """The highest common version wins, comparing v10 above v9."""
    assert pick_version(("v1", "v9", "v10"), ("v10", "v9")) == "v10"
    with pytest.raises(VersionMismatch):
        pick_version(("v1",), ("v2",))


async def test_connect_to_missing_socket(tmp_path: Path) -> None:
    """Connecting where nothing listens raises Disconnected."""
    with pytest.raises(Disconnected):
        async with RpcClient.connect(tmp_path / "absent"):
            pass


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(os.urandom(3), id="random-short"),
        pytest.param(b"\x00\x00\x00\x10abc", id="half-frame"),
        pytest.param(struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1", id="bad-msgpack"),
        pytest.param(encode_frame({"id": 1})[:-1], id="truncated"),
    ],
)
async def test_garbage_does_not_hurt_server(socket_path: Path, payload: bytes) -> None:
    """Random bytes and half frames end that connection only; the server keeps serving."""
    await _raw(socket_path, payload)
    async with RpcClient.connect(socket_path) as client:
        assert await client.call("echo", {"x": 1}, tier=Tier.SHORT) == {"x": 1}


async def test_random_streams_do_not_hurt_server(socket_path: Path) -> None:
    """Fifty random byte streams in parallel; the server still answers afterwards."""
    await asyncio.gather(*(_raw(socket_path, os.urandom(200 + i)) for i in range(50)))
    async with RpcClient.connect(socket_path) as client:
        assert await client.call("echo", {}, tier=Tier.SHORT) == {}


async def test_oversized_frame_gets_typed_error_and_close(socket_path: Path) -> None:
    """A header over the limit gets a frame_too_large error and the connection is closed."""
    data = await _raw(socket_path, struct.pack(">I", MAX_FRAME + 1) + b"x" * 10)
    replies = _replies(data)
    assert replies == [
        {
            "id": None,
            "error": {
                "code": "frame_too_large",
                "message": f"frame of {MAX_FRAME + 1} bytes exceeds limit {MAX_FRAME}",
                "details": {"limit": "max_frame", "value": MAX_FRAME + 1, "max": MAX_FRAME},
            },
        }
    ]


@pytest.mark.parametrize(
    ("message", "code"),
    [
        pytest.param([1, 2], "bad_frame", id="not-a-map"),
        pytest.param({"id": "1", "method": "echo"}, "bad_request", id="string-id"),
        pytest.param({"id": 1, "method": 7}, "bad_request", id="int-method"),
        pytest.param({"id": 1, "method": "echo", "args": [1]}, "bad_request", id="list-args"),
        pytest.param({1: 2}, "bad_frame", id="int-key"),
    ],
)
async def test_malformed_requests_get_error_replies(
    socket_path: Path, message: Any, code: str
) -> None:
    """Well-framed but malformed requests get an error reply with the right code."""
    body = msgpack.packb(message)
    replies = _replies(await _raw(socket_path, struct.pack(">I", len(body)) + body))
    assert [r["error"]["code"] for r in replies] == [code]


async def test_client_sees_server_going_away(tmp_path: Path) -> None:
    """Pending calls fail with Disconnected when the server stops."""
    path = tmp_path / "sock"
    server = RpcServer(info=ServerInfo())
    server.register("slow", _slow)
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        serving = tg.create_task(server.serve(path, started=started))
        await started.wait()
        async with RpcClient.connect(path) as client:

            async def pending_call() -> None:
                with pytest.raises(Disconnected):
                    await client.call("slow", {"seconds": 5}, tier=Tier.LONG)

            call = tg.create_task(pending_call())
            await asyncio.sleep(0.05)
            serving.cancel()
            await call
            with pytest.raises(Disconnected):
                await client.call("slow", {}, tier=Tier.SHORT)


class _ClosedUnderTheReader:
    """A writer whose uvloop transport is closed (as after EPIPE) while the reply reader
    has not run yet: uvloop refuses the write with RuntimeError."""

    def __init__(self, real: asyncio.StreamWriter) -> None:
        self._real = real

    def is_closing(self) -> bool:
        return True

    def write(self, data: bytes) -> None:
        raise RuntimeError("unable to perform operation on <UnixTransport closed=True>")

    def close(self) -> None:
        self._real.close()


async def test_call_on_a_transport_closed_under_the_reader_is_disconnected(
    socket_path: Path,
) -> None:
    """A transport already closed (a failed write, a reset) whose end the reader has not yet
    seen: the call fails with Disconnected at once, never uvloop's RuntimeError on write
    (which ended the handler's launcher pool) nor a CallTimeout after the tier."""
    timeouts = Timeouts(short=5.0, medium=5.0, long=5.0, connect=1.0)
    async with RpcClient.connect(socket_path, timeouts=timeouts) as client:
        client._writer = _ClosedUnderTheReader(client._writer)  # type: ignore[assignment]
        async with asyncio.timeout(1.0):
            with pytest.raises(Disconnected, match="closing"):
                await client.call("echo", {"x": 1}, tier=Tier.SHORT)


async def test_long_socket_path(tmp_path: Path) -> None:
    """Sockets deeper than sun_path's 108 bytes still bind and connect."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "launcher-sock"
    server = RpcServer(info=ServerInfo())
    server.register("echo", _echo)
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(path, started=started))
        await started.wait()
        assert path.exists()
        async with RpcClient.connect(path) as client:
            assert await client.call("echo", {"deep": 1}, tier=Tier.SHORT) == {"deep": 1}
        task.cancel()


def test_bad_request_maps_from_code() -> None:
    """The error table maps bad_request to BadRequest."""
    assert isinstance(error_from_wire({"code": "bad_request", "message": "m"}), BadRequest)
    assert isinstance(error_from_wire("junk"), BadRequest)


def test_action_table_agrees_with_the_launcher_and_wire() -> None:
    """The launcher's command tables register every wire Method exactly once (ForwardPort,
    HotplugResources, SetLinkStates, the backup pair, MemoryDump and SyncInterfaces beside
    them), each with a timeout tier, and every launcher command shared.actions names is among
    them."""
    beside = [
        Method.FORWARD_PORT, Method.HOTPLUG_RESOURCES, Method.EXPAND_DISKS,
        Method.SET_LINK_STATES, Method.BACKUP_BEGIN, Method.BACKUP_STATUS, Method.MEMORY_DUMP,
        Method.SYNC_INTERFACES,
    ]  # fmt: skip
    registered = [*COMMANDS, *MIGRATION_COMMANDS, *HOTPLUG_COMMANDS, *beside]
    assert sorted(registered) == sorted(Method)
    assert set(TIERS) == set(Method)
    named = {spec.launcher for spec in ACTIONS.values() if spec.launcher is not None}
    assert named <= set(registered)
