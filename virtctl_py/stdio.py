"""The CLI's stdin and stdout as asyncio streams, whatever they are: a tty, a pipe or a
socket (watched by the event loop), a regular file or a device such as /dev/null (which
epoll refuses with EPERM: read and written in a thread instead), or closed (`<&-`: an
empty stdin, a discarded stdout).

    async with open_stdin(fd) as reader:   # asyncio.StreamReader; EOF at the input's end
        data = await reader.read(1024)
    sink = await open_stdout(fd)            # .write(data); await .drain()

`console` and `port-forward --stdio` read through these, so `virtctl-py console vm < file`,
`< /dev/null`, `<&-`, a pipe and a terminal all work (KubeVirt's virtctl copies stdin the
same way, and ends the session at its EOF).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from enum import StrEnum
from typing import IO, BinaryIO

from shared.wsbridge import ByteSink

CHUNK = 64 * 1024


class StdioKind(StrEnum):
    """How a standard stream can be waited on."""

    CLOSED = "closed"  # not an open descriptor
    POLLABLE = "pollable"  # tty, pipe, FIFO, socket: the event loop watches it
    BLOCKING = "blocking"  # regular file or other device: never "not ready", read in a thread


def std_fd(stream: IO[str] | None) -> int:
    """The descriptor of sys.stdin / sys.stdout, or -1 when Python started with it closed
    (the stream is None then, and descriptor 0 or 1 may later be some other file's)."""
    if stream is None:
        return -1
    try:
        return stream.fileno()
    except (OSError, ValueError):
        return -1


def stdio_kind(fd: int) -> StdioKind:
    """What `fd` is (epoll refuses regular files and most devices with EPERM)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return StdioKind.CLOSED
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd):
        return StdioKind.POLLABLE
    return StdioKind.BLOCKING


@contextlib.asynccontextmanager
async def open_stdin(fd: int) -> AsyncIterator[asyncio.StreamReader]:
    """A StreamReader fed from `fd` until its end (or at once at EOF if it is closed)."""
    reader = asyncio.StreamReader()
    kind = stdio_kind(fd)
    if kind is StdioKind.CLOSED:
        reader.feed_eof()
        yield reader
        return
    loop = asyncio.get_running_loop()
    if kind is StdioKind.POLLABLE:
        try:
            loop.add_reader(fd, _read_ready, fd, reader, loop)
        except (PermissionError, ValueError):  # EPERM: a descriptor epoll cannot watch
            kind = StdioKind.BLOCKING
        else:
            try:
                yield reader
            finally:
                loop.remove_reader(fd)
            return
    pump = asyncio.create_task(_pump(fd, reader), name="stdin-pump")
    try:
        yield reader
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


def _read_ready(fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
    """The loop's callback: what is there, or EOF (a hung-up tty reads as EOF too)."""
    try:
        data = os.read(fd, CHUNK)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if data:
        reader.feed_data(data)
        return
    loop.remove_reader(fd)
    reader.feed_eof()


async def _pump(fd: int, reader: asyncio.StreamReader) -> None:
    """Read a file or device in a thread, chunk by chunk, into `reader`."""
    while True:
        try:
            data = await asyncio.to_thread(os.read, fd, CHUNK)
        except OSError:
            data = b""
        if not data:
            reader.feed_eof()
            return
        reader.feed_data(data)


class StdoutSink:
    """stdout as `write` + `drain` (what a bridge needs), any kind: written in a thread,
    so a file, a pipe and a terminal behave alike; a closed stdout discards."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: list[bytes] = []
        self._closed = stdio_kind(fd) is StdioKind.CLOSED

    def write(self, data: bytes) -> None:
        """Queue `data`; `drain` writes it."""
        if not self._closed:
            self._pending.append(data)

    async def drain(self) -> None:
        """Write what is queued (ConnectionError once stdout is gone, as a socket's)."""
        data, self._pending = b"".join(self._pending), []
        while data:
            try:
                written = await asyncio.to_thread(os.write, self._fd, data)
            except BrokenPipeError:
                raise
            except OSError as e:
                raise ConnectionResetError(f"stdout: {e.strerror}") from e
            data = data[written:]


async def open_stdout(fd: int) -> ByteSink:
    """A pipe, socket or terminal as the loop's write pipe; anything else (a file, a
    device, a closed stdout) as a StdoutSink."""
    if stdio_kind(fd) is StdioKind.POLLABLE:
        loop = asyncio.get_running_loop()
        pipe = _unbuffered(fd)
        try:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, pipe
            )
        except (ValueError, PermissionError):
            pipe.close()
        else:
            return asyncio.StreamWriter(transport, protocol, None, loop)
    return StdoutSink(fd)


def _unbuffered(fd: int) -> BinaryIO:
    """`fd` as an unbuffered file that leaves the descriptor open when closed (no I/O)."""
    return open(fd, "wb", buffering=0, closefd=False)
