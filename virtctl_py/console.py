"""`console`: the VMI's serial console over a WebSocket through the aggregated API.

The terminal goes raw while connected; Ctrl+] (0x1d) disconnects, as in virtctl.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import tty
from collections.abc import Iterator

import aiohttp

from shared.kube import VMI_ACTIONS
from shared.kube.websocket import open_websocket
from virtctl_py.session import Target

ESCAPE = 0x1D


@contextlib.contextmanager
def _raw_terminal(fd: int) -> Iterator[None]:
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def console(target: Target, name: str, *, timeout: float) -> str:
    path = VMI_ACTIONS.path(namespace=target.namespace, name=name, subresource="console")
    sys.stderr.write(f"Successfully connected to {name} console. The escape sequence is ^]\n")
    async with open_websocket(target.client_config(), path, timeout=timeout) as ws:
        with _raw_terminal(sys.stdin.fileno()):
            async with asyncio.TaskGroup() as tg:
                reader = tg.create_task(_to_terminal(ws))
                tg.create_task(_from_terminal(ws, reader))
    return ""


async def _to_terminal(ws: aiohttp.ClientWebSocketResponse) -> None:
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.BINARY:
            os.write(sys.stdout.fileno(), msg.data)
        elif msg.type == aiohttp.WSMsgType.TEXT:
            os.write(sys.stdout.fileno(), msg.data.encode())
        else:
            break


async def _from_terminal(ws: aiohttp.ClientWebSocketResponse, reader: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    fd = sys.stdin.fileno()
    loop.add_reader(fd, lambda: queue.put_nowait(os.read(fd, 1024)))
    try:
        while not reader.done():
            data = await queue.get()
            if not data or ESCAPE in data:
                break
            await ws.send_bytes(data)
    finally:
        loop.remove_reader(fd)
        await ws.close()
