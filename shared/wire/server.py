"""The command server: one registered handler per method, concurrent requests per connection.

A request is ``{id, method, args}``; the reply is ``{id, result}`` or ``{id, error}``.
Nothing a client sends can stop the server or make it hold more than its `Limits`: each
frame's worst-case cost is taken from a per-connection and a per-server budget before
its body is read, and bodies are measured before they are decoded. A frame over a limit
gets a typed error reply naming the limit (the connection is closed, with a logged
reason, when the stream can no longer be trusted or no reply is possible); handler
failures become error replies, and one connection's trouble never touches another's.
The checks, in order, are listed in docs/wire-protocol.md.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from shared.wire.budget import Budget, Lease
from shared.wire.decode import Buffer, peek_id, unpack
from shared.wire.errors import (
    BadRequest,
    ErrorCode,
    FrameTooLarge,
    LimitExceeded,
    ProtocolViolation,
    RemoteError,
)
from shared.wire.framing import DEFAULT_LIMITS, encode_frame
from shared.wire.limits import Limits
from shared.wire.receiver import FrameReceiver, release
from shared.wire.unixpath import bind_private

Handler = Callable[[Mapping[str, Any]], Awaitable[Any]]
log = structlog.get_logger("shared.wire.server")

PROTOCOL_VERSIONS: tuple[str, ...] = ("v1",)
_DRAIN_THRESHOLD = 64 * 1024  # below this the transport is not paused; skip the drain await
Request = tuple[dict[str, Any], Lease]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``info`` answers: the versions spoken and who is speaking."""

    versions: tuple[str, ...] = PROTOCOL_VERSIONS
    server: str = "kubevirt-py"

    def to_wire(self) -> dict[str, Any]:
        return {"versions": list(self.versions), "server": self.server}


@dataclass(slots=True, kw_only=True)
class _Conn:
    """One connection: its bytes, the budget its open frames hold, its requests in flight."""

    id: int
    receiver: FrameReceiver
    budget: Budget
    requests: int = 0
    slot_free: asyncio.Event = field(default_factory=asyncio.Event)


class RpcServer:
    """Serves registered methods on a Unix socket until cancelled."""

    def __init__(
        self,
        *,
        info: ServerInfo,
        limits: Limits = DEFAULT_LIMITS,
        write_timeout: float = 10.0,
        registered: asyncio.Event | None = None,
        registered_wait: float = 60.0,
    ) -> None:
        """With ``registered``, the server may listen before its methods are registered: a
        request for a method not registered yet waits (at most ``registered_wait`` s) until
        that event is set, then is routed (the launcher serves its socket before it has
        loaded its commands)."""
        self._info = info
        self._registered = registered
        self._registered_wait = registered_wait
        self._limits = limits
        self._write_timeout = write_timeout
        self._methods: dict[str, Handler] = {}
        self._ids = itertools.count(1)
        self._budget = Budget(limits.server_buffer, name="server_buffer")
        self._open = 0
        self.register("info", self._handle_info)

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self._methods)

    @property
    def limits(self) -> Limits:
        return self._limits

    def register(self, method: str, handler: Handler) -> None:
        """Register the one handler for ``method``."""
        if method in self._methods:
            raise ValueError(f"method {method!r} registered twice")
        self._methods[method] = handler

    async def _handle_info(self, _args: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **self._info.to_wire(),
            "methods": sorted(self._methods),
            "limits": self._limits.to_wire(),
        }

    async def serve(
        self, path: Path, *, started: asyncio.Event | None = None, group: int | None = None
    ) -> None:
        """Listen on ``path`` (0600, in a 0700 directory; 0660 and 0710 when ``group`` may
        connect too) and serve until cancelled."""
        sock = bind_private(path, group=group)
        try:
            async with asyncio.TaskGroup() as tg:

                def on_open(receiver: FrameReceiver) -> None:
                    if self._open >= self._limits.max_connections:
                        log.warning("connection_refused", reason="max_connections", open=self._open)
                        receiver.close()
                        return
                    self._open += 1
                    tg.create_task(self._serve_connection(receiver), name="rpc-connection")

                def factory() -> FrameReceiver:
                    return FrameReceiver(buffer_size=self._limits.read_buffer, on_open=on_open)

                server = await asyncio.get_running_loop().create_unix_server(factory, sock=sock)
                try:
                    if started is not None:
                        started.set()
                    await asyncio.Future()  # until cancelled; the TaskGroup cancels connections
                finally:
                    server.close()
        finally:
            sock.close()

    async def _serve_connection(self, receiver: FrameReceiver) -> None:
        conn = _Conn(
            id=next(self._ids),
            receiver=receiver,
            budget=Budget(self._limits.connection_buffer, name="connection_buffer"),
        )
        try:
            async with asyncio.TaskGroup() as requests:
                while (request := await self._next_request(conn)) is not None:
                    conn.requests += 1
                    requests.create_task(self._dispatch(conn, *request))
                    del request  # the task owns it: held here it would outlive its lease
                    if not self._has_room(conn) and not await self._make_room(conn):
                        break
        except* (asyncio.IncompleteReadError, ConnectionError):
            log.info("connection_dropped", conn=conn.id)
        except* Exception:  # task boundary: a bug ends this connection, never the server
            log.exception("connection_failed", conn=conn.id)
        finally:
            self._open -= 1
            receiver.close()

    def _has_room(self, conn: _Conn) -> bool:
        return (
            conn.requests < self._limits.max_inflight
            and conn.receiver.write_backlog() < _DRAIN_THRESHOLD
        )

    async def _make_room(self, conn: _Conn) -> bool:
        """Wait for a free request slot and for the peer to read its replies; False once
        the connection is given up."""
        while conn.requests >= self._limits.max_inflight:
            conn.slot_free.clear()
            await conn.slot_free.wait()
        return conn.receiver.write_backlog() < _DRAIN_THRESHOLD or await self._drained(conn)

    async def _next_request(self, conn: _Conn) -> Request | None:
        """The next decodable request and the budget it holds; None once the connection
        must end. Frames that break a limit but keep the stream in sync get error replies."""
        limits = self._limits
        while (size := await conn.receiver.read_header()) is not None:
            if size > limits.max_frame:
                self._reject(conn, FrameTooLarge(size, limits.max_frame))
                return None
            lease = Lease(conn.budget, self._budget)
            cost = limits.frame_cost(size)
            if not lease.try_take(cost) and not await self._wait_budget(lease, cost):
                await self._refuse_unread(conn, size, _waited_too_long(lease, size, limits))
            else:
                message: dict[str, Any] | None = None
                try:
                    message = await self._read_message(conn, size, lease)
                finally:
                    if message is None:
                        lease.release()
                if message is not None:
                    return message, lease
            if conn.receiver.closing:
                return None
        return None

    async def _wait_budget(self, lease: Lease, cost: int) -> bool:
        try:
            async with asyncio.timeout(self._limits.budget_wait):
                await lease.take(cost)
        except TimeoutError:
            _reraise_if_cancelling()
            return False
        return True

    async def _read_message(self, conn: _Conn, size: int, lease: Lease) -> dict[str, Any] | None:
        """The frame's body, measured and decoded, its lease cut to what the message costs;
        None if refused. The body dies with this call, before the lease is given back."""
        body: Buffer | None = conn.receiver.buffered_body(size)
        if body is None:
            try:
                async with asyncio.timeout(self._limits.frame_timeout):
                    body = await conn.receiver.read_body(size)
            except TimeoutError:
                self._timed_out(conn)
                return None
        try:
            message, objects = unpack(body, self._limits)
        except ProtocolViolation as exc:
            self._reject(conn, exc, peek_id(body))
            return None
        finally:
            release(body)
        if objects < size:  # measured: hold what it costs (the body itself is gone)
            lease.shrink(self._limits.frame_cost(size, objects) - size)
        return message

    async def _refuse_unread(self, conn: _Conn, size: int, exc: LimitExceeded) -> None:
        """Refuse a frame without holding its body: reply, then skip the body's bytes."""
        try:
            async with asyncio.timeout(self._limits.frame_timeout):
                self._reject(conn, exc, peek_id(await conn.receiver.peek(min(size, 16))))
                await conn.receiver.skip(size)
        except TimeoutError:
            self._timed_out(conn)

    def _timed_out(self, conn: _Conn) -> None:
        """A frame whose bytes stopped coming: the stream cannot be trusted; close it."""
        _reraise_if_cancelling()
        log.warning("frame_timeout", conn=conn.id, timeout=self._limits.frame_timeout)
        conn.receiver.close()

    def _reject(self, conn: _Conn, exc: ProtocolViolation, request_id: int | None = None) -> None:
        log.warning("frame_rejected", conn=conn.id, code=str(exc.code), reason=str(exc))
        self._send(conn, request_id, error=RemoteError(exc.code, str(exc), exc.details))

    async def _dispatch(self, conn: _Conn, message: Mapping[str, Any], lease: Lease) -> None:
        request_id = message.get("id")
        try:
            try:
                await self._until_registered(message.get("method"))
                handler, args = self._route(message)
                result = await handler(args)
            except RemoteError as exc:
                self._send(conn, request_id, error=exc)
            except Exception as exc:  # task boundary: a handler bug is an error reply, not a crash
                log.exception("handler_failed", method=message.get("method"))
                self._send(conn, request_id, error=RemoteError(ErrorCode.INTERNAL, repr(exc)))
            else:
                self._send(conn, request_id, result=result)
            if conn.receiver.write_backlog() >= _DRAIN_THRESHOLD:
                await self._drained(conn)
        finally:
            lease.release()
            conn.requests -= 1
            conn.slot_free.set()

    async def _drained(self, conn: _Conn) -> bool:
        """Apply backpressure; a peer that stops reading loses its connection (and the
        replies it left unread), not the server."""
        try:
            async with asyncio.timeout(self._write_timeout):
                await conn.receiver.drain()
        except TimeoutError:
            _reraise_if_cancelling()
            log.warning("connection_stalled", conn=conn.id, timeout=self._write_timeout)
        except ConnectionError:
            pass
        else:
            return True
        conn.receiver.abort()
        return False

    async def _until_registered(self, method: Any) -> None:
        """A method not registered yet, while the methods are still being registered."""
        event = self._registered
        if event is None or event.is_set() or method in self._methods:
            return
        try:
            await asyncio.wait_for(event.wait(), self._registered_wait)
        except TimeoutError:
            _reraise_if_cancelling()  # still unregistered: _route answers UNKNOWN_METHOD

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
        conn: _Conn,
        request_id: Any,
        *,
        result: Any = None,
        error: RemoteError | None = None,
    ) -> None:
        if conn.receiver.closing:
            return
        reply: dict[str, Any] = {"id": request_id if isinstance(request_id, int) else None}
        if error is not None:
            reply["error"] = error.to_wire()
        else:
            reply["result"] = result
        try:
            frame = encode_frame(reply, max_frame=self._limits.max_frame)
        except (FrameTooLarge, TypeError, ValueError) as exc:
            err = RemoteError(ErrorCode.INTERNAL, f"reply not encodable: {exc}")
            frame = encode_frame({"id": reply["id"], "error": err.to_wire()})
        conn.receiver.write(frame)


def _waited_too_long(lease: Lease, size: int, limits: Limits) -> LimitExceeded:
    budget = lease.waiting_on
    name = budget.name if budget is not None else "server_buffer"
    capacity = budget.capacity if budget is not None else limits.server_buffer
    cost = limits.frame_cost(size)
    message = (
        f"{name}: a frame of {size} bytes (cost {cost}) waited {limits.budget_wait:g}s "
        f"for buffer budget ({capacity} bytes, shared by the frames being served)"
    )
    return LimitExceeded(name, cost, capacity, message=message)


def _reraise_if_cancelling() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
