"""The notify server: launchers push their domain events here; they land in the cache.

It speaks the same protocol as the launcher's command socket (shared.wire), with one
method, `domain_event`. The socket lives on a hostPath that every launcher pod of this
node mounts at the same place; non-root launchers reach it as its group (LAUNCHER_GID).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from handler.domains import DomainCache
from shared.launcherpod import LAUNCHER_GID
from shared.wire.domain import DomainEvent
from shared.wire.launcher_api import NOTIFY_METHOD
from shared.wire.server import RpcServer, ServerInfo

log = structlog.get_logger("handler.notify")


class NotifyServer:
    """Serves `domain_event` on `path` until cancelled; removes the socket on the way out."""

    def __init__(self, path: Path, cache: DomainCache) -> None:
        self._path = path
        self._cache = cache
        self._server = RpcServer(info=ServerInfo(server="virt-handler-py"))
        self._server.register(NOTIFY_METHOD, self._on_event)

    @property
    def path(self) -> Path:
        return self._path

    async def serve(self, *, started: asyncio.Event | None = None) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        try:
            log.info("notify_server_starting", socket=str(self._path))
            await self._server.serve(self._path, started=started, group=LAUNCHER_GID)
        finally:
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()

    async def _on_event(self, args: Mapping[str, Any]) -> None:
        event = DomainEvent.from_wire(args)  # InvalidArgument → an error reply to the launcher
        self._cache.apply_event(event)
