"""The actions endpoint's `ActionTarget` over the launchers' sockets on this node."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from handler.actions import CONSOLE_SOCKET, EMPTY_DIRS, GetVmi, NotOnThisNode
from shared.kube import NotFound as KubeNotFound
from shared.wire.client import RpcClient, Timeouts
from shared.wire.launcher_api import LAUNCHER_SOCKET, TIERS, Method


class LauncherTarget:
    """`ActionTarget` over the launchers' sockets: the VMI's pod on this node from
    status.activePods, one short RpcClient connection (with the handshake) per command."""

    def __init__(
        self, get_vmi: GetVmi, *, node: str, pods_dir: Path, timeouts: Timeouts | None = None
    ) -> None:
        self._get_vmi = get_vmi
        self._node = node
        self._pods_dir = pods_dir
        self._timeouts = timeouts or Timeouts()

    async def command(
        self, namespace: str, name: str, method: Method, args: Mapping[str, Any] | None = None
    ) -> Any:
        volumes = await self._volumes(namespace, name)
        async with RpcClient.connect(
            volumes / "sockets" / LAUNCHER_SOCKET, timeouts=self._timeouts
        ) as client:
            return await client.call(method, dict(args or {}), tier=TIERS[method])

    async def console_socket(self, namespace: str, name: str) -> Path:
        return (await self._volumes(namespace, name)) / CONSOLE_SOCKET

    async def _volumes(self, namespace: str, name: str) -> Path:
        """The emptyDir root of the VMI's launcher pod on this node."""
        try:
            vmi = await self._get_vmi(namespace, name)
        except KubeNotFound as e:
            raise NotOnThisNode(f"virtualmachineinstance {namespace}/{name} not found") from e
        if vmi.status.node_name != self._node:
            raise NotOnThisNode(
                f"{namespace}/{name} runs on {vmi.status.node_name!r}, not {self._node!r}"
            )
        pods = [uid for uid, node in vmi.status.active_pods.items() if node == self._node]
        for uid in pods:
            volumes = self._pods_dir / uid / EMPTY_DIRS
            if (volumes / "sockets" / LAUNCHER_SOCKET).exists():
                return volumes
        raise NotOnThisNode(f"no ready launcher of {namespace}/{name} here (pods {pods})")
