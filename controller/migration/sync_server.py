"""The synchronization endpoint (KubeVirt's virt-synchronization-controller, port 9185):
served by the leader controller only (controller/app.py starts it with the work queues).

Each connection carries one request and its answer (shared/wire/sync.py), under the
config's timeout; the client must present a certificate of the kubevirt-py CA with the
synchronization CN. The answer comes from `answer` (decentral_remote.SyncDesk: from the
caches, no I/O). A malformed frame is answered with a `SyncFailure` naming the field.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable

import structlog

from controller.migration.sync_config import SyncConfig
from shared.mtls import peer_cn
from shared.wire.errors import ProtocolViolation, WireError
from shared.wire.framing import encode_frame, read_frame
from shared.wire.sync import SYNC_LIMITS, Answer, Request, SyncFailure, decode_request, encode

log = structlog.get_logger("controller.migration.sync")

FORBIDDEN = "forbidden"
CLOSE_TIMEOUT = 2.0


class SyncServer:
    """Serves synchronization requests until cancelled."""

    def __init__(self, config: SyncConfig, *, answer: Callable[[Request], Answer]) -> None:
        self._config = config
        self._answer = answer
        self.bound = asyncio.Event()
        self.port = config.port  # the bound port (config.port 0: an ephemeral one, in tests)

    async def run(self) -> None:
        """Listen on the config's host and port until cancelled."""
        cfg = self._config
        server = await asyncio.start_server(
            self._connection,
            cfg.host,
            cfg.port,
            ssl=cfg.server_context(),
            ssl_handshake_timeout=cfg.timeout,
        )
        async with server:
            self.port = server.sockets[0].getsockname()[1]
            self.bound.set()
            log.info("sync_server_listening", host=cfg.host, port=self.port)
            await server.serve_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            async with asyncio.timeout(self._config.timeout):
                await self._exchange(reader, writer)
        except TimeoutError:
            if (task := asyncio.current_task()) is not None and task.cancelling():
                raise
            log.warning("sync_request_failed", peer=str(peer), why="timeout")
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, WireError) as exc:
            log.warning("sync_request_failed", peer=str(peer), why=str(exc))
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answer = await self._answer_for(reader, peer_cn(writer))
        if answer is None:
            return
        writer.write(encode_frame(encode(answer), max_frame=SYNC_LIMITS.max_frame))
        await writer.drain()

    async def _answer_for(self, reader: asyncio.StreamReader, cn: str | None) -> Answer | None:
        """The answer to the connection's one request; None when it sent none."""
        if cn != self._config.peer_cn:
            log.warning("sync_request_refused", peer_cn=cn)
            return SyncFailure(code=FORBIDDEN, message=f"CN {cn!r} is not a sync controller")
        try:
            frame = await read_frame(reader, limits=SYNC_LIMITS)
            if frame is None:
                return None
            request = decode_request(frame)
        except ProtocolViolation as exc:
            log.warning("sync_bad_frame", code=str(exc.code), why=str(exc))
            return SyncFailure(code=str(exc.code), message=str(exc))
        return self._answer(request)
