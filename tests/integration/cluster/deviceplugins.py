"""virt-handler's device plugins run by a test, for suites whose launcher pods run with no
handler on the node (launcher pods request devices.kubevirt.io/tun, which only a
registered device plugin makes schedulable). The same code a handler runs, registering
with each node agent's kubelet.sock, so there is no special "static capacity" mode.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from handler.deviceplugin import DevicePlugins, DevicePluginsConfig
from localkube.cluster import Cluster
from shared.kube import NODES, KubeClient
from tests.unit.handler.waiting import until_async

TUN = "devices.kubevirt.io/tun"


async def node_allocatable(kube: KubeClient, node: str, resource: str) -> str | None:
    """The Node's status.allocatable[resource] (None when not listed)."""
    status = (await kube.get(NODES, node)).get("status") or {}
    value = (status.get("allocatable") or {}).get(resource)
    return str(value) if value is not None else None


@contextlib.asynccontextmanager
async def node_device_plugins(
    cluster: Cluster,
    kube: KubeClient,
    *,
    nodes: Sequence[str] | None = None,
    count: int = 110,
    interval: float = 1.0,
) -> AsyncIterator[dict[str, DevicePlugins]]:
    """Device plugins for `nodes` (default: all), yielded once every Node shows tun
    allocatable; withdrawn (sockets deleted, so capacity drops to 0) afterwards.

    Tasks are created directly rather than in a TaskGroup: a fixture's setup and teardown
    may run in different tasks, and the shutdown below awaits them all.
    """
    plugins = {
        node: DevicePlugins(
            DevicePluginsConfig(
                directory=cluster.config.device_plugins_dir(node), count=count, interval=interval
            )
        )
        for node in nodes or cluster.config.nodes
    }
    tasks = [asyncio.create_task(p.run(), name=f"device-plugins-{n}") for n, p in plugins.items()]
    try:

        async def advertised() -> bool:
            for node in plugins:
                if await node_allocatable(kube, node, TUN) != str(count):
                    return False
            return True

        await until_async(advertised, f"{TUN} allocatable on {list(plugins)}", 30, 0.2)
        yield plugins
    finally:
        for p in plugins.values():
            await p.shutdown(10)
        await asyncio.gather(*tasks)
