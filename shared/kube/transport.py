"""The HTTP door to the API server.

shared.kube.connection reads where the server is and how to authenticate (a kubeconfig or
the in-cluster service account; kubernetes-asyncio's loader only for exec plugins and auth
providers). Requests go over one plain aiohttp session built from it (kubernetes-asyncio's
ApiClient costs twice the CPU per request). Everything above speaks `Transport`: raw bytes
in, raw bytes out, no generated models (the daemons parse with `shared.model` instead).
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from shared.kube.connection import Connection
from shared.kube.errors import TransportError
from shared.tasks import cancelling

Query = Sequence[tuple[str, str]]
# How often a rotating bearer token (refresh hook) is re-read.
AUTH_REFRESH_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A complete HTTP answer."""

    status: int
    body: bytes


class Stream(Protocol):
    """An open streaming response (a watch): status known, body read line by line."""

    @property
    def status(self) -> int: ...

    async def read_all(self) -> bytes: ...

    def lines(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...


class Transport(Protocol):
    """Sends one request to the API server (the facade's only dependency below it)."""

    @property
    def host(self) -> str: ...

    async def request(
        self, method: str, path: str, *, query: Query, body: Any, content_type: str, timeout: float
    ) -> RawResponse: ...

    async def open_stream(
        self, path: str, *, query: Query, connect_timeout: float, read_timeout: float
    ) -> Stream: ...

    async def close(self) -> None: ...


class _AioStream:
    """`Stream` over an aiohttp response."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp

    @property
    def status(self) -> int:
        return self._resp.status

    async def read_all(self) -> bytes:
        try:
            return await self._resp.read()
        finally:
            self._resp.release()

    async def lines(self) -> AsyncIterator[bytes]:
        try:
            async for line in self._resp.content:
                yield line
        except aiohttp.ClientError as e:
            raise TransportError(f"watch stream broke: {e!r}") from e

    def close(self) -> None:
        self._resp.close()


class AioTransport:
    """`Transport` over one plain aiohttp session (TLS, bearer auth, connection pool).

    kubernetes-asyncio only loads the Configuration; requests go straight to aiohttp, which
    costs half the CPU of its ApiClient.call_api (no parameter sanitizing, no per-request
    auth settings or proxy lookups).
    """

    def __init__(
        self,
        conn: Connection,
        *,
        user_agent: str,
        max_connections: int,
        auth_refresh_every: float = AUTH_REFRESH_SECONDS,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._host = conn.host.rstrip("/")
        self._extra_headers = tuple(headers)  # may repeat a name (Impersonate-Group)
        self._auth = _Auth(conn, refresh_every=auth_refresh_every)
        self._headers = {"Accept": "application/json", "User-Agent": user_agent}
        self._server_hostname: str | None = conn.tls_server_name
        self._proxy: str | None = conn.proxy or _env_proxy(self._host)
        ssl_ctx = conn.ssl_context() if self._host.startswith("https:") else None
        connector = aiohttp.TCPConnector(limit=max_connections, ssl=ssl_ctx or False)
        # Watch events of large objects exceed aiohttp's default read buffer (etcd's
        # request limit is 1.5 MiB).
        # No cookies (the API server sets none; the jar's per-request filtering is CPU).
        self._session = aiohttp.ClientSession(
            connector=connector,
            read_bufsize=2**21,
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    @classmethod
    def from_connection(
        cls,
        conn: Connection,
        *,
        user_agent: str,
        max_connections: int,
        headers: Sequence[tuple[str, str]] = (),
    ) -> AioTransport:
        """A transport with its own connection pool of `max_connections`."""
        return cls(conn, user_agent=user_agent, max_connections=max_connections, headers=headers)

    @property
    def host(self) -> str:
        return self._host

    async def request(
        self, method: str, path: str, *, query: Query, body: Any, content_type: str, timeout: float
    ) -> RawResponse:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        timeouts = self._timeouts.get(timeout)
        if timeouts is None:
            timeouts = self._timeouts[timeout] = aiohttp.ClientTimeout(total=timeout)
        resp = await self._call(method, path, query, data, content_type, timeouts)
        try:
            with transport_errors(method, path):
                payload = await resp.read()
        finally:
            resp.release()
        return RawResponse(status=resp.status, body=payload)

    async def open_stream(
        self, path: str, *, query: Query, connect_timeout: float, read_timeout: float
    ) -> Stream:
        timeouts = aiohttp.ClientTimeout(
            total=None,
            connect=connect_timeout,
            sock_connect=connect_timeout,
            sock_read=read_timeout,
        )
        resp = await self._call("GET", path, query, None, "application/json", timeouts)
        return _AioStream(resp)

    async def _call(
        self,
        method: str,
        path: str,
        query: Query,
        data: bytes | None,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        headers: Any = {**self._headers, "Content-Type": content_type}
        if self._extra_headers:
            headers = CIMultiDict(headers)
            headers.extend(self._extra_headers)
        # Built encoded once here, so aiohttp does not parse and re-quote it.
        # Paths arrive with their segments already escaped (Resource.path): keep "%" as is.
        text = self._host + quote(path, safe="/:@%")
        url = URL(f"{text}?{urlencode(query)}" if query else text, encoded=True)
        with transport_errors(method, path):
            token = await self._auth.header()
            if token:
                headers["Authorization"] = token
            return await self._session.request(
                method,
                url,
                data=data,
                headers=headers,
                timeout=timeout,
                proxy=self._proxy,
                server_hostname=self._server_hostname,
            )

    async def close(self) -> None:
        await self._session.close()


@contextlib.contextmanager
def transport_errors(method: str, path: str) -> Iterator[None]:
    """aiohttp's errors and timeouts as TransportError (a cancellation stays one)."""
    try:
        yield
    except aiohttp.ClientError as e:
        raise TransportError(f"{method} {path}: {e!r}") from e
    except TimeoutError as e:
        if cancelling():
            raise
        raise TransportError(f"{method} {path}: timed out") from e


class _Auth:
    """The Authorization header. Static for a plain kubeconfig token; from a token source
    (a rotating token file, exec plugins, OIDC) re-read every `refresh_every` seconds."""

    def __init__(self, conn: Connection, *, refresh_every: float) -> None:
        self._conn = conn
        self._refresh_every = refresh_every
        self._dynamic = conn.token_source is not None
        self._value: str | None = None
        self._next: float | None = None

    async def header(self) -> str | None:
        now = time.monotonic()
        if self._next is None or (self._dynamic and now >= self._next):
            self._value = await self._conn.bearer()
            self._next = now + self._refresh_every
        return self._value


def _env_proxy(host: str) -> str | None:
    """HTTPS_PROXY / HTTP_PROXY for `host` unless NO_PROXY exempts it (resolved once)."""
    parsed = urlsplit(host)
    if parsed.hostname is None or urllib.request.proxy_bypass(parsed.hostname):
        return None
    return urllib.request.getproxies().get(parsed.scheme or "https")
