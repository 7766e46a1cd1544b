"""The sending side's `MigrationPeer` for another cluster: the synchronization messages
(shared/wire/sync.py) sent to the receiving controller's endpoint at `connectURL`.

One TLS connection per exchange, each under the config's timeout (connect, handshake,
request, answer). A peer that cannot be reached, or answers nonsense, raises
`SyncUnreachable`; one that refuses the request (a `SyncFailure` answer) `SyncRefused`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from controller.errors import ControllerError
from controller.migration.sync_config import SyncConfig, split_url
from shared.mtls import peer_cn
from shared.wire.errors import WireError
from shared.wire.framing import encode_frame, read_frame
from shared.wire.sync import (
    SYNC_LIMITS,
    Ack,
    Answer,
    Pairing,
    PeerOutcome,
    Report,
    Request,
    SourceHalf,
    SyncFailure,
    decode_answer,
    encode,
)

CLOSE_TIMEOUT = 2.0


class SyncUnreachable(ControllerError):
    """The synchronization endpoint at `url` could not be reached or answered nonsense."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"synchronization endpoint {url}: {why}")
        self.url = url
        self.why = why


class SyncRefused(ControllerError):
    """The synchronization endpoint at `url` refused the request."""

    def __init__(self, url: str, failure: SyncFailure) -> None:
        super().__init__(f"synchronization endpoint {url} refused: {failure.message}")
        self.url = url
        self.failure = failure


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await writer.wait_closed()


async def exchange(url: str, request: Request, *, config: SyncConfig) -> Answer:
    """Send one request to `url`, read its answer."""
    host, port = split_url(url)
    frame = encode_frame(encode(request), max_frame=SYNC_LIMITS.max_frame)
    try:
        async with asyncio.timeout(config.timeout):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=config.client_context(), server_hostname=host
            )
            try:
                if (cn := peer_cn(writer)) != config.peer_cn:
                    raise SyncUnreachable(url, f"the peer presented CN {cn!r}")
                writer.write(frame)
                await writer.drain()
                answer = await read_frame(reader, limits=SYNC_LIMITS)
            finally:
                await _close(writer)
    except TimeoutError:
        if (task := asyncio.current_task()) is not None and task.cancelling():
            raise
        raise SyncUnreachable(url, f"no answer within {config.timeout:g} s") from None
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError, WireError) as exc:
        raise SyncUnreachable(url, str(exc) or type(exc).__name__) from exc
    if answer is None:
        raise SyncUnreachable(url, "the peer closed the connection without an answer")
    try:
        return decode_answer(answer)
    except WireError as exc:
        raise SyncUnreachable(url, f"bad answer: {exc}") from exc


class RemotePeer:
    """The receiving side in another cluster, at `url` (a connectURL)."""

    def __init__(self, url: str, *, config: SyncConfig) -> None:
        self.url = url
        self._config = config

    async def _call(self, request: Request) -> Answer:
        answer = await exchange(self.url, request, config=self._config)
        if isinstance(answer, SyncFailure):
            raise SyncRefused(self.url, answer)
        return answer

    async def offer(self, source: SourceHalf) -> Pairing:
        """The receiving controller's pairing for `source`."""
        answer = await self._call(source)
        if not isinstance(answer, Pairing):
            raise SyncUnreachable(self.url, f"answered {type(answer).__name__} to an offer")
        return answer

    async def report(self, migration_id: str, outcome: PeerOutcome, *, reason: str = "") -> None:
        """Tell the receiving controller how the sending side ended."""
        report = Report(migration_id=migration_id, outcome=outcome, reason=reason)
        answer = await self._call(report)
        if not isinstance(answer, Ack):
            raise SyncUnreachable(self.url, f"answered {type(answer).__name__} to a report")
