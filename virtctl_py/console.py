"""`console`: the VMI's serial console over a WebSocket through the aggregated API.

The terminal goes raw while connected; Ctrl+] (0x1d) disconnects, as in virtctl. Any stdin
works (virtctl_py/stdio.py): a terminal, a pipe, a file, /dev/null, a closed one. As in
KubeVirt's virtctl, the session ends at stdin's end (after sending what it held), at the
escape byte, or when the server closes; output goes on to stdout whatever it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import sys
import termios
import tty
from collections.abc import Iterator
from typing import Protocol

import aiohttp

from shared.kube import VMI_ACTIONS
from shared.kube.websocket import open_websocket
from virtctl_py.session import Target
from virtctl_py.stdio import CHUNK, open_stdin, std_fd

ESCAPE = 0x1D


class ConsoleSocket(Protocol):
    """What the console needs of the websocket (a fake in unit tests)."""

    def __aiter__(self) -> ConsoleSocket: ...

    async def __anext__(self) -> aiohttp.WSMessage: ...

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None: ...

    async def close(self) -> bool: ...


@contextlib.contextmanager
def _raw_terminal(fd: int) -> Iterator[None]:
    if not os.isatty(fd):  # a file, a pipe, /dev/null or a closed stdin (False, no error)
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd, termios.TCSANOW)  # typeahead kept (TCSAFLUSH would drop it)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):  # a terminal hung up meanwhile (EIO)
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def console(target: Target, name: str, *, timeout: float) -> str:
    path = VMI_ACTIONS.path(namespace=target.namespace, name=name, subresource="console")
    sys.stderr.write(f"Successfully connected to {name} console. The escape sequence is ^]\n")
    async with open_websocket(target.client_config(), path, timeout=timeout) as ws:
        await session(ws, stdin=std_fd(sys.stdin), stdout=std_fd(sys.stdout))
    return ""


async def session(ws: ConsoleSocket, *, stdin: int, stdout: int) -> str:
    """Relay until stdin ends (or sends the escape byte) or the server closes; which."""
    with _raw_terminal(stdin):
        async with open_stdin(stdin) as reader, asyncio.TaskGroup() as tg:
            out = tg.create_task(_to_terminal(ws, stdout), name="console-out")
            into = tg.create_task(_from_terminal(ws, reader), name="console-in")
            done, _ = await asyncio.wait((out, into), return_when=asyncio.FIRST_COMPLETED)
            out.cancel()
            into.cancel()
        await ws.close()
    return done.pop().result()


async def _to_terminal(ws: ConsoleSocket, fd: int) -> str:
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.BINARY:
            data = msg.data
        elif msg.type == aiohttp.WSMsgType.TEXT:
            data = msg.data.encode()
        else:
            break
        try:
            os.write(fd, data)
        except BlockingIOError:
            await asyncio.to_thread(_write_all, fd, data)
        except OSError:  # a closed stdout: the output has nowhere to go
            pass
    return "server closed"


def _write_all(fd: int, data: bytes) -> None:
    """A non-blocking stdout that was full: retry until written (off the loop)."""
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)


async def _from_terminal(ws: ConsoleSocket, reader: asyncio.StreamReader) -> str:
    while data := await reader.read(CHUNK):
        if ESCAPE in data:
            before = data[: data.index(ESCAPE)]
            if before:
                await ws.send_bytes(before)
            return "escape"
        await ws.send_bytes(data)
    return "stdin closed"
