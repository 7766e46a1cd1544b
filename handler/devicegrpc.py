"""virt-handler's device plugins over real gRPC: the kubelet's Registration service on
`<directory>/kubelet.sock`, and each plugin served on `<directory>/<endpoint>`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shared.deviceplugin import KUBELET_SOCKET, RegisterRequest, rpc

if TYPE_CHECKING:
    from handler.deviceplugin import DevicePlugin, Identity


@dataclass(frozen=True, slots=True)
class KubeletSocket:
    """The kubelet's Registration service on `<directory>/kubelet.sock`."""

    directory: Path
    timeout: float

    async def register(self, request: RegisterRequest) -> None:
        await rpc.register(self.directory / KUBELET_SOCKET, request, timeout=self.timeout)

    def identity(self) -> Identity:
        return rpc.socket_identity(self.directory / KUBELET_SOCKET)


class GrpcPluginServer:
    """A plugin served over gRPC on `<directory>/<endpoint>`."""

    def __init__(self, directory: Path, plugin: DevicePlugin) -> None:
        self._server = rpc.UnixServer(directory / plugin.endpoint, rpc.plugin_handler(plugin))

    async def start(self) -> None:
        await self._server.start()

    async def stop(self, grace: float) -> None:
        await self._server.stop(grace)

    def alive(self) -> bool:
        inode = self._server.inode
        return inode is not None and rpc.socket_identity(self._server.path) == inode
