"""Memory dumps of the running guest into a memory dump volume (KubeVirt's way).

The handler bind-mounts the dump's file on the claim into the pod's hotplug-disks dir as
the volume's file (shared/podlayout.py), then asks `memory_dump`: the dump (libvirt's
virDomainCoreDumpWithFormat, memory only, raw: an ELF core of the guest's memory, the
guest paused meanwhile, as KubeVirt's) runs in the background, one at a time, as a task
of `run()`; each call answers the state of the dump of that file name, so the handler
simply asks again until it has ended.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from launcher.errors import CommandError
from shared import podlayout
from shared.model.meta import format_time, utc_now
from shared.wire.memorydump import DumpState, MemoryDumpArgs, MemoryDumpReply

log = structlog.get_logger("launcher.memorydump")


class DumpVirt(Protocol):
    """What a dump needs of libvirt (launcher.virt.Virt; fakes in unit tests)."""

    async def core_dump(self, name: str, path: str, *, timeout: float) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDumpConfig:
    disks_dir: Path = Path(podlayout.HOTPLUG_DISKS_DIR)
    timeout: float = 3600.0  # the longest a dump may take


class MemoryDumps:
    """At most one memory dump of one domain at a time."""

    def __init__(
        self,
        *,
        virt: DumpVirt,
        domain: Callable[[], str],
        config: MemoryDumpConfig,
        now: Callable[[], str] = lambda: format_time(utc_now()),
    ) -> None:
        self._virt = virt
        self._domain = domain
        self._config = config
        self._now = now
        self._requests: asyncio.Queue[MemoryDumpArgs] = asyncio.Queue(maxsize=1)
        self.last: MemoryDumpReply | None = None

    def request(self, args: MemoryDumpArgs) -> MemoryDumpReply:
        """The dump of `args.file_name`: started now unless it ran (or runs) already; while
        another dump runs, that one's state (the handler asks again later)."""
        last = self.last
        if last is not None and (
            last.file_name == args.file_name or last.state is DumpState.IN_PROGRESS
        ):
            return last
        self.last = MemoryDumpReply(
            file_name=args.file_name, state=DumpState.IN_PROGRESS, start_timestamp=self._now()
        )
        self._requests.put_nowait(args)
        return self.last

    async def run(self) -> None:
        while True:
            args = await self._requests.get()
            try:
                await self._dump(args)
            except Exception as exc:  # task boundary: a failed dump must not end the daemon
                log.exception("memory_dump_crashed")
                self._finish(reason=f"internal error: {exc}")

    async def _dump(self, args: MemoryDumpArgs) -> None:
        path = self._config.disks_dir / podlayout.hotplug_disk_file(args.volume)
        log.info("memory_dump_started", volume=args.volume, file=args.file_name)
        try:
            await self._virt.core_dump(self._domain(), str(path), timeout=self._config.timeout)
        except CommandError as exc:
            log.warning("memory_dump_failed", volume=args.volume, error=str(exc))
            self._finish(reason=f"Domain memory dump failed: {exc}")
            return
        log.info("memory_dump_completed", volume=args.volume, file=args.file_name)
        self._finish(reason=None)

    def _finish(self, *, reason: str | None) -> None:
        if self.last is None:
            return
        state = DumpState.COMPLETED if reason is None else DumpState.FAILED
        self.last = dataclasses.replace(
            self.last, state=state, end_timestamp=self._now(), reason=reason
        )
