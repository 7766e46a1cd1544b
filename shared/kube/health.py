"""The small HTTP endpoint every daemon serves: /metrics, /healthz and /readyz.

Kubelet probes /healthz (the loop answers) and /readyz (the daemon's own readiness
callback: informers synced, leader or standby, devices ready …); Prometheus scrapes
/metrics from the daemon's `Registry`. With a serving certificate (`serving_tls`) all three
are HTTPS, as KubeVirt serves them (kubelet probes with scheme HTTPS; Prometheus scrapes
with scheme https).

    server = HealthServer(HealthConfig(port=8443), registry, ready=lambda: synced.is_set())
    tg.create_task(server.run())          # serves until cancelled, then cleans up
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web

from shared.kube.metrics import Registry

log = structlog.get_logger("shared.kube.health")

ReadyCheck = Callable[[], bool]
# Refreshes series that are read on demand (e.g. the handler asking launchers for stats).
Collect = Callable[[], Awaitable[None]]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class HealthConfig:
    """Where to listen and how long to wait for in-flight requests on shutdown."""

    host: str = "0.0.0.0"  # probes and scrapes come from outside the pod
    port: int = 8443
    shutdown_timeout: float = 5.0
    collect_deadline: float = 5.0  # a slow collect delays only the scrape, then is dropped
    tls: ssl.SSLContext | None = None  # HTTPS, as KubeVirt serves its metrics (serving_tls)


def serving_tls(cert_dir: Path | None) -> ssl.SSLContext | None:
    """HTTPS with the mounted kubernetes.io/tls Secret in `cert_dir` (tls.crt, tls.key);
    None (plain HTTP) when no directory is given or it holds no such pair."""
    if cert_dir is None or not all((cert_dir / f).is_file() for f in ("tls.crt", "tls.key")):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    return ctx


def build_app(
    registry: Registry,
    *,
    ready: ReadyCheck,
    healthy: ReadyCheck | None = None,
    collect: Collect | None = None,
    collect_deadline: float = 5.0,
) -> web.Application:
    """The aiohttp application (separate from serving so tests can drive it directly).

    With ``collect``, /metrics first refreshes on-demand series, bounded by the deadline;
    a scrape that runs out of time serves what the registry already holds.
    """

    async def metrics(_: web.Request) -> web.Response:
        if collect is not None:
            try:
                async with asyncio.timeout(collect_deadline):
                    await collect()
            except TimeoutError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                log.warning("metrics_collect_timed_out", deadline=collect_deadline)
        return web.Response(body=registry.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    async def healthz(_: web.Request) -> web.Response:
        if healthy is not None and not healthy():
            return web.Response(status=503, text="unhealthy\n")
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if not ready():
            return web.Response(status=503, text="not ready\n")
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


class HealthServer:
    """Serves `build_app` on a TCP port for the lifetime of `run()`."""

    def __init__(
        self,
        config: HealthConfig,
        registry: Registry,
        *,
        ready: ReadyCheck,
        healthy: ReadyCheck | None = None,
        collect: Collect | None = None,
    ) -> None:
        self._config = config
        self._app = build_app(
            registry,
            ready=ready,
            healthy=healthy,
            collect=collect,
            collect_deadline=config.collect_deadline,
        )
        self.bound_port: int | None = None
        self.started = asyncio.Event()

    async def run(self) -> None:
        """Serve until cancelled; the listener is closed before this returns."""
        runner = web.AppRunner(self._app, shutdown_timeout=self._config.shutdown_timeout)
        await runner.setup()
        try:
            cfg = self._config
            site = web.TCPSite(runner, cfg.host, cfg.port, ssl_context=cfg.tls)
            await site.start()
            self.bound_port = _bound_port(runner)
            log.info(
                "health_server_started", host=cfg.host, port=self.bound_port, https=bool(cfg.tls)
            )
            self.started.set()
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()


def _bound_port(runner: web.AppRunner) -> int | None:
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            return int(addr[1])
    return None
