"""A network binding plugin's `migration: {method: link-refresh}` (shared/netbinding.py):
once a migrated guest runs on this node, the handler takes the link of each interface bound
by such a plugin down, then up again, so the guest asks its DHCP again (KubeVirt's method).
Once per migration (by its uid, remembered by this handler: a restarted handler may refresh
a link once more, which the guest sees as one more carrier flap)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from handler import linkstate
from handler.launchers import LauncherPort
from shared import nics
from shared.model import VirtualMachineInstance, VMIPhase
from shared.model.devopts import LinkState
from shared.netbinding import BindingPlugin, plugin_of
from shared.wire.links import LinkStatesArgs

log = structlog.get_logger("handler.linkrefresh")

PAUSE_SECONDS = 1.0  # link down this long: a guest's network stack sees the carrier drop


def refreshed(vmi: VirtualMachineInstance, plugins: Sequence[BindingPlugin]) -> tuple[str, ...]:
    """The interfaces whose plugin asks for link-refresh (not those the spec holds down)."""
    return tuple(
        i.name
        for i in nics.present(vmi)
        if i.name
        and i.state != LinkState.DOWN
        and (p := plugin_of(plugins, i)) is not None
        and p.link_refresh
    )


class LinkRefresh:
    """Refreshes the links of guests that migrated to this node, once per migration."""

    def __init__(
        self,
        *,
        node: str,
        plugins: Callable[[], Sequence[BindingPlugin]],
        pause: float = PAUSE_SECONDS,
    ) -> None:
        self._node, self._plugins, self._pause = node, plugins, pause
        self._done: set[str] = set()  # migration uids

    def wanted(self, vmi: VirtualMachineInstance) -> tuple[str, ...]:
        """The interfaces to refresh now: a Running VMI whose migration to this node
        completed and was not refreshed yet."""
        state = vmi.status.migration_state
        if vmi.status.phase is not VMIPhase.RUNNING or state is None:
            return ()
        done = state.completed and not state.failed and state.target_node == self._node
        if not done or not state.migration_uid or state.migration_uid in self._done:
            return ()
        return refreshed(vmi, self._plugins())

    async def apply(self, launcher: LauncherPort, vmi: VirtualMachineInstance) -> None:
        """Links down, a pause, links up; remembered once done."""
        names = self.wanted(vmi)
        state = vmi.status.migration_state
        if not names or state is None or not state.migration_uid:
            return
        await linkstate.apply(launcher, LinkStatesArgs(links=dict.fromkeys(names, False)))
        await asyncio.sleep(self._pause)
        await linkstate.apply(launcher, LinkStatesArgs(links=dict.fromkeys(names, True)))
        self._done.add(state.migration_uid)
        log.info("link_refreshed_after_migration", interfaces=list(names))
