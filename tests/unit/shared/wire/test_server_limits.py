"""The server's limits over a real socket: each refusal names its limit, the server serves on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import struct
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import msgpack
import pytest
from structlog.testing import capture_logs

from shared.wire.budget import Budget, Lease
from shared.wire.client import RpcClient, Tier
from shared.wire.errors import OverLimit
from shared.wire.framing import encode_frame
from shared.wire.limits import Limits
from shared.wire.server import RpcServer, ServerInfo
from tests.unit.handler.waiting import until


class Handlers:
    """``hold`` blocks until ``gate`` opens, counting how many started."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = 0

    async def hold(self, _args: Mapping[str, Any]) -> str:
        self.started += 1
        await self.gate.wait()
        return "held"

    async def ping(self, _args: Mapping[str, Any]) -> str:
        return "pong"

    async def blob(self, args: Mapping[str, Any]) -> str:
        return "x" * int(args.get("n", 0))


@contextlib.asynccontextmanager
async def serving(
    path: Path, limits: Limits, *, write_timeout: float = 10.0
) -> AsyncIterator[Handlers]:
    handlers = Handlers()
    server = RpcServer(info=ServerInfo(server="test"), limits=limits, write_timeout=write_timeout)
    for name in ("hold", "ping", "blob"):
        server.register(name, getattr(handlers, name))
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(path, started=started))
        await started.wait()
        try:
            yield handlers
        finally:
            handlers.gate.set()
            task.cancel()


def _tight(**changes: Any) -> Limits:
    """Small frames and few objects, so one held request fills a small budget."""
    base = Limits(max_frame=1024, max_objects=16)
    cost = base.frame_cost(1024)
    fields = {"max_frame": 1024, "max_objects": 16, "connection_buffer": cost}
    fields |= {"server_buffer": cost, "budget_wait": 0.2} | changes
    return Limits(**fields)


DECODE_LIMITS = Limits(
    max_str_len=100,
    max_bin_len=100,
    max_array_len=10,
    max_map_len=10,
    max_depth=4,
    max_objects=50,
)


@pytest.mark.parametrize(
    ("args", "limit"),
    [
        pytest.param({"s": "x" * 101}, "max_str_len", id="str"),
        pytest.param({"b": b"x" * 101}, "max_bin_len", id="bin"),
        pytest.param({"e": msgpack.ExtType(1, b"x")}, "max_ext_len", id="ext"),
        pytest.param({"a": list(range(11))}, "max_array_len", id="array"),
        pytest.param({"m": {str(i): 0 for i in range(11)}}, "max_map_len", id="map"),
        pytest.param({"d": [[[0]]]}, "max_depth", id="depth"),
        pytest.param({"a": [list(range(10))] * 5}, "max_objects", id="objects"),
    ],
)
async def test_decode_limit_reaches_the_caller_by_name(
    tmp_path: Path, args: dict[str, Any], limit: str
) -> None:
    """A request over a decoding limit fails, for its caller, with OverLimit naming the
    limit; the same connection then serves the next call."""
    async with serving(tmp_path / "sock", DECODE_LIMITS), RpcClient.connect(tmp_path / "sock") as c:
        with pytest.raises(OverLimit) as info:
            await c.call("ping", args, tier=Tier.SHORT)
        assert info.value.limit == limit
        assert info.value.details["max"] == getattr(DECODE_LIMITS, limit)
        assert await c.call("ping", {}, tier=Tier.SHORT) == "pong"


async def test_info_lists_the_limits(tmp_path: Path) -> None:
    """``info`` lists the decoding limits under the names refusals use."""
    async with serving(tmp_path / "sock", DECODE_LIMITS), RpcClient.connect(tmp_path / "sock") as c:
        assert c.server_info["limits"] == DECODE_LIMITS.to_wire()
        assert c.server_info["limits"]["max_depth"] == 4


async def test_server_buffer_is_shared_by_every_connection(tmp_path: Path) -> None:
    """While one connection's request holds the server's budget, another connection's
    request waits, then is refused naming server_buffer; once the first is answered, the
    second connection is served."""
    sock = tmp_path / "sock"
    async with (
        serving(sock, _tight()) as handlers,
        RpcClient.connect(sock) as first,
        RpcClient.connect(sock) as second,
        asyncio.TaskGroup() as tg,
    ):
        held = tg.create_task(first.call("hold", {}, tier=Tier.SHORT))
        await until(lambda: handlers.started == 1, "hold started")
        with pytest.raises(OverLimit) as info:
            await second.call("ping", {}, tier=Tier.SHORT)
        assert info.value.limit == "server_buffer"
        handlers.gate.set()
        assert await held == "held"
        assert await second.call("ping", {}, tier=Tier.SHORT) == "pong"


async def test_connection_buffer_bounds_one_connection(tmp_path: Path) -> None:
    """One connection cannot take more than its own budget, even with the server's free."""
    sock = tmp_path / "sock"
    limits = _tight(server_buffer=10 * _tight().connection_buffer)
    async with serving(sock, limits) as handlers, RpcClient.connect(sock) as client:
        async with asyncio.TaskGroup() as tg:
            held = tg.create_task(client.call("hold", {}, tier=Tier.SHORT))
            await until(lambda: handlers.started == 1, "hold started")
            with pytest.raises(OverLimit) as info:
                await client.call("ping", {}, tier=Tier.SHORT)
            assert info.value.limit == "connection_buffer"
            async with RpcClient.connect(sock) as other:  # other connections: unaffected
                assert await other.call("ping", {}, tier=Tier.SHORT) == "pong"
            handlers.gate.set()
        assert held.result() == "held"


@pytest.mark.parametrize("size", [pytest.param(100, id="small"), pytest.param(100_000, id="large")])
async def test_a_stalled_frame_closes_its_connection(tmp_path: Path, size: int) -> None:
    """A frame whose bytes stop coming ends its connection after frame_timeout, with the
    reason logged; the server serves others meanwhile and afterwards."""
    sock = tmp_path / "sock"
    with capture_logs() as logs:
        async with serving(sock, Limits(frame_timeout=0.2)):
            reader, writer = await asyncio.open_unix_connection(str(sock))
            writer.write(struct.pack(">I", size) + b"\x80" * 10)
            async with RpcClient.connect(sock) as client:
                assert await client.call("ping", {}, tier=Tier.SHORT) == "pong"
                async with asyncio.timeout(10):
                    assert await reader.read() == b""  # closed by the server
                assert await client.call("ping", {}, tier=Tier.SHORT) == "pong"
            writer.close()
    assert any(e["event"] == "frame_timeout" for e in logs)


async def test_connections_over_the_cap_are_closed_at_once(tmp_path: Path) -> None:
    """Past max_connections a new connection is closed with the reason logged; once one
    closes, a new one is served."""
    sock = tmp_path / "sock"
    with capture_logs() as logs:
        async with serving(sock, Limits(max_connections=2)):
            async with RpcClient.connect(sock), RpcClient.connect(sock):
                reader, writer = await asyncio.open_unix_connection(str(sock))
                async with asyncio.timeout(10):
                    assert await reader.read() == b""
                writer.close()
            async with asyncio.timeout(10):
                while True:  # the server notices the two closes in its own time
                    with contextlib.suppress(Exception):
                        async with RpcClient.connect(sock) as client:
                            assert await client.call("ping", {}, tier=Tier.SHORT) == "pong"
                            break
                    await asyncio.sleep(0.05)
    assert any(e["event"] == "connection_refused" for e in logs)


async def test_requests_in_flight_per_connection_are_capped(tmp_path: Path) -> None:
    """A connection has at most max_inflight requests served at once; the rest wait unread."""
    sock = tmp_path / "sock"
    async with serving(sock, Limits(max_inflight=2)) as handlers, RpcClient.connect(sock) as c:
        async with asyncio.TaskGroup() as tg:
            calls = [tg.create_task(c.call("hold", {}, tier=Tier.LONG)) for _ in range(3)]
            await until(lambda: handlers.started == 2, "two started")
            await asyncio.sleep(0.2)
            assert handlers.started == 2
            handlers.gate.set()
        assert [call.result() for call in calls] == ["held"] * 3


async def test_a_peer_that_does_not_read_loses_its_connection(tmp_path: Path) -> None:
    """Replies a peer leaves unread stop its requests being read, then end its connection
    (logged); other connections are served throughout."""
    sock = tmp_path / "sock"
    with capture_logs() as logs:
        async with serving(sock, Limits(), write_timeout=0.3):
            _reader, writer = await asyncio.open_unix_connection(str(sock))
            for i in range(200):
                writer.write(encode_frame({"id": i, "method": "blob", "args": {"n": 100_000}}))
            await until(lambda: any(e["event"] == "connection_stalled" for e in logs), "stall")
            async with RpcClient.connect(sock) as client:
                assert await client.call("ping", {}, tier=Tier.SHORT) == "pong"
            writer.close()


async def test_socket_and_directory_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """The socket is 0600 and its directory 0700 (tightened if it existed) under umask 0."""
    sock = tmp_path / "sockets" / "sock"
    sock.parent.mkdir(mode=0o777)
    sock.parent.chmod(0o777)
    old = os.umask(0)
    try:
        async with serving(sock, Limits()):
            assert stat.S_IMODE(sock.stat().st_mode) == 0o600
            assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    finally:
        os.umask(old)


async def test_a_shared_sticky_directory_is_refused(tmp_path: Path) -> None:
    """A socket cannot be private in a directory like /tmp: serving there is refused."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    server = RpcServer(info=ServerInfo())
    with pytest.raises(PermissionError, match="sticky"):
        await server.serve(shared / "sock")


async def test_budget_serves_waiters_in_order() -> None:
    """A small request queued behind a large one waits for it (no starvation of the large)."""
    budget = Budget(10, name="b")
    await budget.take(6)
    large = asyncio.create_task(budget.take(6))
    small = asyncio.create_task(budget.take(1))
    await asyncio.sleep(0)
    assert not large.done() and not small.done()
    budget.give(6)
    await asyncio.gather(large, small)
    assert budget.used == 7


async def test_budget_waiter_cancelled_after_the_queue_dropped_it() -> None:
    """A waiter cancelled (a timeout) just before a give() passes over it leaves the budget
    consistent, and the next waiter is served."""
    budget = Budget(10, name="b")
    await budget.take(8)
    first = asyncio.create_task(budget.take(5))
    second = asyncio.create_task(budget.take(2))
    await asyncio.sleep(0)
    first.cancel()
    budget.give(8)  # runs before `first` sees its cancellation
    with pytest.raises(asyncio.CancelledError):
        await first
    await second
    assert budget.used == 2


async def test_lease_takes_all_or_nothing() -> None:
    """A lease given up while it waits for the second budget gives back the first."""
    conn, server = Budget(10, name="connection_buffer"), Budget(10, name="server_buffer")
    await server.take(8)
    lease = Lease(conn, server)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await lease.take(5)
    assert lease.waiting_on is server
    assert (conn.used, server.used) == (0, 8)
