"""The upload server over real HTTP on loopback, with a shell command standing in for the
importer script: one upload is saved and handed to the command; its exit code is the
answer (200, or 400 with the command's stderr) and what the server exits with."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from shared.upload import HEALTH_PATH, UPLOAD_PATH
from uploadserver.main import ConfigError, parse
from uploadserver.server import ServerConfig, UploadState, build_app

BODY = bytes(range(256)) * 8192  # 2 MiB


@contextlib.asynccontextmanager
async def serving(config: ServerConfig) -> AsyncIterator[tuple[str, UploadState]]:
    state = UploadState()
    runner = web.AppRunner(build_app(config, state))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        await runner.cleanup()


async def test_an_upload_is_saved_converted_and_answered_once(tmp_path: Path) -> None:
    """The body lands in `out`, the command runs on it (here: a copy), the answer is 200 and
    the exit code 0; a second upload is 409."""
    out, dest = tmp_path / "disk", tmp_path / "dest"
    config = ServerConfig(out=out, command=["cp", str(out), str(dest)], chunk=65536)
    async with serving(config) as (url, state), aiohttp.ClientSession() as session:
        async with session.get(url + HEALTH_PATH) as resp:
            assert resp.status == 200
        async with session.post(url + UPLOAD_PATH, data=BODY) as resp:
            assert resp.status == 200, await resp.text()
        assert await state.finished == 0
        assert dest.read_bytes() == BODY
        async with session.put(url + UPLOAD_PATH, data=b"again") as resp:
            assert resp.status == 409


async def test_a_refused_upload_is_400_with_the_reason(tmp_path: Path) -> None:
    """A command that fails (the importer finding no disk image) makes the answer 400 with
    its stderr, and the exit code its own."""
    script = 'echo "not a disk image: format text" >&2; exit 3'
    config = ServerConfig(out=tmp_path / "disk", command=["sh", "-c", script])
    async with serving(config) as (url, state), aiohttp.ClientSession() as session:
        async with session.put(url + UPLOAD_PATH, data=b"hello\n") as resp:
            assert resp.status == 400
            assert "not a disk image: format text" in await resp.text()
        assert await state.finished == 3


async def test_an_empty_upload_fails_before_the_command(tmp_path: Path) -> None:
    """An empty body is no disk image: 400, the termination log says so, the command never
    runs."""
    marker, log = tmp_path / "ran", tmp_path / "termination-log"
    config = ServerConfig(
        out=tmp_path / "disk", command=["touch", str(marker)], termination_log=log
    )
    async with serving(config) as (url, state), aiohttp.ClientSession() as session:
        async with session.post(url + UPLOAD_PATH, data=b"") as resp:
            assert resp.status == 400
        assert await state.finished == 1
    assert "the upload is empty" in log.read_text()
    assert not marker.exists()


def test_the_command_line_needs_a_converting_command() -> None:
    """What follows `--` is the command; without one the server refuses to start."""
    args = parse(["--out", "/x", "--", "sh", "-c", "true"])
    assert list(args.server.command) == ["sh", "-c", "true"]
    assert (args.listen, args.server.out) == (("127.0.0.1", 8080), Path("/x"))
    with pytest.raises(ConfigError, match="converting command"):
        parse(["--out", "/x"])


@pytest.mark.parametrize(("command", "code"), [("true", 0), ("false", 1)])
async def test_the_process_exits_with_the_commands_code(
    tmp_path: Path, command: str, code: int
) -> None:
    """`python -m uploadserver` serves one upload and exits with the command's code (the
    pod ends Succeeded or Failed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "uploadserver", f"--out={tmp_path / 'disk'}",
            f"--port={port}", f"--termination-log={tmp_path / 'log'}", "--", command]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(100):
                try:
                    async with session.put(f"http://127.0.0.1:{port}{UPLOAD_PATH}", data=b"x"):
                        break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
        async with asyncio.timeout(30):
            assert await proc.wait() == code
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
