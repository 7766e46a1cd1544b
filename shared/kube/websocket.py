"""WebSockets through the API server (e.g. a VMI's serial console via the aggregated API).

Authentication and TLS come from the same kubeconfig as every other call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
from multidict import CIMultiDict

from shared.kube.client import ClientConfig
from shared.kube.connection import load_connection
from shared.kube.errors import TransportError
from shared.kube.transport import transport_errors

PLAIN_PROTOCOL = "plain.kubevirt.io"


@contextlib.asynccontextmanager
async def open_websocket(
    config: ClientConfig, path: str, *, protocol: str = PLAIN_PROTOCOL, timeout: float = 15.0
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """Upgrade ``path`` on the API server to a WebSocket speaking ``protocol``."""
    conn = await load_connection(config.kubeconfig, context=config.context)
    headers: CIMultiDict[str] = CIMultiDict(config.headers)  # Impersonate-Group may repeat
    token = await conn.bearer()
    if token:
        headers["Authorization"] = token
    tls = conn.ssl_context() if conn.host.startswith("https:") else False
    async with aiohttp.ClientSession() as session:
        with transport_errors("websocket", path):
            try:
                async with asyncio.timeout(timeout):
                    ws = await session.ws_connect(
                        conn.host + path,
                        protocols=(protocol,),
                        headers=headers,
                        ssl=tls,
                        server_hostname=conn.tls_server_name,
                        proxy=conn.proxy,
                        heartbeat=30,
                    )
            except aiohttp.WSServerHandshakeError as e:
                raise TransportError(f"websocket {path}: {e.status} {e.message}") from e
        try:
            yield ws
        finally:
            await ws.close()
