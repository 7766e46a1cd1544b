"""The upload server's routes: one upload, written to a file, then handed to the importer.

    GET /healthz              200 (the readiness probe: the DataVolume shows UploadReady)
    POST|PUT /v1beta1/upload  the body streams into `out`; then `command` (the importer
                              script: qemu-img checks and converts into the claim) runs;
                              200 when it exits 0, else 400 with its stderr (the reason)

One upload per pod, as CDI's: a second one is answered 409. When the answer is sent,
`finished` holds the command's exit code and the server stops (the pod ends Succeeded or
Failed, which the DataVolume controller turns into the phase).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import structlog
from aiohttp import web

from shared.upload import HEALTH_PATH, UPLOAD_PATH

log = structlog.get_logger("uploadserver")

CHUNK = 1 << 20
READ_TIMEOUT = 300.0  # a client that sends nothing for this long is given up on
CONVERT_TIMEOUT = 3600.0
MAX_MESSAGE = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Where the body goes and what converts it."""

    out: Path
    command: Sequence[str]
    chunk: int = CHUNK
    # Where a failure before the command ran is written (the command writes its own).
    termination_log: Path | None = None


@dataclass(slots=True)
class UploadState:
    """Whether an upload was taken; the exit code once it is done."""

    taken: bool = False
    finished: asyncio.Future[int] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


UPLOAD_STATE = web.AppKey("upload_state", UploadState)


def build_app(config: ServerConfig, state: UploadState) -> web.Application:
    """The aiohttp application (tests drive it directly)."""

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def upload(request: web.Request) -> web.Response:
        if state.taken:
            raise web.HTTPConflict(text="this upload server has taken its upload already\n")
        state.taken = True
        code, message = await _receive_and_convert(request, config)
        if not state.finished.done():
            state.finished.set_result(code)
        if code != 0:
            return web.Response(status=400, text=f"{message}\n")
        return web.Response(text="uploaded\n")

    app = web.Application(client_max_size=0)
    app[UPLOAD_STATE] = state
    app.router.add_get(HEALTH_PATH, health)
    app.router.add_route("POST", UPLOAD_PATH, upload)
    app.router.add_route("PUT", UPLOAD_PATH, upload)
    return app


async def _receive_and_convert(request: web.Request, config: ServerConfig) -> tuple[int, str]:
    """(exit code, why) of one upload: the body saved, then the command run on it."""
    try:
        received = await _save(request, config)
    except (OSError, TimeoutError, ConnectionError) as e:
        log.warning("upload_receive_failed", error=str(e))
        return await _refuse(config, f"the upload was not received whole: {e}")
    log.info("upload_received", bytes=received)
    if received == 0:
        return await _refuse(config, "not a disk image: the upload is empty")
    return await _convert(config)


async def _refuse(config: ServerConfig, message: str) -> tuple[int, str]:
    if config.termination_log is not None:
        try:
            await asyncio.to_thread(config.termination_log.write_text, message)
        except OSError as e:
            log.warning("termination_log_unwritable", error=str(e))
    return 1, message


async def _save(request: web.Request, config: ServerConfig) -> int:
    f = await asyncio.to_thread(config.out.open, "wb")
    received = 0
    try:
        while True:
            async with asyncio.timeout(READ_TIMEOUT):
                data = await request.content.read(config.chunk)
            if not data:
                break
            await asyncio.to_thread(_write, f, data)
            received += len(data)
    finally:
        await asyncio.to_thread(f.close)
    expected = request.content_length
    if expected is not None and received != expected:
        raise ConnectionError(f"{received} of {expected} bytes")
    return received


def _write(f: BinaryIO, data: bytes) -> None:
    f.write(data)


async def _convert(config: ServerConfig) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *config.command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(CONVERT_TIMEOUT):
            _, err = await proc.communicate()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    code = proc.returncode if proc.returncode is not None else 1
    message = err.decode(errors="replace").strip()[-MAX_MESSAGE:] or f"the importer exited {code}"
    log.info("upload_converted", exit_code=code, message=message if code else "")
    return code, message
