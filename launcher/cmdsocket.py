"""The launcher's command socket, served as soon as libvirtd is spawned.

launcher.app opens it before it imports the heavy part of the launcher (launcher.serve: the
model, the domain XML builder, libvirt-python), so the handler connects and wires the pod's
network while those load. The socket is renamed to ``launcher-sock`` (the readiness signal)
once it answers ``info``; requests for the launcher's commands wait in the server until
launcher.serve has registered them (`RpcServer`'s ``registered`` event), so the handler's
Sync is served as soon as the launcher can define the domain.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from shared.podlayout import LAUNCHER_INIT_SOCKET, LAUNCHER_SOCKET
from shared.wire.client import RpcClient, Tier
from shared.wire.server import RpcServer, ServerInfo

log = structlog.get_logger("launcher")

SERVER_NAME = "virt-launcher-py"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSocket:
    """The listening server, the event that opens it to commands, and its serving task."""

    server: RpcServer
    registered: asyncio.Event
    serving: asyncio.Task[None]

    def open_commands(self) -> None:
        """Every command is registered: requests waiting for theirs are routed now."""
        self.registered.set()
        log.info("launcher_commands_registered", methods=len(self.server.methods))


@contextlib.asynccontextmanager
async def command_socket(sockets_dir: Path) -> AsyncIterator[CommandSocket]:
    """Listen on ``launcher-init-sock``, rename it to ``launcher-sock`` once it answers, and
    stop serving on the way out."""
    registered = asyncio.Event()
    server = RpcServer(info=ServerInfo(server=SERVER_NAME), registered=registered)
    init_sock = sockets_dir / LAUNCHER_INIT_SOCKET
    started = asyncio.Event()
    serving = asyncio.create_task(server.serve(init_sock, started=started), name="command-server")
    try:
        await _until_listening(serving, started)
        await _announce_ready(init_sock, sockets_dir / LAUNCHER_SOCKET)
        yield CommandSocket(server=server, registered=registered, serving=serving)
    finally:
        serving.cancel()
        await asyncio.wait({serving})
        if not serving.cancelled() and serving.exception() is not None:
            log.warning("command_server_failed", error=repr(serving.exception()))


async def _until_listening(serving: asyncio.Task[None], started: asyncio.Event) -> None:
    """Until the server listens; its failure to bind (or any) is raised here."""
    listening = asyncio.create_task(started.wait())
    try:
        await asyncio.wait({serving, listening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        listening.cancel()
    if serving.done():
        serving.result()  # raises what stopped it
        raise RuntimeError("the command server stopped before it listened")


async def _announce_ready(init_sock: Path, final: Path) -> None:
    """Rename the socket only once it answers: the rename is the readiness signal."""
    async with RpcClient.connect(init_sock) as client:
        await client.call("info", {}, tier=Tier.SHORT)
    init_sock.rename(final)
    log.info("launcher_ready", socket=str(final))


async def import_off_loop(module: str) -> None:
    """Import ``module`` in a thread: the event loop keeps answering on the command socket
    (the handler's handshake) during the seconds a loaded host takes to import it."""
    await asyncio.to_thread(importlib.import_module, module)


async def watch(serving: asyncio.Task[None]) -> None:
    """Ends with the server (its failure ends the launcher); cancelled, it stops the server."""
    await serving
