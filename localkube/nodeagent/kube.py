"""A small JSON-in, JSON-out client over kubernetes-asyncio's ApiClient.

The node agent handles pods as the API serves them (camelCase dicts), like a kubelet
reading the wire format; going through the generated models would cost a conversion
each way for every field it touches. Every request runs under a timeout.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio import client, config

from localkube.errors import LocalKubeError

JSON = dict[str, Any]
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
REQUEST_TIMEOUT = 30.0


class KubeError(LocalKubeError):
    """A non-2xx answer from the apiserver."""

    def __init__(self, status: int, body: JSON) -> None:
        super().__init__(f"HTTP {status}: {body.get('reason', '')}: {body.get('message', body)}")
        self.status = status
        self.reason = str(body.get("reason", ""))


class Kube:
    """Raw REST calls with the credentials of a kubeconfig."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    @property
    def server(self) -> tuple[str, int]:
        """Host and port of the apiserver (what pods get as KUBERNETES_SERVICE_HOST/PORT)."""
        parts = urlsplit(str(self._api.configuration.host))
        return parts.hostname or "127.0.0.1", parts.port or 443

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: JSON | None = None,
        content_type: str = "application/json",
        timeout: float = REQUEST_TIMEOUT,
    ) -> JSON:
        async with asyncio.timeout(timeout + 5):
            resp = await self._call(method, path, query, body, content_type, timeout)
            try:
                raw = await resp.read()
            finally:
                resp.release()
        data: JSON = json.loads(raw) if raw else {}
        if not 200 <= resp.status < 300:
            raise KubeError(resp.status, data)
        return data

    async def get(self, path: str, **query: str) -> JSON:
        return await self.request("GET", path, query=query)

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        query: Mapping[str, str],
        timeout_seconds: int = 300,
    ) -> AsyncIterator[JSON]:
        """Events of one watch request until the server ends it; ERROR events raise."""
        params = {
            **query,
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        read_timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30)
        async with asyncio.timeout(timeout_seconds + 60):
            resp = await self._call("GET", path, params, None, "application/json", read_timeout)
            try:
                if resp.status != 200:
                    raise KubeError(resp.status, json.loads(await resp.read() or b"{}"))
                async for line in resp.content:
                    event: JSON = json.loads(line)
                    if event.get("type") == "ERROR":
                        obj = event.get("object", {})
                        raise KubeError(int(obj.get("code", 500)), obj)
                    yield event
            finally:
                resp.release()

    async def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: JSON | None,
        content_type: str,
        timeout: float | aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        resp: aiohttp.ClientResponse = await self._api.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return resp


def certs_dir(kubeconfig: Path) -> Path:
    """Where the loader writes the kubeconfig's embedded certificate and key: beside it (in
    the cluster's state dir, purged with it), not /tmp, emptied first. The loader removes its
    files only at a clean exit, and a node agent is often SIGKILLed: its private key was left
    in /tmp at every kill. Called once per agent process (the loader caches its files)."""
    path = kubeconfig.with_suffix(".certs")
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=0o700, parents=True)
    return path


@asynccontextmanager
async def connect(kubeconfig: Path) -> AsyncIterator[Kube]:
    """A Kube for the kubeconfig's current context; closes the connection pool on exit."""
    cfg = client.Configuration()
    async with asyncio.timeout(REQUEST_TIMEOUT):
        await config.load_kube_config(
            config_file=str(kubeconfig),
            client_configuration=cfg,
            temp_file_path=str(certs_dir(kubeconfig)),
        )
    api = client.ApiClient(configuration=cfg)
    try:
        yield Kube(api)
    finally:
        await api.close()
