"""virt-exportserver-py: serve the mounted claims over HTTPS until SIGTERM.

    virt-exportserver-py --volumes-dir /export-volumes --token-file /token/token \
        --cert-dir /cert --port 8443

The token file and the certificate directory (tls.crt, tls.key) are the Secrets the export
controller mounts (controller/export/bodies.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web

from exportserver.server import ServerConfig, build_app
from shared.daemon import Shutdown, parse_or_exit, raise_on, run_daemon, stop_on_signals
from shared.kube.health import serving_tls
from shared.logs import configure
from shared.model.export import SERVER_PORT

log = structlog.get_logger("exportserver")

IO_TIMEOUT = 10.0


class ConfigError(ValueError):
    """The command line or the mounted files cannot be used."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Args:
    server: ServerConfig
    cert_dir: Path
    host: str
    port: int
    log_format: str


def parse(argv: list[str]) -> Args:
    """The command line, with the token read from its file."""
    p = argparse.ArgumentParser(prog="virt-exportserver-py")
    p.add_argument("--volumes-dir", type=Path, default=Path("/export-volumes"))
    p.add_argument("--token-file", type=Path, default=Path("/token/token"))
    p.add_argument("--cert-dir", type=Path, default=Path("/cert"))
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=SERVER_PORT)
    p.add_argument("--log-format", default="json")
    ns = p.parse_args(argv)
    try:
        token = ns.token_file.read_text().strip()
    except OSError as e:
        raise ConfigError(f"--token-file {ns.token_file}: {e.strerror}") from e
    if not token:
        raise ConfigError(f"--token-file {ns.token_file}: empty")
    return Args(
        server=ServerConfig(volumes_dir=ns.volumes_dir, token=token),
        cert_dir=ns.cert_dir,
        host=ns.host,
        port=ns.port,
        log_format=ns.log_format,
    )


async def run(args: Args) -> None:
    """Serve HTTPS until SIGTERM/SIGINT."""
    tls = serving_tls(args.cert_dir)
    if tls is None:
        raise ConfigError(f"--cert-dir {args.cert_dir}: no tls.crt and tls.key")
    runner = web.AppRunner(build_app(args.server), access_log=None)
    async with asyncio.timeout(IO_TIMEOUT):
        await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port, ssl_context=tls)
        async with asyncio.timeout(IO_TIMEOUT):
            await site.start()
        log.info("exportserver_serving", port=args.port, volumes=str(args.server.volumes_dir))
        async with stop_on_signals() as stop:
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(raise_on(stop))
            except* Shutdown:
                log.info("exportserver_stopping")
    finally:
        async with asyncio.timeout(IO_TIMEOUT):
            await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    """The console script."""
    args = parse_or_exit(
        "virt-exportserver-py", lambda: parse(sys.argv[1:] if argv is None else argv), ConfigError
    )
    configure(args.log_format, component="virt-exportserver")
    run_daemon("virt-exportserver-py", run(args), exit_codes={ConfigError: 2})
