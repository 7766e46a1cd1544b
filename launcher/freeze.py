"""The guest's filesystems frozen for a backup (KubeVirt's VMI freeze/unfreeze), through
the guest agent (libvirt's fsFreeze/fsThaw), and thawed by itself once the caller's
unfreezeTimeout has passed, so a backup tool that dies mid-way leaves no guest frozen.

An agent may answer a freeze late (hung, stopped, busy): the caller gives up and asks for a
thaw while libvirt still waits. That thaw is remembered, and the freeze, when it lands, is
undone at once (and reported failed); a freeze whose caller went away mid-way counts as
frozen until its unfreezeTimeout, when the thaw is sent anyway (harmless if it never landed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from shared.wire.errors import CommandFailed, ErrorCode

log = structlog.get_logger("launcher.freeze")


class FreezePort(Protocol):
    """What freezing needs of libvirt (launcher.virt.Virt)."""

    async def fs_freeze(self, name: str) -> int: ...
    async def fs_thaw(self, name: str) -> int: ...


class Freezer:
    """Freeze/thaw one domain; `run()` (a task of the launcher's TaskGroup) thaws it when
    the deadline of the last freeze passes."""

    def __init__(
        self,
        virt: FreezePort,
        domain: str,
        *,
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._virt = virt
        self._domain = domain
        self._on_change = on_change  # frozen ↔ thawed: the handler hears of it
        self._clock = clock
        self._deadline: float | None = None
        self._changed = asyncio.Event()
        self._freezing = 0  # freezes sent that the agent has not answered yet
        self._thaw_asked = False  # a thaw came while one was in flight

    @property
    def frozen(self) -> bool:
        return self._deadline is not None

    async def freeze(self, unfreeze_timeout: float) -> None:
        """Freeze (again: a frozen guest stays frozen, its deadline renewed)."""
        was = self.frozen
        if not was:
            count = await self._landed(unfreeze_timeout)
            if self._thaw_asked and not self._freezing:
                await self._undo_late_freeze()
            log.info("filesystems_frozen", count=count, unfreeze_timeout=unfreeze_timeout)
        self._deadline = self._clock() + unfreeze_timeout if unfreeze_timeout > 0 else float("inf")
        self._changed.set()
        if not was:
            self._on_change()

    async def _landed(self, unfreeze_timeout: float) -> int:
        """The libvirt freeze; its caller going away leaves the guest counted frozen."""
        if not self._freezing:
            self._thaw_asked = False
        self._freezing += 1
        try:
            return await self._virt.fs_freeze(self._domain)
        except asyncio.CancelledError:
            limit = unfreeze_timeout if unfreeze_timeout > 0 else 0.0
            self._deadline = self._clock() + limit  # it may still land: thaw then anyway
            self._changed.set()
            raise
        finally:
            self._freezing -= 1

    async def _undo_late_freeze(self) -> None:
        """Thaw a freeze that landed after a thaw was asked for; it fails the freeze."""
        self._thaw_asked = False
        log.warning("late_freeze_undone")
        try:
            count = await self._virt.fs_thaw(self._domain)
        except CommandFailed:
            self._deadline = self._clock()  # still frozen: run() tries again now
            self._changed.set()
            self._on_change()
            raise
        log.info("filesystems_thawed", count=count)
        raise CommandFailed(
            ErrorCode.AGENT_NOT_CONNECTED,
            "the freeze landed after an unfreeze was asked for: thawed at once",
        )

    async def thaw(self) -> None:
        """Thaw; a no-op when not frozen by us. A freeze still in flight is undone as soon
        as it lands."""
        if self._freezing and not self.frozen:
            self._thaw_asked = True
            log.info("thaw_after_the_freeze_in_flight")
            return
        was = self.frozen
        if was:
            count = await self._virt.fs_thaw(self._domain)
            log.info("filesystems_thawed", count=count)
        self._deadline = None
        self._changed.set()
        if was:
            self._on_change()

    async def run(self) -> None:
        """Forever: wait for a deadline, thaw when it passes (unless changed meanwhile)."""
        while True:
            self._changed.clear()
            deadline = self._deadline
            wait = None if deadline is None else max(0.0, deadline - self._clock())
            if wait is not None and wait != float("inf") and wait <= 0:
                log.warning("unfreeze_timeout_passed")
                try:
                    await self.thaw()
                except CommandFailed as exc:  # the guest or its agent is gone: nothing to thaw
                    log.warning("auto_thaw_failed", error=str(exc))
                    self._deadline = None
                    self._on_change()
                continue
            try:
                async with asyncio.timeout(None if wait == float("inf") else wait):
                    await self._changed.wait()
            except TimeoutError:
                continue
