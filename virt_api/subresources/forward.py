"""Forwarding an action to the handler of the VMI's node, over mutual TLS.

The handler serves the same action names under
`/v1/namespaces/<ns>/virtualmachineinstances/<name>/<action>` and answers failures as
`{code, message, details}` (the launcher's wire error when the launcher failed). Any
handler failure becomes 502 with that code in the Status causes; a handler or launcher
that does not answer in time becomes 504.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import structlog

from shared.actions import HANDLER_ACTION_PATH, STREAM_PROTOCOLS, ActionSpec
from shared.tasks import cancelling
from virt_api.subresources.errors import (
    BadGateway,
    Cause,
    GatewayTimeout,
    SubresourceError,
)
from virt_api.subresources.locate import Target

log = structlog.get_logger("virt_api.subresources.forward")


def handler_url(target: Target, spec: ActionSpec) -> str:
    """The handler's URL of `spec` on the target VMI."""
    ns, name = quote(target.vmi.namespace, safe=""), quote(target.vmi.name, safe="")
    path = HANDLER_ACTION_PATH.format(namespace=ns, name=name, action=spec.action)
    return f"{target.endpoint}{path}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ForwardOptions:
    server_name: str  # the name the handler's certificate must be valid for
    timeout: float = 30.0
    connect_timeout: float = 5.0
    heartbeat: float = 30.0
    close_timeout: float = 5.0


class HandlerForwarder:
    """Calls handlers with one shared session (connection pool) and the mTLS context."""

    def __init__(
        self, session: aiohttp.ClientSession, *, tls: ssl.SSLContext, options: ForwardOptions
    ) -> None:
        self._session = session
        self._tls = tls
        self._options = options

    async def call(
        self, target: Target, spec: ActionSpec, *, args: Mapping[str, Any] | None = None
    ) -> bytes:
        """The handler's answer body (JSON) to a PUT or GET action (`args` as its body)."""
        url = handler_url(target, spec)
        try:
            async with (
                asyncio.timeout(self._options.timeout),
                self._session.request(
                    spec.method,
                    url,
                    ssl=self._tls,
                    server_hostname=self._options.server_name,
                    json=dict(args) if args else None,
                ) as resp,
            ):
                body = await resp.read()
        except TimeoutError as e:
            if cancelling():
                raise
            raise _timeout(target, spec, self._options.timeout) from e
        except (aiohttp.ClientError, OSError) as e:
            raise _unreachable(target, spec, e) from e
        if resp.status >= 300:
            raise handler_failure(target, spec, status=resp.status, body=body)
        return body

    @contextlib.asynccontextmanager
    async def stream(
        self, target: Target, spec: ActionSpec, *, subpath: str = ""
    ) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
        """A websocket to the handler's relay of a streamed action (console, vnc,
        portforward + `/<port>/<protocol>` as `subpath`) of the target VMI."""
        try:
            async with asyncio.timeout(self._options.connect_timeout):
                ws = await self._session.ws_connect(
                    handler_url(target, spec) + subpath,
                    ssl=self._tls,
                    server_hostname=self._options.server_name,
                    heartbeat=self._options.heartbeat,
                    protocols=STREAM_PROTOCOLS,
                )
        except TimeoutError as e:
            if cancelling():
                raise
            raise _timeout(target, spec, self._options.connect_timeout) from e
        except aiohttp.WSServerHandshakeError as e:
            raise handler_failure(target, spec, status=e.status, body=e.message.encode()) from e
        except (aiohttp.ClientError, OSError) as e:
            raise _unreachable(target, spec, e) from e
        try:
            yield ws
        finally:
            with contextlib.suppress(TimeoutError, aiohttp.ClientError, OSError):
                async with asyncio.timeout(self._options.close_timeout):
                    await ws.close()


def handler_failure(
    target: Target, spec: ActionSpec, *, status: int, body: bytes
) -> SubresourceError:
    """The Status error for a handler's non-2xx answer (504 → Timeout, else 502)."""
    code, message, field = f"http_{status}", body[:500].decode(errors="replace"), ""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("code"):
        code, message = str(decoded["code"]), str(decoded.get("message") or "")
        details = decoded.get("details")
        field = str(details.get("field") or "") if isinstance(details, dict) else ""
    cls = GatewayTimeout if status == 504 else BadGateway
    return cls(
        f"{spec.action} {target.vmi.namespace}/{target.vmi.name}: the handler of node "
        f"{target.node!r} answered {status}: {code}: {message}",
        vmi=target.vmi,
        causes=[Cause(reason=code, message=message, field=field)],
    )


def _timeout(target: Target, spec: ActionSpec, seconds: float) -> GatewayTimeout:
    return GatewayTimeout(
        f"{spec.action} {target.vmi.namespace}/{target.vmi.name}: the handler of node "
        f"{target.node!r} did not answer within {seconds:g}s",
        vmi=target.vmi,
        causes=[Cause(reason="handler_timeout", message=f"no answer within {seconds:g}s")],
    )


def _unreachable(target: Target, spec: ActionSpec, error: BaseException) -> BadGateway:
    log.warning("handler_unreachable", node=target.node, endpoint=target.endpoint, error=str(error))
    return BadGateway(
        f"{spec.action} {target.vmi.namespace}/{target.vmi.name}: cannot reach the handler "
        f"of node {target.node!r} at {target.endpoint}: {error}",
        vmi=target.vmi,
        causes=[Cause(reason="handler_unreachable", message=str(error))],
    )
