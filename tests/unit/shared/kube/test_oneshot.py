"""shared.kube.oneshot: one GET with the standard library, with the client's errors."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from shared.kube.connection import Connection
from shared.kube.errors import ConfigError, Forbidden, NotFound, TransportError
from shared.kube.oneshot import get_json


async def test_get_json_sends_credentials_and_maps_errors() -> None:
    """The JSON body under the server's path prefix, with the bearer token and repeated
    headers; a 403 is Forbidden and a 404 NotFound, the API's message kept."""
    seen: list[Any] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers)
        return web.json_response({"gitVersion": "v1"})

    async def refuse(request: web.Request) -> web.Response:
        body = {"kind": "Status", "reason": "Forbidden", "message": "no, alice"}
        return web.json_response(body, status=403)

    app = web.Application()
    app.router.add_get("/prefix/version", answer)
    app.router.add_get("/prefix/secret", refuse)
    async with TestServer(app) as server:
        conn = Connection(host=str(server.make_url("/prefix")), token="t0k")
        headers = (("Impersonate-Group", "g1"), ("Impersonate-Group", "g2"))
        assert await get_json(conn, "/version", timeout=5, headers=headers) == {"gitVersion": "v1"}
        with pytest.raises(Forbidden, match="no, alice"):
            await get_json(conn, "/secret", timeout=5)
        with pytest.raises(NotFound):
            await get_json(conn, "/missing", timeout=5)
    (sent,) = seen
    assert sent["Authorization"] == "Bearer t0k"
    assert sent.getall("Impersonate-Group") == ["g1", "g2"]


async def test_unreachable_server_and_proxy_are_typed_errors() -> None:
    """Nobody listening: TransportError; a proxy-url: ConfigError (not supported here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError):
        await get_json(Connection(host=f"http://127.0.0.1:{port}"), "/version", timeout=5)
    with pytest.raises(ConfigError, match="proxy"):
        proxied = Connection(host="https://127.0.0.1:1", proxy="http://127.0.0.1:2")
        await get_json(proxied, "/version", timeout=5)
