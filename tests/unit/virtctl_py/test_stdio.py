"""console and port-forward with any stdin: a regular file, /dev/null, a closed descriptor,
a pipe and a terminal (a pty) are each read to their end without a traceback; the console
session ends at stdin's end, at the escape byte or when the server closes; stdout may be
a file."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
import tty
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from shared.wsbridge import bridge
from virtctl_py import streams
from virtctl_py.console import ConsoleSocket, session
from virtctl_py.stdio import StdioKind, StdoutSink, open_stdin, open_stdout, std_fd, stdio_kind

TEXT = b"echo hello\nuname -a\n"


def _closed_fd() -> int:
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    return r


def _file(tmp_path: Path, data: bytes = TEXT) -> int:
    path = tmp_path / "stdin"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def _pipe(data: bytes = TEXT) -> int:
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return r


def _pty(data: bytes = TEXT) -> int:
    """A terminal whose input holds `data`, hung up (EIO, read as its end) a moment later,
    once the reader took the data."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.write(master, data)
    asyncio.get_running_loop().call_later(0.3, os.close, master)
    return slave


@pytest.fixture
def fds() -> Iterator[list[int]]:
    opened: list[int] = []
    yield opened
    for fd in opened:
        with contextlib.suppress(OSError):
            os.close(fd)


def _stdin(kind: str, tmp_path: Path, fds: list[int]) -> tuple[int, bytes]:
    """A descriptor of `kind` and the bytes it holds."""
    if kind == "closed":
        return _closed_fd(), b""
    if kind == "devnull":
        fd = os.open(os.devnull, os.O_RDONLY)
        fds.append(fd)
        return fd, b""
    fd = {"file": lambda: _file(tmp_path), "pipe": _pipe, "tty": _pty}[kind]()
    fds.append(fd)
    return fd, TEXT


KINDS = [
    pytest.param("file", StdioKind.BLOCKING, id="regular-file"),
    pytest.param("devnull", StdioKind.BLOCKING, id="dev-null"),
    pytest.param("closed", StdioKind.CLOSED, id="closed"),
    pytest.param("pipe", StdioKind.POLLABLE, id="pipe"),
    pytest.param("tty", StdioKind.POLLABLE, id="tty"),
]


@pytest.mark.parametrize(("kind", "expected"), KINDS)
async def test_every_stdin_is_read_to_its_end(
    kind: str, expected: StdioKind, tmp_path: Path, fds: list[int]
) -> None:
    """Each kind is classified as it can be waited on and read whole, then EOF."""
    fd, held = _stdin(kind, tmp_path, fds)
    assert stdio_kind(fd) is expected
    async with open_stdin(fd) as reader:
        async with asyncio.timeout(10):
            got = await reader.read()
    assert got == held


class FakeConsole:
    """A console websocket: sends `output`, then closes if `closes`, else waits."""

    def __init__(self, output: list[bytes], *, closes: bool) -> None:
        self._output = list(output)
        self._closes = closes
        self._released = asyncio.Event()
        self.sent = b""
        self.closed = False

    def __aiter__(self) -> ConsoleSocket:
        return self

    async def __anext__(self) -> aiohttp.WSMessage:
        if self._output:
            return aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, self._output.pop(0), None)
        if not self._closes:
            await self._released.wait()
        raise StopAsyncIteration

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        self.sent += data

    async def close(self) -> bool:
        self.closed = True
        self._released.set()
        return True


@pytest.mark.parametrize(("kind", "expected"), KINDS)
async def test_console_sends_any_stdin_then_ends_at_its_end(
    kind: str, expected: StdioKind, tmp_path: Path, fds: list[int]
) -> None:
    """KubeVirt's virtctl: stdin is copied to the console and its end ends the session;
    the console's output lands in stdout even when stdout is a regular file."""
    fd, held = _stdin(kind, tmp_path, fds)
    out = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT)
    fds.append(out)
    ws = FakeConsole([b"login: "], closes=False)
    async with asyncio.timeout(10):
        why = await session(ws, stdin=fd, stdout=out)
    assert why == "stdin closed"
    assert ws.sent == held and ws.closed


async def test_console_escape_byte_ends_the_session(tmp_path: Path, fds: list[int]) -> None:
    """Ctrl+] ends the session; what came before it on the same read is still sent."""
    fd = _pipe(b"ls\n\x1dnot sent")
    fds.append(fd)
    ws = FakeConsole([], closes=False)
    async with asyncio.timeout(10):
        assert await session(ws, stdin=fd, stdout=_closed_fd()) == "escape"
    assert ws.sent == b"ls\n"


async def test_console_ends_when_the_server_closes(tmp_path: Path, fds: list[int]) -> None:
    """A server that closes ends the session at once, with stdin still open and silent."""
    r, w = os.pipe()
    fds.extend((r, w))
    ws = FakeConsole([b"bye\r\n"], closes=True)
    out = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT)
    fds.append(out)
    async with asyncio.timeout(10):
        assert await session(ws, stdin=r, stdout=out) == "server closed"
    assert (tmp_path / "stdout").read_bytes() == b"bye\r\n"


class FakeTunnel:
    """A port-forward websocket that takes what it is sent and answers nothing."""

    def __init__(self) -> None:
        self.sent = b""
        self._never: asyncio.Event = asyncio.Event()

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage:
        await self._never.wait()
        raise AssertionError("unreachable")

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        self.sent += data


@pytest.mark.parametrize("kind", ["file", "devnull", "closed", "pipe", "tty"])
async def test_port_forward_stdio_with_any_stdin(kind: str, tmp_path: Path, fds: list[int]) -> None:
    """`port-forward --stdio` sends any stdin whole into the tunnel; stdin's end ends the
    tunnel cleanly (KubeVirt's virtctl: either copy ending ends it)."""
    fd, held = _stdin(kind, tmp_path, fds)
    writer = StdoutSink(_closed_fd())
    tunnel = FakeTunnel()
    async with open_stdin(fd) as reader, asyncio.timeout(10):
        why = await bridge(tunnel, reader, writer, write_timeout=5, names=("guest", "stdin"))
    assert (why, tunnel.sent) == ("stdin closed", held)


async def test_a_file_stdout_is_written_in_a_thread(tmp_path: Path, fds: list[int]) -> None:
    """`> file`: stdout is a StdoutSink that writes every byte; a closed stdout discards."""
    out = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT)
    fds.append(out)
    writer = await open_stdout(out)
    assert isinstance(writer, StdoutSink)
    writer.write(b"reply ")
    writer.write(b"bytes")
    await writer.drain()
    assert (tmp_path / "stdout").read_bytes() == b"reply bytes"
    gone = await open_stdout(_closed_fd())
    gone.write(b"lost")
    await gone.drain()


async def test_a_pipe_stdout_is_the_loops_write_pipe(fds: list[int]) -> None:
    """A pipe stdout stays on the event loop (ssh's ProxyCommand throughput)."""
    r, w = os.pipe()
    fds.extend((r, w))
    writer = await open_stdout(w)
    assert isinstance(writer, asyncio.StreamWriter)
    writer.write(b"x")
    await writer.drain()
    assert os.read(r, 1) == b"x"
    writer.close()


def test_python_started_without_stdin_reads_as_closed() -> None:
    """`<&-`: Python's sys.stdin is None; its descriptor is -1 (descriptor 0 may be reused
    by a socket), which reads as closed."""
    assert std_fd(None) == -1
    assert stdio_kind(-1) is StdioKind.CLOSED
    assert std_fd(sys.stderr) == sys.stderr.fileno()


class RefusedTunnel:
    """A guest port nobody listens on: the tunnel closes at once, without a byte."""

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage:
        return aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, None, None)

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        raise AssertionError("nothing to send")


@pytest.mark.parametrize("kind", ["devnull", "closed"])
async def test_an_empty_stdin_ends_first_even_if_the_guest_refuses(
    kind: str, tmp_path: Path, fds: list[int]
) -> None:
    """An empty stdin and a refused port ending in the same turn: the stdin's end is the
    cause (port-forward --stdio < /dev/null then exits 0, as KubeVirt's virtctl)."""
    fd, _ = _stdin(kind, tmp_path, fds)
    async with open_stdin(fd) as reader:
        await asyncio.sleep(0.1)  # the pump fed its EOF
        why = await bridge(RefusedTunnel(), reader, StdoutSink(_closed_fd()), write_timeout=5)
    assert why == "socket closed"


def test_port_forward_stdio_writes_nothing_but_the_tunnel_to_stdout() -> None:
    """stdout is the tunnel's (`> file`, ssh's ProxyCommand): stdio_forward logs nothing
    (the CLI's log lines go to stdout)."""
    source = inspect.getsource(streams.stdio_forward)
    assert "log." not in source
