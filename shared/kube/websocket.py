"""WebSockets through the API server (e.g. a VMI's serial console via the aggregated API).

Authentication and TLS come from the same kubeconfig as every other call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from kubernetes_asyncio.stream import WsApiClient

from shared.kube.client import ClientConfig
from shared.kube.errors import TransportError
from shared.kube.transport import load_configuration

PLAIN_PROTOCOL = "plain.kubevirt.io"


@contextlib.asynccontextmanager
async def open_websocket(
    config: ClientConfig, path: str, *, protocol: str = PLAIN_PROTOCOL, timeout: float = 15.0
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """Upgrade ``path`` on the API server to a WebSocket speaking ``protocol``."""
    cfg = await load_configuration(config.kubeconfig, context=config.context)
    api = WsApiClient(configuration=cfg, heartbeat=30)
    try:
        try:
            async with asyncio.timeout(timeout):
                ctx: Any = await api.call_api(
                    path,
                    "GET",
                    # One Impersonate-Group at most here: header_params is a dict.
                    header_params={**dict(config.headers), "sec-websocket-protocol": protocol},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                )
                ws: aiohttp.ClientWebSocketResponse = await ctx.__aenter__()
        except aiohttp.WSServerHandshakeError as e:
            raise TransportError(f"websocket {path}: {e.status} {e.message}") from e
        except aiohttp.ClientError as e:
            raise TransportError(f"websocket {path}: {e!r}") from e
        try:
            yield ws
        finally:
            await ctx.__aexit__(None, None, None)
    finally:
        await api.close()
