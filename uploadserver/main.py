"""virt-uploadserver-py: take one upload, convert it with the given command, exit with its code.

    virt-uploadserver-py --out /scratch/disk --port 8080 -- COMMAND ARGS...

Listens on 127.0.0.1 only (clients come through the API server's pods/portforward). Exits
0 once an upload was converted, non-zero when it was refused (the pod ends Succeeded or
Failed); SIGTERM before any upload exits 0 (the DataVolume deleted its pod).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web

from shared.daemon import Shutdown, parse_or_exit, raise_on, run_daemon, stop_on_signals
from shared.logs import configure
from shared.upload import UPLOAD_FILE, UPLOAD_PORT
from uploadserver.server import ServerConfig, UploadState, build_app

log = structlog.get_logger("uploadserver")

IO_TIMEOUT = 10.0
ANSWER_GRACE = 30.0  # for the last answer to reach the client before the server stops


class ConfigError(ValueError):
    """The command line cannot be used."""


class Finished(Exception):
    """The upload was handled: exit with `code`."""

    def __init__(self, code: int) -> None:
        super().__init__(f"the upload ended with exit code {code}")
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class Args:
    server: ServerConfig
    listen: tuple[str, int]  # (host, port)
    log_format: str


def parse(argv: list[str]) -> Args:
    """The command line; what follows `--` is the converting command."""
    p = argparse.ArgumentParser(prog="virt-uploadserver-py")
    p.add_argument("--out", type=Path, default=Path(UPLOAD_FILE))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=UPLOAD_PORT)
    p.add_argument("--termination-log", type=Path, default=Path("/dev/termination-log"))
    p.add_argument("--log-format", default="json")
    p.add_argument("command", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if not command:
        raise ConfigError("the converting command is required after --")
    server = ServerConfig(out=ns.out, command=command, termination_log=ns.termination_log)
    return Args(server=server, listen=(ns.host, ns.port), log_format=ns.log_format)


async def run(args: Args) -> None:
    """Serve until the upload is handled (Finished) or SIGTERM/SIGINT."""
    state = UploadState()
    # cleanup() lets the request in flight finish: the upload's answer reaches the client.
    runner = web.AppRunner(
        build_app(args.server, state), access_log=None, shutdown_timeout=ANSWER_GRACE
    )
    try:
        await _start(runner, args.listen)
        log.info("uploadserver_serving", listen=args.listen, out=str(args.server.out))
        await _until_finished_or_stopped(state)
    finally:
        async with asyncio.timeout(ANSWER_GRACE + IO_TIMEOUT):
            await runner.cleanup()


async def _start(runner: web.AppRunner, listen: tuple[str, int]) -> None:
    async with asyncio.timeout(IO_TIMEOUT):
        await runner.setup()
        await web.TCPSite(runner, *listen).start()


async def _until_finished_or_stopped(state: UploadState) -> None:
    """Returns on SIGTERM/SIGINT; raises Finished once the upload was answered."""

    async def finish() -> None:
        raise Finished(await state.finished)

    async with stop_on_signals() as stop:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(raise_on(stop))
                tg.create_task(finish())
        except* Shutdown:
            log.info("uploadserver_stopping")


def main(argv: list[str] | None = None) -> None:
    """The console script."""
    args = parse_or_exit(
        "virt-uploadserver-py", lambda: parse(sys.argv[1:] if argv is None else argv), ConfigError
    )
    configure(args.log_format, component="virt-uploadserver")
    code = 0
    try:
        run_daemon("virt-uploadserver-py", run(args), exit_codes={ConfigError: 2})
    except* Finished as group:
        leaf = group.exceptions[0]
        code = leaf.code if isinstance(leaf, Finished) else 1
    sys.exit(code)  # not inside except*, which would wrap SystemExit in a group
