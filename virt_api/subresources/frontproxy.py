"""The front proxy's trust settings, read from kube-apiserver and kept current.

At start we wait (with backoff) until kube-system/extension-apiserver-authentication can
be read: without it no request can be authenticated, but the rest of the controller must
keep running. Afterwards the ConfigMap is re-read on an interval; a new requestheader CA
is added to the live TLS context (OpenSSL contexts only ever add CAs, so a rotated-out CA
stays trusted until restart) and new allowed names / header names apply at once.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping

import structlog

from shared.kube import KubeError, Resource
from shared.kube.ports import Gets
from shared.kube.ratelimit import Backoff, BackoffPolicy
from virt_api.subresources.authn import AUTH_CONFIGMAP, AUTH_NAMESPACE, RequestHeaderConfig
from virt_api.subresources.errors import SetupError

log = structlog.get_logger("virt_api.subresources.frontproxy")

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")


class FrontProxy:
    """The current RequestHeaderConfig; the refresh loop replaces it."""

    def __init__(self, config: RequestHeaderConfig) -> None:
        self._config = config

    @property
    def config(self) -> RequestHeaderConfig:
        return self._config

    def replace(self, config: RequestHeaderConfig) -> None:
        self._config = config


async def read_config(kube: Gets) -> RequestHeaderConfig:
    """Read and parse the ConfigMap once (KubeError or SetupError on failure)."""
    cm = await kube.get(CONFIGMAPS, AUTH_CONFIGMAP, namespace=AUTH_NAMESPACE)
    data: Mapping[str, str] = cm.get("data") or {}
    return RequestHeaderConfig.from_configmap(data)


async def wait_for_config(kube: Gets, *, policy: BackoffPolicy) -> RequestHeaderConfig:
    """Read the ConfigMap, retrying with backoff until it can be read and parsed."""
    backoff = Backoff(policy)
    while True:
        try:
            return await read_config(kube)
        except (KubeError, SetupError) as e:
            delay = backoff.next_delay()
            log.warning("front_proxy_config_unavailable", error=str(e), retry_in=round(delay, 2))
            await asyncio.sleep(delay)


async def keep_current(
    kube: Gets, proxy: FrontProxy, tls: ssl.SSLContext, *, interval: float
) -> None:
    """Re-read the ConfigMap every `interval` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        try:
            fresh = await read_config(kube)
        except (KubeError, SetupError) as e:
            log.warning("front_proxy_config_refresh_failed", error=str(e))
            continue
        if fresh == proxy.config:
            continue
        if fresh.client_ca != proxy.config.client_ca:
            tls.load_verify_locations(cadata=fresh.client_ca)
        proxy.replace(fresh)
        log.info("front_proxy_config_updated", allowed_names=list(fresh.allowed_names))
