"""`vnc` and `port-forward`: a local TCP listener bridged to a VMI's websocket subresource.

As KubeVirt's virtctl: `vnc --proxy-only` listens on 127.0.0.1 (`--address`, `--port`;
port 0 is any free one), prints `{"port": N}` and serves one VNC client; without
--proxy-only it starts a VNC viewer found on PATH. `port-forward` opens one websocket per
accepted connection (`.../portforward/<port>/<protocol>`), or bridges stdin/stdout once
with --stdio (ssh's ProxyCommand).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import structlog

from shared.kube import VMI_ACTIONS, KubeError
from shared.kube.websocket import open_websocket
from shared.wsbridge import bridge
from virtctl_py.errors import CliError, Exit
from virtctl_py.lifecycle import VM_SUBRESOURCES
from virtctl_py.session import Target
from virtctl_py.stdio import open_stdin, open_stdout, std_fd

log = structlog.get_logger("virtctl_py.streams")

WRITE_TIMEOUT = 30.0
VIEWERS = ("remote-viewer", "vncviewer")


@dataclass(frozen=True, slots=True, kw_only=True)
class Listen:
    address: str = "127.0.0.1"
    port: int = 0


@contextlib.asynccontextmanager
async def open_stream(
    target: Target, subresource: str, *, resource: str = "vmi", name: str, timeout: float
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """The websocket of `subresource` of a VMI (or VM); API refusals become CliErrors."""
    kind = VM_SUBRESOURCES if resource == "vm" else VMI_ACTIONS
    path = kind.path(namespace=target.namespace, name=name, subresource=subresource)
    try:
        async with open_websocket(target.client_config(), path, timeout=timeout) as ws:
            yield ws
    except KubeError as e:
        raise _refused(f"{resource} {target.namespace}/{name}", subresource, e) from e


def _refused(obj: str, subresource: str, error: KubeError) -> CliError:
    text = str(error)
    if " 404 " in text:
        return CliError(f"{obj} not found or not running ({text})", code=Exit.NOT_FOUND)
    if " 403 " in text:
        return CliError(f"not allowed to open {subresource} of {obj}: {text}", code=Exit.FORBIDDEN)
    if " 400 " in text:
        return CliError(f"{subresource} of {obj} refused: {text}", code=Exit.USAGE)
    return CliError(f"cannot open {subresource} of {obj}: {text}")


async def _serve_once(
    ws: aiohttp.ClientWebSocketResponse, server_ready: asyncio.Future[int], listen: Listen
) -> str:
    """Listen, report the port, serve the first client through `ws`, then stop."""
    client: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue(1)

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if client.full():
            writer.close()
            return
        client.put_nowait((reader, writer))

    server = await asyncio.start_server(accept, listen.address, listen.port)
    async with server:
        server_ready.set_result(server.sockets[0].getsockname()[1])
        reader, writer = await client.get()
        server.close()
        try:
            return await bridge(
                ws, reader, writer, write_timeout=WRITE_TIMEOUT, names=("vnc", "client")
            )
        finally:
            writer.close()


async def vnc(target: Target, name: str, *, listen: Listen, proxy_only: bool) -> str:
    """Connect to the VMI's VNC first (so refusals come before any listening), then serve."""
    viewer = None if proxy_only else next(filter(None, map(shutil.which, VIEWERS)), None)
    if not proxy_only and viewer is None:
        raise CliError(
            f"no VNC viewer found ({', '.join(VIEWERS)}): install one, or use --proxy-only "
            "and point any VNC client at the port it prints",
            code=Exit.USAGE,
        )
    async with open_stream(target, "vnc", name=name, timeout=30.0) as ws:
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        async with asyncio.TaskGroup() as tg:
            served = tg.create_task(_serve_once(ws, ready, listen))
            port = await ready
            if proxy_only:
                print(json.dumps({"port": port}), flush=True)
            else:
                assert viewer is not None
                tg.create_task(_run_viewer(viewer, listen.address, port))
            why = await served
    log.debug("vnc_closed", why=why)
    return ""


async def _run_viewer(viewer: str, address: str, port: int) -> None:
    arg = f"vnc://{address}:{port}" if viewer.endswith("remote-viewer") else f"{address}::{port}"
    proc = await asyncio.create_subprocess_exec(viewer, arg)
    await proc.wait()


def bad_port(text: str, what: str) -> CliError:
    return CliError(f"{what} {text!r}: must be a port number 1-65535", code=Exit.USAGE)


def port_number(text: str, what: str = "port") -> int:
    """A TCP port 1-65535, or a CliError naming the bad value."""
    try:
        port = int(text)
    except ValueError:
        raise bad_port(text, what) from None
    if not 1 <= port <= 65535:
        raise bad_port(text, what)
    return port


@dataclass(frozen=True, slots=True, kw_only=True)
class PortMapping:
    local: int
    remote: int
    protocol: str = "tcp"


@dataclass(frozen=True, slots=True, kw_only=True)
class ForwardTarget:
    """`vmi/NAME[.NS]` or `vm/NAME[.NS]` as KubeVirt's virtctl writes it."""

    resource: str  # "vmi" or "vm"
    name: str
    namespace: str | None = None

    @classmethod
    def parse(cls, text: str) -> ForwardTarget:
        kind, sep, rest = text.partition("/")
        if not sep or kind not in ("vmi", "vm") or not rest:
            raise CliError(f"{text!r}: expected vmi/NAME[.NAMESPACE] or vm/NAME", code=Exit.USAGE)
        name, _, namespace = rest.partition(".")
        return cls(resource=kind, name=name, namespace=namespace or None)


def port_mapping(text: str) -> PortMapping:
    """`[tcp/]LOCAL:REMOTE` or `[tcp/]PORT` (the same port locally)."""
    protocol, sep, ports = text.rpartition("/")
    protocol = protocol if sep else "tcp"
    if protocol != "tcp":
        raise CliError(f"{text!r}: only tcp ports are forwarded by kubevirt-py", code=Exit.USAGE)
    local, _, remote = ports.partition(":")
    remote_port = port_number(remote or local, "remote port")
    local_port = 0 if local == "0" else port_number(local, "local port")
    return PortMapping(local=local_port, remote=remote_port)


async def port_forward(
    target: Target, where: ForwardTarget, mappings: list[PortMapping], *, address: str
) -> str:
    """Listen on each local port; every accepted connection gets its own tunnel."""
    async with asyncio.TaskGroup() as tg:
        for m in mappings:
            tunnel = functools.partial(_tunnel, target, where, m.remote)
            server = await asyncio.start_server(tunnel, address, m.local)
            bound = server.sockets[0].getsockname()[1]
            print(f"Forwarding from {address}:{bound} -> {m.remote}", file=sys.stderr, flush=True)
            tg.create_task(server.serve_forever())
    return ""


async def _tunnel(
    target: Target,
    where: ForwardTarget,
    port: int,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """One accepted connection through its own websocket; failures end that one only."""
    try:
        async with open_stream(
            target, f"portforward/{port}/tcp", resource=where.resource, name=where.name,
            timeout=30.0,
        ) as ws:  # fmt: skip
            why = await bridge(ws, reader, writer, write_timeout=WRITE_TIMEOUT)
        log.debug("tunnel_closed", port=port, why=why)
    except CliError as e:
        print(f"error: port {port}: {e}", file=sys.stderr, flush=True)
    finally:
        writer.close()


async def stdio_forward(target: Target, where: ForwardTarget, port: int) -> str:
    """One tunnel on stdin/stdout (ssh's ProxyCommand), whatever they are (stdio.py)."""
    writer = await open_stdout(std_fd(sys.stdout))
    async with (
        open_stdin(std_fd(sys.stdin)) as reader,
        open_stream(
            target, f"portforward/{port}/tcp", resource=where.resource, name=where.name,
            timeout=30.0,
        ) as ws,
    ):  # fmt: skip
        counted = _Counting(ws)
        why = await bridge(
            counted, reader, writer, write_timeout=WRITE_TIMEOUT, names=("guest", "stdin")
        )
    # no log line here: the CLI's structlog writes to stdout, which is the tunnel's
    if counted.received == 0 and why.startswith("guest"):
        raise CliError(
            f"guest port {port} of {where.resource}/{where.name} closed the connection without "
            "a byte: is anything listening on it?"
        )
    return ""


class _Counting:
    """A websocket that counts the bytes it received (how a refused guest port shows)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self.received = 0

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage:
        msg = await self._ws.receive(timeout)
        if msg.type is aiohttp.WSMsgType.BINARY:
            self.received += len(msg.data)
        return msg

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        await self._ws.send_bytes(data, compress)
