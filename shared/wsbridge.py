"""A websocket bridged to a byte stream (Unix or TCP socket), both ways, binary frames.

Used where a stream crosses a websocket: the handler (console, VNC and port-forward
sockets ↔ the controller's websocket) and virtctl-py (a local TCP client ↔ the API's
websocket). Either side ending ends the bridge; the caller closes both. Reads have no
deadline (a console or an ssh session idles for hours): the websocket heartbeat notices a
dead peer, EOF a dead socket. Each write is bounded by `write_timeout`.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import aiohttp

from shared.tasks import cancelling

_END = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED)
CHUNK = 64 * 1024


class WebSocket(Protocol):
    """What both aiohttp websocket classes offer (server and client side)."""

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage: ...

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None: ...


class ByteSink(Protocol):
    """Where the websocket's bytes go: an asyncio.StreamWriter, or anything that writes
    and drains alike (virtctl-py's stdout when it is a file)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


async def bridge(
    ws: WebSocket,
    reader: asyncio.StreamReader,
    writer: ByteSink,
    *,
    write_timeout: float,
    names: tuple[str, str] = ("client", "socket"),
) -> str:
    """Relay until either side ends; returns which side ended and why."""
    async with asyncio.TaskGroup() as tg:
        up = tg.create_task(_ws_to_stream(ws, writer, write_timeout, names), name="bridge-up")
        down = tg.create_task(_stream_to_ws(reader, ws, write_timeout, names), name="bridge-down")
        done, _ = await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        up.cancel()
        down.cancel()
    # Both at once (an empty stdin and a refused port): the stream's end is the cause.
    return (down if down in done else up).result()


async def _ws_to_stream(
    ws: WebSocket, writer: ByteSink, write_timeout: float, names: tuple[str, str]
) -> str:
    ws_name, stream_name = names
    while True:
        msg = await ws.receive()
        if msg.type in _END:
            return f"{ws_name} closed"
        if msg.type is aiohttp.WSMsgType.ERROR:
            return f"{ws_name} failed: {msg.data!r}"
        if msg.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
            continue  # ping/pong are answered by aiohttp itself
        data = msg.data if isinstance(msg.data, bytes) else str(msg.data).encode()
        try:
            writer.write(data)
            async with asyncio.timeout(write_timeout):
                await writer.drain()
        except (ConnectionError, TimeoutError) as e:
            if cancelling():
                raise
            return f"{stream_name} gone: {e!r}"


async def _stream_to_ws(
    reader: asyncio.StreamReader, ws: WebSocket, write_timeout: float, names: tuple[str, str]
) -> str:
    ws_name, stream_name = names
    while True:
        try:
            data = await reader.read(CHUNK)
        except ConnectionError as e:
            return f"{stream_name} gone: {e!r}"
        if not data:
            return f"{stream_name} closed"
        try:
            async with asyncio.timeout(write_timeout):
                await ws.send_bytes(data)
        except (ConnectionError, TimeoutError, aiohttp.ClientError) as e:
            if cancelling():
                raise
            return f"{ws_name} gone: {e!r}"
