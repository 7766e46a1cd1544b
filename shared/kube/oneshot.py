"""One GET against the API server with the standard library alone, for a CLI verb that makes
a single request (`virtctl-py version`): no aiohttp, no client metrics, no rate limiter.
Importing aiohttp (its default TLS contexts built at import included) is ≈ 0.3 s of such a
command on this host, against ≈ 0.05 s for http.client and ssl.

    body = await get_json(conn, "/apis/subresources.kubevirt.io/v1/version", timeout=30)

The connection is the one shared.kube.connection reads from a kubeconfig (CA, client
certificate, token, tls-server-name, impersonation headers); a proxy-url is not supported
here (ConfigError: use the full client). Errors are shared.kube's: ApiError subclasses by
status, TransportError when the server cannot be reached.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from shared.kube.connection import Connection
from shared.kube.errors import ConfigError, TransportError, error_from_status


async def get_json(
    conn: Connection,
    path: str,
    *,
    timeout: float,
    headers: Sequence[tuple[str, str]] = (),
    user_agent: str = "kubevirt-py",
) -> Any:
    """GET `path` (absolute, e.g. /version) and decode its JSON body. The request runs in a
    thread (the loop stays free); the socket's timeout bounds the connect and each read,
    the await the whole."""
    if conn.proxy:
        raise ConfigError("a proxy-url is not supported by the one-request client")
    url = urlsplit(conn.host)
    sent = [("Accept", "application/json"), ("User-Agent", user_agent), *headers]
    bearer = await conn.bearer()
    if bearer:
        sent.append(("Authorization", bearer))
    target = url.path.rstrip("/") + path  # a server URL may carry a path prefix
    async with asyncio.timeout(timeout * 2):
        status, raw = await asyncio.to_thread(
            _request, conn, url.hostname or "", url.port, target, sent, timeout=timeout
        )
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if status >= 400:
        raise error_from_status(status, body if isinstance(body, Mapping) else None)
    return body


def _request(
    conn: Connection,
    host: str,
    port: int | None,
    path: str,
    headers: Sequence[tuple[str, str]],
    *,
    timeout: float,
) -> tuple[int, bytes]:
    scheme = urlsplit(conn.host).scheme
    if scheme == "https":
        ctx = conn.ssl_context()
        name = conn.tls_server_name or host
        client: http.client.HTTPConnection = _TLSConnection(
            host, port, timeout=timeout, context=ctx, server_hostname=name
        )
    else:
        client = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        client.putrequest("GET", path, skip_accept_encoding=True)
        for key, value in headers:  # a header may repeat (Impersonate-Group)
            client.putheader(key, value)
        client.endheaders()
        response = client.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as e:
        raise TransportError(f"GET {path}: {e!r}") from e
    finally:
        client.close()


class _TLSConnection(http.client.HTTPSConnection):
    """HTTPS with a server name other than the host (the kubeconfig's tls-server-name)."""

    def __init__(
        self,
        host: str,
        port: int | None,
        *,
        timeout: float,
        context: ssl.SSLContext,
        server_hostname: str,
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._context = context
        self._server_hostname = server_hostname

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname)
