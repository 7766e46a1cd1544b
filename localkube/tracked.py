"""The cluster's detached components, tracked by pidfiles in the state directory: which
one runs (its pid carries the cluster's marker), start-and-wait-healthy, wait for a node
to be Ready, stop."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable

import structlog

from localkube import components
from localkube.config import ClusterConfig
from localkube.errors import ComponentFailed
from localkube.health import log_tail, wait_healthy
from localkube.procs import (
    DaemonSpec,
    carries_marker,
    pid_alive,
    read_pidfile,
    spawn_detached,
    stop_process,
)

log = structlog.get_logger()


class Tracked:
    """The pidfile-tracked processes of one cluster."""

    def __init__(self, config: ClusterConfig, *, marker: tuple[str, str]) -> None:
        self.config = config
        self.paths = config.paths
        self.marker = marker

    def pid(self, name: str) -> int | None:
        return read_pidfile(self.paths.pidfile(name))

    def running(self, name: str) -> bool:
        pid = self.pid(name)
        return pid is not None and carries_marker(pid, self.marker)

    async def ensure(
        self,
        spec: DaemonSpec,
        url: str,
        *,
        ssl_ctx: ssl.SSLContext | bool = False,
        timeout: float = 90.0,
    ) -> None:
        if not self.running(spec.name):
            spawn_detached(components.supervised(self.config, spec), marker=self.marker)
        pid = self.pid(spec.name)
        assert pid is not None
        await wait_healthy(
            spec.name,
            url,
            alive=lambda: pid_alive(pid),
            log_file=spec.log_file,
            ssl_ctx=ssl_ctx,
            timeout=timeout,
        )
        log.info("component_healthy", component=spec.name, pid=pid)

    async def wait(
        self, name: str, ready: Callable[[], Awaitable[str]], timeout: float = 60
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline, last = loop.time() + timeout, ""
        while loop.time() < deadline:
            last = await ready()
            if last == "True":
                log.info("component_healthy", component=name, pid=self.pid(name))
                return
            pid = self.pid(name)
            if pid is None or not pid_alive(pid):
                raise ComponentFailed(name, "exited while starting", log_tail(self.paths.log(name)))
            await asyncio.sleep(0.5)
        raise ComponentFailed(
            name, f"Node not Ready after {timeout}s (last: {last})", log_tail(self.paths.log(name))
        )

    async def stop(self, name: str, *, grace: float) -> None:
        pid = self.pid(name)
        if pid is not None:
            await stop_process(pid, marker=self.marker, grace=grace)
            log.info("component_stopped", component=name, pid=pid)
        with contextlib.suppress(FileNotFoundError):
            self.paths.pidfile(name).unlink()
