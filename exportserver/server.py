"""The exporter's HTTP routes: a claim's disk, raw or gzip, behind the export token.

    GET /exportready                     200 (the pod's readiness probe; no token)
    GET /volumes/<claim>/disk.img        the raw disk (Content-Length set)
    GET /volumes/<claim>/disk.img.gz     the same bytes, gzip-compressed as they stream
    GET /volumes/<claim>/disk.tar.gz     a Filesystem claim's files, a tar.gz (a memory
                                         dump's claim: KubeVirt's archive format)

Every /volumes request carries the token in the `x-kubevirt-export-token` header or query
parameter (KubeVirt's); a missing or wrong one is answered 401. Claims are mounted read-only
under `volumes_dir/<claim>/` (Filesystem: its disk.img) or as the device `volumes_dir/<claim>`
(Block).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import re
import stat
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import structlog
from aiohttp import web

from shared.model.export import (
    ARCHIVE_FILE,
    GZIP_FILE,
    RAW_FILE,
    READY_PATH,
    TOKEN_HEADER,
    VOLUMES_PATH,
)

log = structlog.get_logger("exportserver")

CHUNK = 1 << 20
WRITE_TIMEOUT = 60.0
_VOLUME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Where the claims are and the token the downloads must present."""

    volumes_dir: Path
    token: str
    chunk: int = CHUNK


def disk_path(volumes_dir: Path, volume: str) -> Path | None:
    """The disk of `volume`: <dir>/<volume>/disk.img or the device <dir>/<volume>."""
    if not _VOLUME.match(volume):
        return None
    path = volumes_dir / volume
    if path.is_dir():
        path = path / RAW_FILE
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return path if stat.S_ISREG(mode) or stat.S_ISBLK(mode) else None


def authorized(request: web.Request, token: str) -> bool:
    """The request presents the export token (header or query parameter)."""
    given = request.headers.get(TOKEN_HEADER) or request.query.get(TOKEN_HEADER) or ""
    return bool(token) and hmac.compare_digest(given.encode(), token.encode())


def _size(f: BinaryIO) -> int:
    end = f.seek(0, os.SEEK_END)
    f.seek(0)
    return end


def build_app(config: ServerConfig) -> web.Application:
    """The aiohttp application (tests drive it directly)."""

    async def ready(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def raw(request: web.Request) -> web.StreamResponse:
        return await _serve(request, config, gzip=False)

    async def gz(request: web.Request) -> web.StreamResponse:
        return await _serve(request, config, gzip=True)

    app = web.Application()
    app.router.add_get(READY_PATH, ready)
    app.router.add_get(f"{VOLUMES_PATH}/{{volume}}/{RAW_FILE}", raw, allow_head=False)
    app.router.add_get(f"{VOLUMES_PATH}/{{volume}}/{GZIP_FILE}", gz, allow_head=False)

    async def archive(request: web.Request) -> web.StreamResponse:
        return await _serve_archive(request, config)

    app.router.add_get(f"{VOLUMES_PATH}/{{volume}}/{ARCHIVE_FILE}", archive, allow_head=False)
    return app


async def _serve_archive(request: web.Request, config: ServerConfig) -> web.StreamResponse:
    """The claim's files as a gzip-compressed tar, made in a thread into a pipe as it is
    sent (a client that leaves breaks the pipe, which ends the thread)."""
    volume = request.match_info["volume"]
    if not authorized(request, config.token):
        raise web.HTTPUnauthorized(text="a valid x-kubevirt-export-token is required\n")
    folder = config.volumes_dir / volume
    if not _VOLUME.match(volume) or not folder.is_dir():
        raise web.HTTPNotFound(text=f"no Filesystem volume {volume!r} is exported here\n")
    response = web.StreamResponse()
    response.content_type = "application/gzip"
    await response.prepare(request)
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    async with asyncio.TaskGroup() as tg:
        tg.create_task(asyncio.to_thread(_write_archive, folder, write_fd))
        try:
            sent = await _stream(response, reader, lambda: reader.read(config.chunk) or None)
        finally:
            await asyncio.to_thread(reader.close)
    log.info("export_archive_served", volume=volume, sent_bytes=sent)
    await response.write_eof()
    return response


def _write_archive(folder: Path, fd: int) -> None:
    """tar.gz of the files of `folder` (not the directory itself) into the pipe `fd`."""
    try:
        with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w|gz") as tar:
            for entry in sorted(folder.iterdir()):
                if not entry.name.startswith("."):
                    tar.add(entry, arcname=entry.name)
    except BrokenPipeError:
        log.info("export_archive_abandoned", folder=str(folder))


async def _serve(request: web.Request, config: ServerConfig, *, gzip: bool) -> web.StreamResponse:
    volume = request.match_info["volume"]
    if not authorized(request, config.token):
        log.info("export_unauthorized", volume=volume, peer=request.remote)
        raise web.HTTPUnauthorized(text="a valid x-kubevirt-export-token is required\n")
    path = disk_path(config.volumes_dir, volume)
    if path is None:
        raise web.HTTPNotFound(text=f"no volume {volume!r} is exported here\n")
    f = await asyncio.to_thread(path.open, "rb")
    try:
        size = await asyncio.to_thread(_size, f)
        response = web.StreamResponse()
        response.content_type = "application/gzip" if gzip else "application/octet-stream"
        if not gzip:
            response.content_length = size
        await response.prepare(request)
        sent = await _stream(response, f, _reader(f, config.chunk, gzip=gzip))
    finally:
        await asyncio.to_thread(f.close)
    log.info("export_served", volume=volume, gzip=gzip, disk_bytes=size, sent_bytes=sent)
    await response.write_eof()
    return response


def _reader(f: BinaryIO, chunk: int, *, gzip: bool) -> Callable[[], bytes | None]:
    """One step of the stream (run in a thread): the next bytes, b"" to skip, None at the end."""
    if not gzip:
        return lambda: f.read(chunk) or None
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: the gzip container
    done = False

    def step() -> bytes | None:
        nonlocal done
        if done:
            return None
        data = f.read(chunk)
        if data:
            return compressor.compress(data)
        done = True
        return compressor.flush()

    return step


async def _stream(
    response: web.StreamResponse, f: BinaryIO, step: Callable[[], bytes | None]
) -> int:
    sent = 0
    while (data := await asyncio.to_thread(step)) is not None:
        if data:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await response.write(data)
            sent += len(data)
    return sent
