"""The HTTP door to the API server: the one module (with its config loader) that touches
kubernetes-asyncio.

kubernetes-asyncio contributes what is hard to get right — kubeconfig parsing (client
certificates, exec plugins, token refresh), in-cluster service-account loading and an
authenticated aiohttp session. Everything above it speaks `Transport`: raw bytes in, raw
bytes out, no generated models (decoding 8000 VMIs into OpenAPI models and back to dicts
would cost CPU for nothing; the daemons parse with `shared.model` instead).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from shared.kube.errors import ConfigError, TransportError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

Query = Sequence[tuple[str, str]]


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


@dataclass(frozen=True, slots=True)
class InClusterPaths:
    """Where the service account's token and CA live (overridable for tests)."""

    token: Path = SERVICE_ACCOUNT_DIR / "token"
    ca_cert: Path = SERVICE_ACCOUNT_DIR / "ca.crt"


async def load_configuration(
    kubeconfig: Path | None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    in_cluster: InClusterPaths | None = None,
) -> k8s_client.Configuration:
    """A client Configuration from `kubeconfig`, or in-cluster when it is None.

    In-cluster needs KUBERNETES_SERVICE_HOST/PORT and the service-account token; the token
    is re-read as it rotates (kubernetes-asyncio's refresh hook).
    """
    cfg = k8s_client.Configuration()
    try:
        if kubeconfig is not None:
            await k8s_config.load_kube_config(
                config_file=str(kubeconfig), context=context, client_configuration=cfg
            )
        else:
            paths = in_cluster or InClusterPaths()
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg,
                token_filename=str(paths.token),
                cert_filename=str(paths.ca_cert),
                environ=dict(os.environ if environ is None else environ),
            )
    except (k8s_config.ConfigException, OSError) as e:
        where = str(kubeconfig) if kubeconfig is not None else "in-cluster service account"
        raise ConfigError(f"cannot load Kubernetes client config from {where}: {e}") from e
    return cfg


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


class ApiTransport:
    """`Transport` over a kubernetes-asyncio ApiClient (auth, TLS, connection pool)."""

    def __init__(self, api: k8s_client.ApiClient) -> None:
        self._api = api

    @classmethod
    def from_configuration(
        cls, cfg: k8s_client.Configuration, *, user_agent: str, max_connections: int
    ) -> ApiTransport:
        """A transport with its own connection pool of `max_connections`."""
        cfg.connection_pool_maxsize = max_connections
        api = k8s_client.ApiClient(configuration=cfg)
        api.user_agent = user_agent
        return cls(api)

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    async def request(
        self, method: str, path: str, *, query: Query, body: Any, content_type: str, timeout: float
    ) -> RawResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        resp = await self._call(
            method,
            path=path,
            query=query,
            headers=headers,
            body=body,
            timeout=aiohttp.ClientTimeout(total=timeout),
        )
        try:
            data = await resp.read()
        except aiohttp.ClientError as e:
            raise TransportError(f"{method} {path}: {e!r}") from e
        finally:
            resp.release()
        return RawResponse(status=resp.status, body=data)

    async def open_stream(
        self, path: str, *, query: Query, connect_timeout: float, read_timeout: float
    ) -> Stream:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=connect_timeout,
            sock_connect=connect_timeout,
            sock_read=read_timeout,
        )
        resp = await self._call(
            "GET", path=path, query=query, headers=headers, body=None, timeout=timeout
        )
        return _AioStream(resp)

    async def _call(
        self,
        method: str,
        *,
        path: str,
        query: Query,
        headers: dict[str, str],
        body: Any,
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        try:
            resp: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except aiohttp.ClientError as e:
            raise TransportError(f"{method} {path}: {e!r}") from e
        except TimeoutError as e:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise TransportError(f"{method} {path}: timed out") from e
        return resp

    async def close(self) -> None:
        await self._api.close()
