"""Interface links changed on the running domain (KubeVirt 1.5+'s live `state`): the live
XML's interface with its new <link state>, given to libvirt's updateDeviceFlags (live: a
migration carries the live XML), only for the interfaces whose link differs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from launcher import nicxml
from shared.wire.links import LinkStatesArgs

log = structlog.get_logger("launcher.linkstate")


class LinkVirt(Protocol):
    """What a link change needs of libvirt (launcher.virt.Virt; fakes in tests)."""

    async def xml(self, name: str) -> str: ...
    async def update_device(self, name: str, xml: str) -> None: ...


class LinkStates:
    def __init__(self, *, virt: LinkVirt, domain: Callable[[], str]) -> None:
        self._virt, self._domain = virt, domain

    async def apply(self, args: LinkStatesArgs) -> list[str]:
        """Set each listed interface's link; the names of those changed."""
        domain = self._domain()
        changed = []
        for name, xml in nicxml.link_updates(await self._virt.xml(domain), args.links):
            await self._virt.update_device(domain, xml)
            log.info("link_state_changed", interface=name, up=args.links[name])
            changed.append(name)
        return changed
