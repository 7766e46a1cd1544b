"""A server that listens before its methods are registered (the launcher's socket-first
start): requests wait for the registration instead of failing as unknown."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from launcher.cmdsocket import command_socket
from shared.podlayout import LAUNCHER_INIT_SOCKET, LAUNCHER_SOCKET
from shared.wire.client import RpcClient, Tier
from shared.wire.errors import UnknownMethod
from shared.wire.server import RpcServer, ServerInfo


async def _echo(args: Mapping[str, Any]) -> Any:
    return dict(args)


async def test_a_request_waits_until_its_method_is_registered(tmp_path: Path) -> None:
    """A call made before `echo` is registered is answered once the registration is done,
    and `info` answers at once meanwhile."""
    registered = asyncio.Event()
    server = RpcServer(info=ServerInfo(server="test"), registered=registered)
    path, started = tmp_path / "sock", asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        serving = tg.create_task(server.serve(path, started=started))
        await started.wait()
        async with RpcClient.connect(path) as client:
            pending = tg.create_task(client.call("echo", {"a": 1}, tier=Tier.SHORT))
            info = await client.call("info", {}, tier=Tier.SHORT)
            await asyncio.sleep(0.05)
            assert not pending.done()
            server.register("echo", _echo)
            registered.set()
            assert await pending == {"a": 1}
        assert info["server"] == "test"
        serving.cancel()


async def test_a_method_never_registered_is_unknown_after_the_wait(tmp_path: Path) -> None:
    """Past its wait, a method that was never registered gets UNKNOWN_METHOD."""
    server = RpcServer(
        info=ServerInfo(server="test"), registered=asyncio.Event(), registered_wait=0.05
    )
    path, started = tmp_path / "sock", asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        serving = tg.create_task(server.serve(path, started=started))
        await started.wait()
        async with RpcClient.connect(path) as client:
            with pytest.raises(UnknownMethod):
                await client.call("nope", {}, tier=Tier.SHORT)
        serving.cancel()


async def test_the_launcher_socket_is_renamed_before_its_commands_load(tmp_path: Path) -> None:
    """The launcher's command socket is `launcher-sock` (ready) while no command is
    registered; a ping made then is answered once the commands are opened, and the
    server stops with the context."""
    async with command_socket(tmp_path) as sock:
        assert (tmp_path / LAUNCHER_SOCKET).exists()
        assert not (tmp_path / LAUNCHER_INIT_SOCKET).exists()
        async with RpcClient.connect(tmp_path / LAUNCHER_SOCKET) as client:
            ping = asyncio.ensure_future(client.call("ping", {}, tier=Tier.SHORT))
            await asyncio.sleep(0.05)
            assert not ping.done()

            async def pong(_args: Mapping[str, Any]) -> str:
                return "pong"

            sock.server.register("ping", pong)
            sock.open_commands()
            assert await ping == "pong"
    assert sock.serving.done()
