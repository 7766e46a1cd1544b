"""A local port forwarded to a pod's port through the API server (`kubectl port-forward`),
over the Kubernetes `v4.channel.k8s.io` websocket protocol of pods/portforward.

    async with forward_pod(config, namespace="ns", pod="virt-export-x", port=8443) as local:
        ... connect to 127.0.0.1:local ...

Used by virtctl-py (export and upload servers) and by virt-api's upload proxy (CDI's
upload server listens on its pod's loopback only).

Each accepted connection opens its own websocket: channel 0 carries the data and channel 1
errors; the first frame on each channel is the port number (2 bytes, little endian).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator

import aiohttp
import structlog

from shared.kube import PODS, ClientConfig, KubeError
from shared.kube.websocket import open_websocket
from shared.wsbridge import bridge

log = structlog.get_logger("shared.podforward")

PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR = 0, 1
PORT_PREFIX = 2
WRITE_TIMEOUT = 30.0
OPEN_TIMEOUT = 30.0


class ChannelSocket:
    """The data channel of one port-forward websocket, as plain bytes both ways."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._seen: set[int] = set()

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage:
        while True:
            msg = await self._ws.receive(timeout)
            if msg.type is not aiohttp.WSMsgType.BINARY or not msg.data:
                return msg
            channel, payload = msg.data[0], msg.data[1:]
            if channel not in self._seen:
                self._seen.add(channel)
                payload = payload[PORT_PREFIX:]
            if not payload:
                continue
            if channel == ERROR:
                text = payload.decode(errors="replace")
                return aiohttp.WSMessage(aiohttp.WSMsgType.ERROR, text, None)
            if channel == DATA:
                return aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, payload, None)

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        await self._ws.send_bytes(bytes([DATA]) + data, compress)


async def _tunnel(
    config: ClientConfig,
    path: str,
    pod: str,
    port: int,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    try:
        async with open_websocket(
            config, f"{path}?ports={port}", protocol=PROTOCOL, timeout=OPEN_TIMEOUT
        ) as ws:
            why = await bridge(ChannelSocket(ws), reader, writer, write_timeout=WRITE_TIMEOUT)
        log.debug("pod_tunnel_closed", pod=pod, port=port, why=why)
    except KubeError as e:
        log.warning("pod_tunnel_failed", pod=pod, port=port, error=str(e))
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def forward_pod(
    config: ClientConfig, *, namespace: str, pod: str, port: int, local_port: int = 0
) -> AsyncIterator[int]:
    """Listen on 127.0.0.1 (`local_port`, 0: any free one) while the block runs."""
    path = PODS.path(namespace=namespace, name=pod, subresource="portforward")
    handler = functools.partial(_tunnel, config, path, pod, port)
    server = await asyncio.start_server(handler, "127.0.0.1", local_port)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await server.wait_closed()
