"""The actions endpoint's `ActionTarget` over the launchers' sockets on this node."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from handler import netwire
from handler.actions import CONSOLE_SOCKET, EMPTY_DIRS, VNC_SOCKET, GetVmi, NotOnThisNode
from handler.netns import launcher_process
from shared import podnet
from shared.kube import NotFound as KubeNotFound
from shared.model import VirtualMachineInstance
from shared.podlayout import LAUNCHER_SOCKET, PRIVATE_VOLUME
from shared.wire.client import RpcClient, Timeouts
from shared.wire.launcher_api import TIERS, ForwardPortArgs, Method


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
        return await self._call(await self._volumes(namespace, name), method, dict(args or {}))

    async def forward_port(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        """Have the launcher forward the guest's port on its pod; (pod IP, port)."""
        vmi = await self._vmi(namespace, name)
        volumes = self._launcher_volumes(vmi)
        # Only a masquerade interface's address, which is the pod's: never an address the
        # guest agent reported (the guest must not choose where the handler connects).
        nat = {
            i.name
            for i in vmi.spec.domain.devices.interfaces
            if i.masquerade is not None or i.uses_passt()
        }
        pod_ip = next(
            (i.ip_address for i in vmi.status.interfaces if i.name in nat and i.ip_address),
            None,
        )
        if pod_ip is None:
            raise NotOnThisNode(f"{namespace}/{name} has no pod IP (no masquerade interface)")
        args = ForwardPortArgs(port=port).to_wire()
        forwarded = await self._call(volumes, Method.FORWARD_PORT, args)
        wiring = podnet.read(volumes / PRIVATE_VOLUME / podnet.NETWORK_FILE)
        masq = next(
            (w for w in wiring.interfaces if w.binding is podnet.Binding.MASQUERADE), None
        ) if wiring is not None and not wiring.user_mode_reason else None  # fmt: skip
        if masq is not None:
            # Wired by this handler: its NAT leads the pod's ports to the guest; a port the
            # interface's `ports` leave out gets a rule of its own for the tunnel.
            launcher = launcher_process(volumes / "sockets" / LAUNCHER_SOCKET)
            await netwire.open_guest_port(launcher, port, guest=masq.guest_ip)
        return pod_ip, int(forwarded["port"])

    async def _call(self, volumes: Path, method: Method, args: dict[str, Any]) -> Any:
        async with RpcClient.connect(
            volumes / "sockets" / LAUNCHER_SOCKET, timeouts=self._timeouts
        ) as client:
            return await client.call(method, args, tier=TIERS[method])

    async def console_socket(self, namespace: str, name: str) -> Path:
        return (await self._volumes(namespace, name)) / CONSOLE_SOCKET

    async def vnc_socket(self, namespace: str, name: str) -> Path:
        return (await self._volumes(namespace, name)) / VNC_SOCKET

    async def emptydirs(self, namespace: str, name: str) -> Path:
        """The emptyDir root of the VMI's launcher pod on this node (as the node sees it)."""
        return await self._volumes(namespace, name)

    async def _volumes(self, namespace: str, name: str) -> Path:
        """The emptyDir root of the VMI's launcher pod on this node."""
        return self._launcher_volumes(await self._vmi(namespace, name))

    async def _vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
        try:
            return await self._get_vmi(namespace, name)
        except KubeNotFound as e:
            raise NotOnThisNode(f"virtualmachineinstance {namespace}/{name} not found") from e

    def _launcher_volumes(self, vmi: VirtualMachineInstance) -> Path:
        namespace, name = vmi.metadata.namespace, vmi.metadata.name
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
