"""Launcher connections (handler.launchers) against a stand-in launcher on a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from handler.errors import LauncherUnavailable
from handler.launchers import (
    UNRESPONSIVE_MARKER,
    LauncherPool,
    LauncherState,
    PoolConfig,
    launcher_socket,
)
from shared.kube import BackoffPolicy
from shared.podlayout import LAUNCHER_INIT_SOCKET
from shared.wire.client import RpcClient, Timeouts
from shared.wire.launcher_api import Method
from shared.wire.server import RpcServer, ServerInfo
from tests.unit.handler.waiting import until

FAST = PoolConfig(
    ping_interval=0.05,
    unresponsive_after=2,
    gone_after=3,
    watch_interval=0.02,
    socket_poll=0.02,
    backoff=BackoffPolicy(initial=0.01, cap=0.05, jitter=0.0),
    timeouts=Timeouts(short=0.1, medium=0.5, long=1.0, connect=0.5),
)


class StandIn:
    """Serves ping like a launcher; `hang` makes ping never answer."""

    def __init__(self, sockets: Path) -> None:
        self.sockets = sockets
        self.hang = False
        self.server = RpcServer(info=ServerInfo(server="stand-in"))
        self.server.register("ping", self._ping)

    async def _ping(self, _: Mapping[str, Any]) -> str:
        if self.hang:
            await asyncio.Future()
        return "pong"

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Serve on launcher-init-sock, rename to launcher-sock (ready), stop on exit."""
        self.sockets.mkdir(parents=True, exist_ok=True)
        init = self.sockets / LAUNCHER_INIT_SOCKET
        started = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(self.server.serve(init, started=started))
            await started.wait()
            init.rename(self.sockets / "launcher-sock")
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(FileNotFoundError):
                    (self.sockets / "launcher-sock").unlink()


@pytest.fixture
async def pool() -> AsyncIterator[tuple[LauncherPool, list[str]]]:
    changes: list[str] = []
    p = LauncherPool(FAST, on_change=changes.append)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(p.run())
        await p.started.wait()
        yield p, changes
        task.cancel()


def test_socket_path_follows_the_kubelet_layout() -> None:
    """<pods>/<podUID>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock."""
    assert launcher_socket(Path("/var/lib/kubelet/pods"), "abc") == Path(
        "/var/lib/kubelet/pods/abc/volumes/kubernetes.io~empty-dir/sockets/launcher-sock"
    )


async def test_connects_only_once_launcher_sock_exists(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]]
) -> None:
    """Waiting until the rename, then connected (handshake done), announced, callable."""
    p, changes = pool
    stand_in = StandIn(tmp_path / "sockets")
    conn = p.ensure(uid="u1", key="ns/vm", socket=stand_in.sockets / "launcher-sock")
    await asyncio.sleep(0.1)
    assert conn.state is LauncherState.WAITING
    with pytest.raises(LauncherUnavailable):
        await conn.call(Method.PING)
    async with stand_in.serving():
        await until(lambda: conn.state is LauncherState.CONNECTED, "connected")
        assert await conn.call(Method.PING) == "pong"
        assert changes == ["ns/vm"]


async def test_long_kubelet_paths_work(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]]
) -> None:
    """Socket paths beyond sun_path's 108 bytes (kubelet's) are reached all the same."""
    p, _ = pool
    pod = "f" * 36
    sock = launcher_socket(tmp_path / ("d" * 60), pod)
    assert len(str(sock)) > 108
    stand_in = StandIn(sock.parent)
    conn = p.ensure(uid="u1", key="ns/vm", socket=sock)
    async with stand_in.serving():
        await until(lambda: conn.state is LauncherState.CONNECTED, "connected")
        assert await conn.call(Method.PING) == "pong"


async def test_launcher_that_exits_is_gone(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]]
) -> None:
    """Its socket vanishes after it was up: Gone, announced."""
    p, changes = pool
    stand_in = StandIn(tmp_path / "sockets")
    conn = p.ensure(uid="u1", key="ns/vm", socket=stand_in.sockets / "launcher-sock")
    async with stand_in.serving():
        await until(lambda: conn.state is LauncherState.CONNECTED, "connected")
    await until(lambda: conn.state is LauncherState.GONE, "gone")
    assert changes.count("ns/vm") >= 2


async def test_socket_nobody_listens_on_is_gone(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]]
) -> None:
    """A launcher killed with SIGKILL leaves its socket file; connections are refused: Gone."""
    p, _ = pool
    path = tmp_path / "launcher-sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()
    conn = p.ensure(uid="u1", key="ns/vm", socket=path)
    await until(lambda: conn.state is LauncherState.GONE, "gone")


async def test_unresponsive_launcher_is_marked_and_unmarked(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]]
) -> None:
    """Pings that time out mark it with a file beside the socket; answers clear it."""
    p, _ = pool
    stand_in = StandIn(tmp_path / "sockets")
    conn = p.ensure(uid="u1", key="ns/vm", socket=stand_in.sockets / "launcher-sock")
    marker = stand_in.sockets / UNRESPONSIVE_MARKER
    async with stand_in.serving():
        await until(lambda: conn.state is LauncherState.CONNECTED, "connected")
        stand_in.hang = True
        await until(lambda: conn.state is LauncherState.UNRESPONSIVE, "unresponsive")
        assert marker.exists()
        stand_in.hang = False
        await until(lambda: conn.state is LauncherState.CONNECTED, "answering again")
        assert not marker.exists()


async def test_release_stops_the_connection(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]]
) -> None:
    """A released VMI's connection task ends; ensuring again starts a new one."""
    p, _ = pool
    first = p.ensure(uid="u1", key="ns/vm", socket=tmp_path / "launcher-sock")
    assert p.ensure(uid="u1", key="ns/vm", socket=tmp_path / "launcher-sock") is first
    p.release("u1")
    assert len(p) == 0 and p.get("u1") is None
    assert p.ensure(uid="u1", key="ns/vm", socket=tmp_path / "launcher-sock") is not first


async def test_a_defect_in_one_connection_never_ends_the_pool(
    tmp_path: Path, pool: tuple[LauncherPool, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception in one connection's task (here a RuntimeError from its ping,
    as uvloop raised on a closed transport) is logged, named by the connection's error
    (which a sync turns into the VMI's condition), and the connection starts over; the
    pool keeps running and keeps serving new VMIs."""
    p, _ = pool
    stand_in = StandIn(tmp_path / "sockets")
    conn = p.ensure(uid="u1", key="ns/vm", socket=stand_in.sockets / "launcher-sock")
    original = RpcClient.call
    failures = [RuntimeError("unable to perform operation on <UnixTransport closed=True>")]

    async def flaky(self: RpcClient, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == str(Method.PING) and failures:
            raise failures.pop()
        return await original(self, method, *args, **kwargs)

    monkeypatch.setattr(RpcClient, "call", flaky)
    async with stand_in.serving():
        await until(lambda: conn.state is LauncherState.RECONNECTING, "the defect raised")
        assert not failures
        with pytest.raises(LauncherUnavailable, match="RuntimeError: unable to perform"):
            await conn.call(Method.PING)  # what the VMI's Synchronized condition then says
        await until(lambda: conn.state is LauncherState.CONNECTED, "connected again")
        assert await conn.call(Method.PING) == "pong"
        other = p.ensure(uid="u2", key="ns/other", socket=tmp_path / "elsewhere" / "s")
        assert other.state is LauncherState.WAITING
