"""Serving the subresource API over HTTPS for as long as the controller runs.

    server = SubresourceServer(config, client, registry)
    tg.create_task(server.run(), name="subresources")     # until cancelled (or `stop`)

Every controller replica serves (the Service spreads requests); leadership only matters
for the reconcile loops. `run()` waits for the front proxy's settings, binds the port,
keeps those settings current, and on the way out stops accepting, lets in-flight calls
finish within `shutdown_timeout` and closes the handler connection pool.
"""

from __future__ import annotations

import asyncio

import aiohttp
import structlog
from aiohttp import web

from shared.kube import Registry
from shared.kube.ports import ObjectWrites
from shared.kube.ratelimit import BackoffPolicy
from virt_api.subresources.app import AppDeps, build_app
from virt_api.subresources.authz import Authorizer, SarAuthorizer
from virt_api.subresources.config import SubresourceConfig
from virt_api.subresources.extras import KubeExpander
from virt_api.subresources.forward import ForwardOptions, HandlerForwarder
from virt_api.subresources.frontproxy import FrontProxy, keep_current, wait_for_config
from virt_api.subresources.locate import ClusterReader, KubeReader
from virt_api.subresources.tls import handler_client_context, serving_context
from virt_api.subresources.vmhttp import KubeVmStore, VmStore
from virt_api.upload.routes import Uploads

log = structlog.get_logger("virt_api.subresources")

STARTUP_BACKOFF = BackoffPolicy(initial=0.5, cap=30.0)


class SubresourceServer:
    """The aggregated API server; `bound_port` is known once `started` is set."""

    def __init__(
        self,
        config: SubresourceConfig,
        client: ObjectWrites,
        registry: Registry,
        *,
        authorizer: Authorizer | None = None,
        reader: ClusterReader | None = None,
        vms: VmStore | None = None,
        uploads: Uploads | None = None,
    ) -> None:
        self._config = config
        self._client = client
        self._authorizer = authorizer or SarAuthorizer(client, timeout=config.review_timeout)
        self._reader = reader or KubeReader(client)
        self._vms = vms or KubeVmStore(client)
        self._uploads = uploads
        self._requests = registry.counter(
            "kubevirt_subresource_requests_total",
            "Subresource API calls on VMIs, by action and HTTP status code.",
            ("action", "code"),
        )
        self.bound_port: int | None = None
        self.started = asyncio.Event()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until `stop` is set (or until cancelled)."""
        cfg = self._config
        front = FrontProxy(await wait_for_config(self._client, policy=STARTUP_BACKOFF))
        tls = serving_context(cfg.serving, client_ca_pem=front.config.client_ca)
        options = ForwardOptions(
            server_name=cfg.handler_server_name,
            timeout=cfg.handler_timeout,
            connect_timeout=cfg.connect_timeout,
            heartbeat=cfg.heartbeat,
        )
        async with aiohttp.ClientSession() as session:
            forwarder = HandlerForwarder(
                session, tls=handler_client_context(cfg.handler_client), options=options
            )
            deps = AppDeps(
                front_proxy=front,
                authorizer=self._authorizer,
                reader=self._reader,
                forwarder=forwarder,
                requests=self._requests,
                vms=self._vms,
                volumes=self._client,
                expander=KubeExpander(self._client),
                uploads=self._uploads,
                write_timeout=cfg.write_timeout,
                heartbeat=cfg.heartbeat,
            )
            runner = web.AppRunner(build_app(deps), shutdown_timeout=cfg.shutdown_timeout)
            await runner.setup()
            try:
                # reuse_port: replicas sharing one host (the local cluster) share the port.
                site = web.TCPSite(runner, cfg.host, cfg.port, ssl_context=tls, reuse_port=True)
                await site.start()
                self.bound_port = _bound_port(runner)
                log.info("subresource_api_started", host=cfg.host, port=self.bound_port)
                self.started.set()
                async with asyncio.TaskGroup() as tg:
                    refresh = tg.create_task(
                        keep_current(self._client, front, tls, interval=cfg.auth_refresh_interval),
                        name="front-proxy-refresh",
                    )
                    await (stop.wait() if stop is not None else asyncio.Event().wait())
                    refresh.cancel()
            finally:
                await runner.cleanup()
                log.info("subresource_api_stopped")


def _bound_port(runner: web.AppRunner) -> int | None:
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            return int(addr[1])
    return None
