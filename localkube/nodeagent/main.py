"""Node agent entry point: register the Node, serve the device-plugin Registration,
heartbeat, run the node's pods.

SIGTERM/SIGINT stop the pods (within a short grace) and exit; SIGKILL leaves the pods
running, as a dead kubelet would, and the next agent on this node adopts and restarts them.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import aiohttp
import structlog
import uvloop

from localkube.nodeagent.cgroups import prune
from localkube.nodeagent.config import AgentConfig
from localkube.nodeagent.devices import DeviceManager
from localkube.nodeagent.kube import Kube, KubeError, connect
from localkube.nodeagent.manager import PodManager
from localkube.nodeagent.node import NodeHeartbeat
from shared.daemon import stop_on_signals

log = structlog.get_logger()


async def _register(heartbeat: NodeHeartbeat, *, timeout: float = 120.0) -> None:
    """Register the Node, retrying while the apiserver is not ready yet."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                await heartbeat.register()
                return
            except (KubeError, aiohttp.ClientError, OSError) as e:
                log.warning("node_register_failed", error=str(e))
                await asyncio.sleep(1)


async def run(cfg: AgentConfig) -> None:
    async with stop_on_signals() as stop:
        await _run(cfg, stop)


async def _run(cfg: AgentConfig, stop: asyncio.Event) -> None:
    cfg.pods_dir.mkdir(parents=True, exist_ok=True)
    log.info("node_agent_starting", node=cfg.node, root=str(cfg.root))
    kube: Kube
    async with connect(cfg.kubeconfig) as kube:
        poke = asyncio.Event()
        devices = DeviceManager(cfg.device_plugins_dir, on_change=poke.set)
        heartbeat = NodeHeartbeat(kube, cfg, devices=devices.capacity, poke=poke)
        await _register(heartbeat)
        async with asyncio.TaskGroup() as tg:
            plugins = tg.create_task(devices.run(), name="device-registration")
            beats = tg.create_task(heartbeat.run(), name="node-heartbeat")
            await PodManager(kube, cfg, devices).run(stop)
            beats.cancel()
            plugins.cancel()
    if cfg.node_cgroup is not None and cfg.cgroup_root is not None:
        prune(cfg.node_cgroup, stop_at=cfg.cgroup_root)
    log.info("node_agent_stopped", node=cfg.node)


def main() -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    cfg = AgentConfig.from_args(sys.argv[1:])
    structlog.contextvars.bind_contextvars(node=cfg.node)
    uvloop.run(run(cfg))


if __name__ == "__main__":
    main()
