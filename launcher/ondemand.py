"""The launcher's commands that no VM start needs (disk expansion, CPU/memory hotplug, link
states, backups, NIC hotplug): registered at start, so ``info`` lists them, while their
modules and wire types (≈ 8 ms of CPU, issue 39) load on the first of them.

The groups and their handlers live in launcher.ondemand_ops, imported off the event loop
like launcher.serve (launcher.cmdsocket.import_off_loop); a unit test keeps ``METHODS``
equal to its table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.cmdsocket import import_off_loop
from shared.wire.launcher_api import Method
from shared.wire.server import RpcServer

if TYPE_CHECKING:
    from launcher.ondemand_ops import Groups
    from launcher.virt import Virt

OPS_MODULE = "launcher.ondemand_ops"

METHODS = (
    Method.EXPAND_DISKS,
    Method.HOTPLUG_RESOURCES,
    Method.SET_LINK_STATES,
    Method.BACKUP_BEGIN,
    Method.BACKUP_STATUS,
    Method.SYNC_INTERFACES,
)


class OnDemandCommands:
    """Serves ``METHODS``; their groups are built once, on the first call of any."""

    def __init__(self, *, virt: Virt, domain: Callable[[], str], network_file: Path) -> None:
        self._virt = virt
        self._domain = domain
        self._network_file = network_file
        self._groups: Groups | None = None

    def register(self, server: RpcServer) -> None:
        """One handler per method of ``METHODS`` on ``server``."""
        for method in METHODS:

            async def handler(args: Mapping[str, Any], method: Method = method) -> Any:
                return await self.call(method, args)

            server.register(str(method), handler)

    async def call(self, method: Method, args: Mapping[str, Any]) -> Any:
        """Run ``method`` against the groups, building them first if no call has."""
        groups = await self.groups()
        from launcher.ondemand_ops import OPS  # noqa: PLC0415 (loaded by self.groups())

        return await OPS[method](groups, args)

    async def groups(self) -> Groups:
        """The groups, built once (a call that raced the first one's import shares them)."""
        if self._groups is None:
            await import_off_loop(OPS_MODULE)
            from launcher.ondemand_ops import Groups  # noqa: PLC0415 (loaded by now)

            if self._groups is None:
                self._groups = Groups.build(
                    virt=self._virt, domain=self._domain, network_file=self._network_file
                )
        return self._groups
