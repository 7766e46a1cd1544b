"""What the guest agent says about a running guest: its OS (status.guestOSInfo) and its
interfaces (status.interfaces' guest names and addresses).

Asked when the agent connects; what could not be had yet (the agent busy, the guest not
yet holding an address from DHCP) is asked again on the next visits, and nothing once
complete, so a settled guest costs no agent calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from handler import commands
from handler.errors import SyncError
from handler.launchers import LauncherPort
from shared.model import GuestOSInfo, VMIInterfaceStatus

log = structlog.get_logger("handler.guest")


@dataclass(slots=True)
class GuestFacts:
    """One VMI's guest facts, kept between reconciles while its agent stays connected."""

    info: GuestOSInfo | None = None
    interfaces: tuple[VMIInterfaceStatus, ...] | None = None

    def _settled(self) -> bool:
        """Every interface the agent matched to the VMI has an address."""
        return (
            self.interfaces is not None
            and all(i.ip_address for i in self.interfaces if i.name)
            and any(i.name for i in self.interfaces)
        )

    async def refresh(self, launcher: LauncherPort) -> bool:
        """Ask the agent for what is missing; True when something is still missing."""
        try:
            if self.info is None:
                self.info = await commands.guest_os_info(launcher)
            if not self._settled():
                self.interfaces = await commands.guest_interfaces(launcher)
        except SyncError as exc:
            log.info("guest_info_unavailable", error=exc.message)
            return True
        return not self._settled()
