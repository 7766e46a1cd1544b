"""The command client: version handshake, concurrent calls, per-call timeout tiers.

Use it as an async context manager; it owns the task that reads replies, so nothing
outlives the ``async with`` block:

    async with RpcClient.connect(path) as client:
        await client.call("ping", {}, tier=Tier.SHORT)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import structlog

from shared.wire.errors import (
    CallTimeout,
    Disconnected,
    ProtocolViolation,
    VersionMismatch,
    error_from_wire,
)
from shared.wire.framing import DEFAULT_LIMITS, encode_frame, read_frame
from shared.wire.limits import Limits
from shared.wire.server import PROTOCOL_VERSIONS
from shared.wire.unixpath import short_path

log = structlog.get_logger("shared.wire.client")
_DRAIN_THRESHOLD = 64 * 1024


class Tier(StrEnum):
    """Timeout tiers, as KubeVirt's launcher client has them."""

    SHORT = "short"
    MEDIUM = "medium"
    LONG = "long"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds per tier, plus the connect timeout."""

    short: float = 5.0
    medium: float = 20.0
    long: float = 60.0
    connect: float = 5.0

    def of(self, tier: Tier) -> float:
        seconds: float = getattr(self, tier.value)  # the tiers are named as the fields
        return seconds


def pick_version(ours: tuple[str, ...], theirs: tuple[str, ...]) -> str:
    """The highest version both sides speak ("v10" > "v9")."""
    common = set(ours) & set(theirs)
    if not common:
        raise VersionMismatch(ours, theirs)
    return max(common, key=lambda v: (len(v), v))


class RpcClient:
    """One connection to an RpcServer. Build it with ``RpcClient.connect``."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, options: _Options
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._options = options
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._closed: BaseException | None = None
        self.version = ""
        self.server_info: Mapping[str, Any] = {}

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        path: Path,
        *,
        versions: tuple[str, ...] = PROTOCOL_VERSIONS,
        timeouts: Timeouts | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> AsyncIterator[RpcClient]:
        """Connect, agree on a version, and yield the client; closes on exit.

        ``limits`` bound what the client reads (replies); it writes frames of at most
        ``limits.max_frame`` bytes.
        """
        options = _Options(versions, timeouts or Timeouts(), limits)
        try:
            async with asyncio.timeout(options.timeouts.connect):
                with short_path(path) as sock_path:
                    reader, writer = await asyncio.open_unix_connection(sock_path)
        except (OSError, TimeoutError) as exc:
            raise Disconnected(f"cannot connect to {path}: {exc}") from exc
        client = cls(reader, writer, options=options)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(client._read_replies(), name="rpc-client-reader")
                try:
                    await client._handshake()
                    yield client
                finally:
                    client._shutdown(Disconnected("client closed"))
        except BaseExceptionGroup as group:
            # The reader never raises, so the group holds only what the caller's block raised:
            # hand it back unwrapped, as an ordinary context manager would.
            raise group.exceptions[0] from None

    @property
    def connected(self) -> bool:
        return self._closed is None

    async def call(self, method: str, args: Mapping[str, Any] | None = None, *, tier: Tier) -> Any:
        """Call ``method`` and return its result; raises the typed error the server sent."""
        if self._closed is not None:
            raise Disconnected(f"{method}: connection closed ({self._closed})")
        if self._writer.is_closing():
            # The transport closed (a failed write, the peer's reset) before the reader saw
            # the end: uvloop refuses a write on it with RuntimeError, not ConnectionError.
            raise Disconnected(f"{method}: connection closing")
        request_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[request_id] = future
        seconds = self._options.timeouts.of(tier)
        # The call's deadline is a timer that fails the reply's future: a fraction of what an
        # asyncio.timeout() scope costs per call (bench-launcher's ping round trip, README).
        timer = loop.call_later(seconds, _expire, future, method, seconds)
        try:
            frame = encode_frame(
                {"id": request_id, "method": method, "args": dict(args or {})},
                max_frame=self._options.limits.max_frame,
            )
            self._writer.write(frame)
            if self._writer.transport.get_write_buffer_size() >= _DRAIN_THRESHOLD:
                async with asyncio.timeout(seconds):
                    await self._writer.drain()
            return await future
        except TimeoutError:
            raise CallTimeout(method, seconds) from None
        except ConnectionError as exc:
            raise Disconnected(f"{method}: {exc}") from exc
        finally:
            timer.cancel()
            self._pending.pop(request_id, None)

    async def _handshake(self) -> None:
        info = await self.call("info", {}, tier=Tier.SHORT)
        theirs = tuple(str(v) for v in info.get("versions", ())) if isinstance(info, dict) else ()
        self.version = pick_version(self._options.versions, theirs)
        self.server_info = info

    async def _read_replies(self) -> None:
        reason: BaseException = Disconnected("server closed the connection")
        try:
            while reply := await read_frame(self._reader, limits=self._options.limits):
                self._resolve(reply)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            reason = Disconnected(f"connection lost mid-frame: {exc}")
        except ProtocolViolation as exc:
            reason = Disconnected(f"server sent a bad frame: {exc}")
        finally:
            self._shutdown(reason)

    def _resolve(self, reply: Mapping[str, Any]) -> None:
        future = self._pending.get(reply.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            if reply.get("id") is None and "error" in reply:
                log.warning("server_error_unsolicited", error=reply["error"])
            return
        if "error" in reply:
            future.set_exception(error_from_wire(reply["error"]))
        else:
            future.set_result(reply.get("result"))

    def _shutdown(self, reason: BaseException) -> None:
        if self._closed is None:
            self._closed = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(Disconnected(str(reason)))
        self._writer.close()


def _expire(future: asyncio.Future[Any], method: str, seconds: float) -> None:
    if not future.done():
        future.set_exception(CallTimeout(method, seconds))


@dataclass(frozen=True, slots=True)
class _Options:
    versions: tuple[str, ...]
    timeouts: Timeouts
    limits: Limits
