"""One server connection's bytes, held only in buffers the server accounts for.

A stream reader buffers whatever the transport reads (up to 256 KiB a read) whether or
not anyone asked for it. This protocol hands the transport its own buffers instead
(asyncio.BufferedProtocol): headers and small frames land in a fixed per-connection
buffer, and a larger body lands straight in a buffer of exactly its size, allocated by
the server once the frame's budget allows. Reading pauses whenever the fixed buffer is
full, so the rest waits in the kernel, not in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
from collections.abc import Callable
from typing import cast

from shared.wire.framing import HEADER


class FrameReceiver(asyncio.BufferedProtocol):
    """Protocol and reader of one connection; one task reads, any task writes."""

    def __init__(self, *, buffer_size: int, on_open: Callable[[FrameReceiver], None]) -> None:
        self._buf = bytearray(buffer_size)
        self._view = memoryview(self._buf)  # never resized, so it may stay exported
        self._start = 0  # unread bytes are _buf[_start:_end]
        self._end = 0
        self._body: mmap.mmap | None = None  # a large body being filled in place
        self._filled = 0
        self._on_open = on_open
        self._transport: asyncio.Transport | None = None
        self._data: asyncio.Future[None] | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._read_paused = False
        self._eof = False
        self._lost = False

    # --- transport callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is not None:
            return memoryview(self._body)[self._filled :]
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._body is not None:
            self._filled += nbytes
            if self._filled == len(self._body):
                self._body = None
        else:
            self._end += nbytes
            if self._end == len(self._buf):
                self._pause()  # the reader makes room, then resumes
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return True  # keep the transport open: replies to what was read still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        self._wake()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- the reading task's side ---------------------------------------------------------
    async def read_header(self) -> int | None:
        """The next frame's announced size; None on a clean end of stream."""
        if self._end - self._start < HEADER.size and not await self._fill(
            HEADER.size, allow_eof=True
        ):
            return None
        (size,) = HEADER.unpack_from(self._buf, self._start)
        self._start += HEADER.size
        return int(size)

    def buffered_body(self, size: int) -> bytes | None:
        """The next ``size`` bytes if they are buffered already (most frames), else None."""
        if self._end - self._start < size:
            return None
        chunk = bytes(self._buf[self._start : self._start + size])
        self._start += size
        return chunk

    async def read_body(self, size: int) -> bytes | mmap.mmap:
        """The next ``size`` bytes; a size beyond the fixed buffer gets a buffer of its own,
        mapped straight from the kernel (not from the heap, which would keep it after use)."""
        if size <= len(self._buf):
            await self._fill(size)
            chunk = bytes(self._buf[self._start : self._start + size])
            self._start += size
            return chunk
        body = mmap.mmap(-1, size)
        have = self._end - self._start  # all of it belongs to this frame: it is larger
        body[:have] = self._buf[self._start : self._end]
        self._start = self._end = 0
        self._body, self._filled = body, have
        self._resume()
        try:
            while self._body is not None:
                if self._eof:
                    raise asyncio.IncompleteReadError(b"", size)  # no copy of what came
                await self._wait()
        except BaseException:
            self._body = None
            release(body)  # now, not when the exception's frames are collected
            raise
        return body

    async def peek(self, size: int) -> bytes:
        """Up to ``size`` of the next bytes (at most the fixed buffer), left unread."""
        await self._fill(min(size, len(self._buf)))
        return bytes(self._buf[self._start : self._start + size])

    async def skip(self, size: int) -> None:
        """Discard the next ``size`` bytes through the fixed buffer."""
        while size:
            await self._fill(1)
            step = min(size, self._end - self._start)
            self._start += step
            size -= step

    async def _fill(self, need: int, *, allow_eof: bool = False) -> bool:
        """Wait until ``need`` unread bytes are buffered; False on EOF before any byte."""
        while self._end - self._start < need:
            if self._eof:
                partial = bytes(self._buf[self._start : self._end])
                if allow_eof and not partial:
                    return False
                raise asyncio.IncompleteReadError(partial, need)
            if len(self._buf) - self._start < need:
                self._compact()
            self._resume()
            await self._wait()
        return True

    def _compact(self) -> None:
        unread = self._end - self._start
        self._buf[:unread] = self._buf[self._start : self._end]
        self._start, self._end = 0, unread

    async def _wait(self) -> None:
        self._data = asyncio.get_running_loop().create_future()
        try:
            await self._data
        finally:
            self._data = None

    def _wake(self) -> None:
        if self._data is not None and not self._data.done():
            self._data.set_result(None)

    def _pause(self) -> None:
        if not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()

    def _resume(self) -> None:
        if self._read_paused and self._transport is not None and not self._lost:
            self._read_paused = False
            self._transport.resume_reading()

    # --- writing, from any task ----------------------------------------------------------
    @property
    def closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def write(self, data: bytes) -> None:
        if not self.closing:
            assert self._transport is not None
            self._transport.write(data)

    def write_backlog(self) -> int:
        return 0 if self._transport is None else self._transport.get_write_buffer_size()

    async def drain(self) -> None:
        """Wait until the transport takes more; ConnectionError once the peer is gone."""
        await self._writable.wait()
        if self._lost:
            raise ConnectionResetError("connection lost")

    def close(self) -> None:
        """Close once what was written has gone out."""
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close now, dropping unsent replies (a peer that stopped reading)."""
        if self._transport is not None:
            self._transport.abort()


def release(body: object) -> None:
    """Unmap a body from read_body at once (bytes are left to the collector)."""
    if isinstance(body, mmap.mmap):
        with contextlib.suppress(BufferError):  # still exported: the collector unmaps it
            body.close()
