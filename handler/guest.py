"""What the guest agent says about a running guest: its OS (status.guestOSInfo) and its
interfaces (status.interfaces' guest names and addresses).

Asked when the agent connects; what could not be had yet (the agent busy, the guest not
yet holding an address from DHCP) is asked again on the next visits. Once every matched
interface has an address the interfaces are re-read only every `refresh_every` seconds
(as KubeVirt's agent poller does), so a guest that changes its addresses is seen within
that, and a settled guest costs one agent call per interval. The OS facts are read once.
"""

from __future__ import annotations

import asyncio
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
    settled_at: float | None = None  # clock reading when the interfaces were last complete

    def _settled(self) -> bool:
        """Every interface the agent matched to the VMI has an address."""
        return (
            self.interfaces is not None
            and all(i.ip_address for i in self.interfaces if i.name)
            and any(i.name for i in self.interfaces)
        )

    async def refresh(
        self, launcher: LauncherPort, *, now: float, retry: float, refresh_every: float
    ) -> float:
        """Ask the agent for what is missing or due; the seconds until the next visit."""
        due = self.settled_at is None or now - self.settled_at >= refresh_every
        try:
            if self.info is None:
                self.info = await commands.guest_os_info(launcher)
            if due:
                self.interfaces = await commands.guest_interfaces(launcher)
        except SyncError as exc:
            log.info("guest_info_unavailable", error=exc.message)
            return retry
        if self.info is None or not self._settled():
            self.settled_at = None
            return retry
        settled_at = now if due or self.settled_at is None else self.settled_at
        self.settled_at = settled_at
        return max(0.0, settled_at + refresh_every - now)


async def refresh_unless_interrupted(
    facts: GuestFacts,
    launcher: LauncherPort,
    *,
    interrupt: asyncio.Future[None],
    now: float,
    retry: float,
    refresh_every: float,
) -> float:
    """`facts.refresh`, given up (its launcher call cancelled) as soon as `interrupt` is
    done: the domain's state changed, and what it says (a guest just paused, whose agent
    will not answer until its call times out) is written now, not after that timeout.
    The facts keep what they had; the seconds until the next visit: `retry`."""
    async with asyncio.TaskGroup() as tg:
        asking = tg.create_task(
            facts.refresh(launcher, now=now, retry=retry, refresh_every=refresh_every)
        )
        interrupt.add_done_callback(lambda _: asking.cancel())
        asking.add_done_callback(lambda _: interrupt.cancel())
    if asking.cancelled():
        log.info("guest_info_interrupted")
        return retry
    return asking.result()
