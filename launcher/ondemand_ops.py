"""The groups behind launcher.ondemand's commands and their wire handlers, imported on the
first of those commands rather than at the launcher's start."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.backup import Backups
from launcher.expand import DiskExpander
from launcher.linkstate import LinkStates
from launcher.nichotplug import NicConfig, NicHotplug
from launcher.resources import Resources
from shared.wire.backup import BackupBeginArgs
from shared.wire.expand import ExpandDisksArgs
from shared.wire.launcher_api import Method, NoArgs
from shared.wire.links import LinkStatesArgs
from shared.wire.nics import SyncInterfacesArgs
from shared.wire.resources import HotplugResourcesArgs

if TYPE_CHECKING:
    from launcher.virt import Virt


@dataclass(frozen=True, slots=True, kw_only=True)
class Groups:
    """One launcher's on-demand command groups, each bound to its domain."""

    expander: DiskExpander
    resources: Resources
    links: LinkStates
    backups: Backups
    nics: NicHotplug

    @classmethod
    def build(cls, *, virt: Virt, domain: Callable[[], str], network_file: Path) -> Groups:
        """The groups against ``virt``; ``network_file`` is the handler's pod wiring."""
        return cls(
            expander=DiskExpander(virt=virt, domain=domain),
            resources=Resources(virt=virt, domain=domain),
            links=LinkStates(virt=virt, domain=domain),
            backups=Backups(virt=virt, domain=domain),
            nics=NicHotplug(virt=virt, domain=domain, config=NicConfig(network_file=network_file)),
        )


async def _expand_disks(groups: Groups, args: Mapping[str, Any]) -> Any:
    return (await groups.expander.expand(ExpandDisksArgs.from_wire(args))).to_wire()


async def _hotplug_resources(groups: Groups, args: Mapping[str, Any]) -> Any:
    return (await groups.resources.apply(HotplugResourcesArgs.from_wire(args))).to_wire()


async def _set_link_states(groups: Groups, args: Mapping[str, Any]) -> Any:
    return await groups.links.apply(LinkStatesArgs.from_wire(args))


async def _backup_begin(groups: Groups, args: Mapping[str, Any]) -> Any:
    return (await groups.backups.begin(BackupBeginArgs.from_wire(args))).to_wire()


async def _backup_status(groups: Groups, args: Mapping[str, Any]) -> Any:
    NoArgs.from_wire(args)
    return (await groups.backups.status()).to_wire()


async def _sync_interfaces(groups: Groups, args: Mapping[str, Any]) -> Any:
    return (await groups.nics.sync(SyncInterfacesArgs.from_wire(args))).to_wire()


OPS: Mapping[Method, Callable[[Groups, Mapping[str, Any]], Awaitable[Any]]] = {
    Method.EXPAND_DISKS: _expand_disks,
    Method.HOTPLUG_RESOURCES: _hotplug_resources,
    Method.SET_LINK_STATES: _set_link_states,
    Method.BACKUP_BEGIN: _backup_begin,
    Method.BACKUP_STATUS: _backup_status,
    Method.SYNC_INTERFACES: _sync_interfaces,
}
