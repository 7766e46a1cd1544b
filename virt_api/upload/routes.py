"""The upload routes on the subresource API's server (one HTTPS port for both)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from shared.kube import ClientConfig
from shared.kube.ports import Gets
from shared.podforward import forward_pod
from virt_api.subresources.authz import Authorizer
from virt_api.subresources.tls import CertDir
from virt_api.upload.api import (
    GROUP,
    GROUP_VERSION,
    TOKEN_REQUEST_PATH,
    TokenApi,
    UserOf,
    api_group,
    api_resource_list,
)
from virt_api.upload.proxy import PROXY_PATHS, UploadProxy
from virt_api.upload.token import TokenSigner

__all__ = ["PROXY_PATHS", "Uploads", "add_routes", "api_group", "uploads_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Uploads:
    """The UploadTokenRequest API and the upload proxy, sharing one signer."""

    api: TokenApi
    proxy: UploadProxy


def uploads_for(
    serving: CertDir, *, authorizer: Authorizer, pods: Gets, client_config: ClientConfig
) -> Uploads:
    """Tokens keyed from the serving key; uploads forwarded with `client_config`'s rights."""
    signer = TokenSigner.from_key_file(serving.key)

    @contextlib.asynccontextmanager
    async def forward(*, namespace: str, pod: str, port: int) -> AsyncIterator[int]:
        async with forward_pod(client_config, namespace=namespace, pod=pod, port=port) as local:
            yield local

    return Uploads(
        api=TokenApi(signer=signer, authorizer=authorizer),
        proxy=UploadProxy(signer=signer, pods=pods, forward=forward),
    )


def add_routes(app: web.Application, uploads: Uploads, user_of: UserOf) -> None:
    """Discovery, UploadTokenRequests (front proxy users) and the proxy (token holders)."""

    async def create(request: web.Request) -> web.StreamResponse:
        return await uploads.api.create(request, user_of(request))

    app.router.add_get(f"/apis/{GROUP}", functools.partial(_json, api_group()))
    app.router.add_get(f"/apis/{GROUP_VERSION}", functools.partial(_json, api_resource_list()))
    app.router.add_route("*", TOKEN_REQUEST_PATH, create)
    for path in PROXY_PATHS:
        app.router.add_route("POST", path, uploads.proxy.upload)
        app.router.add_route("PUT", path, uploads.proxy.upload)


async def _json(body: dict[str, Any], _: web.Request) -> web.StreamResponse:
    return web.json_response(body)
