"""Pushes domain events to the handler's notify socket, reconnecting when it goes away.

Events queue up while the handler is away (bounded; the oldest are dropped first, and the
newest state always survives, which is what the handler's cache needs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from shared.wire.client import RpcClient, Tier
from shared.wire.domain import DomainEvent
from shared.wire.errors import RemoteError, WireError
from shared.wire.launcher_api import NOTIFY_METHOD

log = structlog.get_logger("launcher.notifier")


class Notifier:
    def __init__(self, socket: Path | None, *, max_queued: int = 256) -> None:
        self._socket = socket
        self._queue: asyncio.Queue[DomainEvent] = asyncio.Queue(max_queued)
        self.sent = 0

    def publish(self, event: DomainEvent) -> None:
        """Queue an event; never blocks (called from event handling)."""
        if self._socket is None:
            return
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(event)

    async def run(self, *, backoff_cap: float = 5.0) -> None:
        """Deliver events forever; reconnect with capped backoff when the handler goes away."""
        if self._socket is None:
            await asyncio.Future()
        assert self._socket is not None
        delay = 0.1
        while True:
            try:
                async with RpcClient.connect(self._socket) as client:
                    log.info("notify_connected", socket=str(self._socket))
                    delay = 0.1
                    await self._deliver(client)
            except WireError as exc:
                log.info("notify_unavailable", error=str(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, backoff_cap)

    async def _deliver(self, client: RpcClient) -> None:
        while True:
            event = await self._queue.get()
            try:
                await client.call(NOTIFY_METHOD, event.to_wire(), tier=Tier.SHORT)
            except RemoteError as exc:
                log.warning("notify_rejected", error=str(exc))
                continue
            except WireError:
                # Put it back at the front of the line: the next connection sends it first.
                self._requeue_front(event)
                raise
            self.sent += 1

    def _requeue_front(self, event: DomainEvent) -> None:
        pending = [event]
        while not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for item in pending[-self._queue.maxsize :]:
            self._queue.put_nowait(item)
