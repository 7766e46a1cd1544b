"""The handler's HTTP endpoint: /metrics, /healthz and /readyz (aiohttp).

Unlike the other daemons' endpoint (shared.kube.health), /metrics first refreshes the
per-VMI series from the launchers, bounded by a deadline, so a scrape reads current
guest counters; a slow launcher delays only the scrape, never the reconcile loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from aiohttp import web

from shared.kube import Registry
from shared.kube.health import CONTENT_TYPE

log = structlog.get_logger("handler.http")

Check = Callable[[], bool]
Collect = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConfig:
    host: str = "0.0.0.0"
    port: int = 8443
    collect_deadline: float = 5.0
    shutdown_timeout: float = 3.0


def build_app(
    registry: Registry, *, collect: Collect, ready: Check, healthy: Check, deadline: float
) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(deadline):
                await collect()
        except TimeoutError:
            if _cancelling():
                raise
            log.warning("metrics_collect_timed_out", deadline=deadline)
        return web.Response(body=registry.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    async def healthz(_: web.Request) -> web.Response:
        if not healthy():
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


class HttpServer:
    """Serves the app until cancelled; `bound_port` is known once `started` is set."""

    def __init__(self, config: HttpConfig, app: web.Application) -> None:
        self._config = config
        self._app = app
        self.bound_port: int | None = None
        self.started = asyncio.Event()

    async def run(self) -> None:
        runner = web.AppRunner(self._app, shutdown_timeout=self._config.shutdown_timeout)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._config.host, self._config.port)
            await site.start()
            for addr in runner.addresses:
                if isinstance(addr, tuple) and len(addr) >= 2:
                    self.bound_port = int(addr[1])
                    break
            log.info("http_server_started", host=self._config.host, port=self.bound_port)
            self.started.set()
            await asyncio.Future()
        finally:
            await runner.cleanup()


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
