"""The console relay: kube-apiserver's websocket ↔ the handler's websocket, binary frames.

Either side closing ends the relay; the caller then closes both. A console sits idle for
hours, so receives have no deadline: a dead peer is noticed by the websocket heartbeat
(ping/pong), and each send is bounded by `write_timeout` so a stalled peer cannot pin us.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import aiohttp
import structlog

from shared.tasks import cancelling

log = structlog.get_logger("virt_api.subresources.console")

_END = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED)


class WebSocket(Protocol):
    """What both aiohttp websocket classes offer (server and client side)."""

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage: ...

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None: ...


async def relay(client: WebSocket, handler: WebSocket, *, write_timeout: float) -> str:
    """Copy frames both ways until one side ends; returns which side ended and why."""
    async with asyncio.TaskGroup() as tg:
        up = tg.create_task(_pump(client, handler, write_timeout), name="console-up")
        down = tg.create_task(_pump(handler, client, write_timeout), name="console-down")
        done, _ = await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        up.cancel()
        down.cancel()
    first = done.pop()
    return f"{'client' if first is up else 'handler'} {first.result()}"


async def _pump(src: WebSocket, dst: WebSocket, write_timeout: float) -> str:
    while True:
        msg = await src.receive()
        if msg.type in _END:
            return "closed"
        if msg.type is aiohttp.WSMsgType.ERROR:
            return f"failed: {msg.data}"
        if msg.type is aiohttp.WSMsgType.BINARY:
            data: bytes = msg.data
        elif msg.type is aiohttp.WSMsgType.TEXT:
            data = str(msg.data).encode()
        else:
            continue  # ping/pong are answered by aiohttp itself
        try:
            async with asyncio.timeout(write_timeout):
                await dst.send_bytes(data)
        except TimeoutError:
            if cancelling():
                raise
            return f"peer stalled for {write_timeout:g}s"
        except (ConnectionError, aiohttp.ClientError) as e:
            return f"peer gone: {e}"
