"""The upload proxy (CDI's cdi-uploadproxy), served by virt-api on its HTTPS port:

    POST|PUT /v1beta1/upload      Authorization: Bearer <token from an UploadTokenRequest>
                                  the image as the body → the claim's upload server

The token is the only credential (no client certificate, no front proxy: `virtctl
image-upload` calls this directly); it names the namespace and claim. The body is streamed
to port 8080 of the claim's `cdi-upload-<claim>` pod, which listens on its loopback only,
through the API server's pods/portforward (virt-api's own rights), and the upload server's
answer (200 once converted, 400 with the reason) is passed back. The async and form
variants are not served: a HEAD on /v1beta1/upload-async is 404, so virtctl uses the
synchronous path.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
import structlog
from aiohttp import web

from shared.kube import PODS, KubeError
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import Gets
from shared.upload import UPLOAD_PATH, UPLOAD_PORT, upload_pod_name
from virt_api.subresources.errors import (
    BadGateway,
    HandlerUnavailable,
    Unauthenticated,
)
from virt_api.upload.token import TokenError, TokenSigner

log = structlog.get_logger("virt_api.upload.proxy")

PROXY_PATHS = frozenset({UPLOAD_PATH})
CHUNK = 1 << 20
IO_TIMEOUT = 10.0
ANSWER_TIMEOUT = 3600.0  # the upload server converts before it answers


class PodForward(Protocol):
    """A local port forwarded to a pod's port (shared.podforward.forward_pod)."""

    def __call__(
        self, *, namespace: str, pod: str, port: int
    ) -> contextlib.AbstractAsyncContextManager[int]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadProxy:
    """Checks the token, then relays the body to the claim's upload server."""

    signer: TokenSigner
    pods: Gets
    forward: PodForward
    clock: Callable[[], float] = field(default=time.time)

    async def upload(self, request: web.Request) -> web.StreamResponse:
        """POST|PUT /v1beta1/upload."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("an upload needs 'Authorization: Bearer <upload token>'")
        try:
            grant = self.signer.verify(token, now=self.clock())
        except TokenError as e:
            log.info("upload_token_refused", error=str(e))
            raise Unauthenticated(str(e)) from None
        pod = upload_pod_name(grant.claim)
        with structlog.contextvars.bound_contextvars(namespace=grant.namespace, claim=grant.claim):
            await self._require_running(grant.namespace, pod)
            async with self.forward(namespace=grant.namespace, pod=pod, port=UPLOAD_PORT) as port:
                status, text = await _relay(request, f"http://127.0.0.1:{port}{UPLOAD_PATH}")
            log.info("upload_relayed", status=status)
            return web.Response(status=status, text=text)

    async def _require_running(self, namespace: str, pod: str) -> None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                raw = await self.pods.get(PODS, pod, namespace=namespace)
        except KubeNotFound:
            raw = {}
        except (KubeError, TimeoutError) as e:
            raise BadGateway(f"cannot read the upload server pod {namespace}/{pod}: {e}") from e
        if (raw.get("status") or {}).get("phase") != "Running":
            raise HandlerUnavailable(
                f"the upload server {namespace}/{pod} is not running: wait for the "
                "DataVolume to be UploadReady (an upload is taken once)"
            )


async def _relay(request: web.Request, url: str) -> tuple[int, str]:
    """(status, text) of the upload server, the request's body streamed to it."""
    headers = {"Content-Type": "application/octet-stream"}
    if request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)
    timeout = aiohttp.ClientTimeout(sock_connect=IO_TIMEOUT, sock_read=ANSWER_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, data=_chunks(request), headers=headers) as resp,
        ):
            return resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError) as e:
        raise BadGateway(f"the upload server did not take the upload: {e!r}") from e


async def _chunks(request: web.Request) -> AsyncIterator[bytes]:
    async for data in request.content.iter_chunked(CHUNK):
        yield data
