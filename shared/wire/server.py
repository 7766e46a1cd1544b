"""The command server: one registered handler per method, concurrent requests per connection.

A request is ``{id, method, args}``; the reply is ``{id, result}`` or ``{id, error}``.
Nothing a client sends can stop the server: bad frames get a typed error reply (and the
connection is closed when the stream can no longer be trusted), handler failures become
error replies, and one connection's trouble never touches another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from shared.wire.errors import (
    BadRequest,
    ErrorCode,
    FrameTooLarge,
    ProtocolViolation,
    RemoteError,
)
from shared.wire.framing import DEFAULT_MAX_FRAME, encode_frame, read_frame
from shared.wire.unixpath import short_path

Handler = Callable[[Mapping[str, Any]], Awaitable[Any]]
log = structlog.get_logger("shared.wire.server")

PROTOCOL_VERSIONS: tuple[str, ...] = ("v1",)
_DRAIN_THRESHOLD = 64 * 1024  # below this the transport is not paused; skip the drain await


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``info`` answers: the versions spoken and who is speaking."""

    versions: tuple[str, ...] = PROTOCOL_VERSIONS
    server: str = "kubevirt-py"

    def to_wire(self) -> dict[str, Any]:
        return {"versions": list(self.versions), "server": self.server}


class RpcServer:
    """Serves registered methods on a Unix socket until cancelled."""

    def __init__(
        self, *, info: ServerInfo, max_frame: int = DEFAULT_MAX_FRAME, write_timeout: float = 10.0
    ) -> None:
        self._info = info
        self._max_frame = max_frame
        self._write_timeout = write_timeout
        self._methods: dict[str, Handler] = {}
        self._ids = itertools.count(1)
        self.register("info", self._handle_info)

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self._methods)

    def register(self, method: str, handler: Handler) -> None:
        """Register the one handler for ``method``."""
        if method in self._methods:
            raise ValueError(f"method {method!r} registered twice")
        self._methods[method] = handler

    async def _handle_info(self, _args: Mapping[str, Any]) -> dict[str, Any]:
        return {**self._info.to_wire(), "methods": sorted(self._methods)}

    async def serve(self, path: Path, *, started: asyncio.Event | None = None) -> None:
        """Listen on ``path`` and serve until cancelled; connections live in our TaskGroup."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        async with asyncio.TaskGroup() as tg:

            def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                tg.create_task(self._serve_connection(reader, writer), name="rpc-connection")

            with short_path(path) as sock_path:
                server = await asyncio.start_unix_server(on_connect, path=sock_path)
            try:
                if started is not None:
                    started.set()
                await asyncio.Future()  # until cancelled; the TaskGroup then cancels connections
            finally:
                server.close()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        conn = next(self._ids)
        try:
            async with asyncio.TaskGroup() as requests:
                while (message := await self._next_message(reader, writer, conn)) is not None:
                    requests.create_task(self._dispatch(message, writer))
        finally:
            writer.close()

    async def _next_message(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int
    ) -> dict[str, Any] | None:
        """The next decodable request; None once the connection must end."""
        while True:
            try:
                return await read_frame(reader, max_frame=self._max_frame)
            except FrameTooLarge as exc:
                log.warning("frame_rejected", conn=conn, size=exc.size, limit=exc.limit)
                self._send(writer, None, error=RemoteError(exc.code, str(exc)))
                return None
            except ProtocolViolation as exc:
                log.warning("frame_rejected", conn=conn, reason=str(exc))
                self._send(writer, None, error=RemoteError(exc.code, str(exc)))
            except (asyncio.IncompleteReadError, ConnectionError):
                log.info("connection_dropped", conn=conn)
                return None

    async def _dispatch(self, message: Mapping[str, Any], writer: asyncio.StreamWriter) -> None:
        request_id = message.get("id")
        try:
            handler, args = self._route(message)
            result = await handler(args)
        except RemoteError as exc:
            self._send(writer, request_id, error=exc)
        except Exception as exc:  # task boundary: a handler bug is an error reply, not a crash
            log.exception("handler_failed", method=message.get("method"))
            self._send(writer, request_id, error=RemoteError(ErrorCode.INTERNAL, repr(exc)))
        else:
            self._send(writer, request_id, result=result)
        await self._drain(writer)

    async def _drain(self, writer: asyncio.StreamWriter) -> None:
        """Apply backpressure; a peer that stops reading loses its connection, not the server."""
        if writer.transport.get_write_buffer_size() < _DRAIN_THRESHOLD:
            return
        try:
            async with asyncio.timeout(self._write_timeout):
                await writer.drain()
        except TimeoutError:
            log.warning("connection_stalled", timeout=self._write_timeout)
            writer.close()
        except ConnectionError:
            writer.close()

    def _route(self, message: Mapping[str, Any]) -> tuple[Handler, Mapping[str, Any]]:
        request_id, method, args = message.get("id"), message.get("method"), message.get("args", {})
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            raise BadRequest(ErrorCode.BAD_REQUEST, "'id' must be an integer")
        if not isinstance(method, str):
            raise BadRequest(ErrorCode.BAD_REQUEST, "'method' must be a string")
        if not isinstance(args, Mapping):
            raise BadRequest(ErrorCode.BAD_REQUEST, "'args' must be a map")
        handler = self._methods.get(method)
        if handler is None:
            raise RemoteError(ErrorCode.UNKNOWN_METHOD, f"unknown method {method!r}")
        return handler, args

    def _send(
        self,
        writer: asyncio.StreamWriter,
        request_id: Any,
        *,
        result: Any = None,
        error: RemoteError | None = None,
    ) -> None:
        if writer.is_closing():
            return
        reply: dict[str, Any] = {"id": request_id if isinstance(request_id, int) else None}
        if error is not None:
            reply["error"] = error.to_wire()
        else:
            reply["result"] = result
        try:
            frame = encode_frame(reply, max_frame=self._max_frame)
        except (FrameTooLarge, TypeError, ValueError) as exc:
            err = RemoteError(ErrorCode.INTERNAL, f"reply not encodable: {exc}")
            frame = encode_frame({"id": reply["id"], "error": err.to_wire()})
        writer.write(frame)
