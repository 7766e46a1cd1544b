"""Live migration, both ends: the target's endpoint and the source's background job.

The target's endpoint (the short link the source reaches it by) is
launcher.migration_endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import structlog

from launcher import migxml
from launcher.errors import LibvirtFailure, MigrationFailure
from launcher.migration_endpoint import (
    LINK_ROOT,
    Endpoint,
    close_endpoint,
    open_endpoint,
)
from launcher.migration_stall import StallWatch, completion_reason, stall_reason
from launcher.virttypes import JobStats, MigrationRequest
from shared.model import format_time, utc_now
from shared.wire.migration import (
    MigrateArgs,
    MigrationInfo,
    MigrationPhase,
    MigrationRole,
    PrepareTargetResult,
)

log = structlog.get_logger("launcher.migration")

PROGRESS_INTERVAL = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DowntimePolicy:
    """How long QEMU may pause the guest at the switch-over.

    QEMU's default limit (300 ms) lets it switch over while tens of MiB are still unsent
    (it estimates the stream's bandwidth optimistically), and sending them then took
    ~200 ms of real downtime here. A low limit keeps it iterating until little is left;
    a guest that dirties memory too fast to ever get there gets the relaxed limit after
    `relax_after_polls` progress polls instead of running into the timeout."""

    initial_ms: int = 50
    relaxed_ms: int = 300
    relax_after_polls: int = 10


class MigrationPort(Protocol):
    """What the source job needs of libvirt (launcher.virt.Virt)."""

    async def migratable_xml(self, name: str) -> str: ...
    async def migrate(self, name: str, request: MigrationRequest) -> None: ...
    async def abort_job(self, name: str) -> None: ...
    async def job_stats(self, name: str, *, completed: bool = False) -> JobStats: ...
    async def set_max_downtime(self, name: str, milliseconds: int) -> None: ...
    async def block_capacity(self, name: str, target: str) -> int: ...


Publish = Callable[[MigrationInfo], None]


class SourceMigrator:
    """Runs at most one outgoing migration at a time, as a task of `run()`'s TaskGroup."""

    def __init__(
        self,
        *,
        virt: MigrationPort,
        domain: str,
        publish: Publish,
        downtime: DowntimePolicy | None = None,
        progress_interval: float = PROGRESS_INTERVAL,
        shared_disks: Callable[[], Mapping[str, str]] = dict,
        session: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._virt = virt
        self._clock = clock
        # The current job's progress (progressTimeout), and its stall reason once aborted.
        self._watch = StallWatch(timeout=None, started=clock())
        self._stalled: str | None = None
        self._session = session
        self._shared_disks = shared_disks
        self._domain = domain
        self._publish = publish
        self._downtime = downtime or DowntimePolicy()
        self._interval = progress_interval
        self._requests: asyncio.Queue[MigrateArgs] = asyncio.Queue(maxsize=1)
        self.info: MigrationInfo | None = None

    @property
    def busy(self) -> bool:
        return self.info is not None and not self.info.phase.is_final()

    def start(self, args: MigrateArgs) -> MigrationInfo:
        """Accept a migration; it starts at once in the background."""
        if self.busy:
            raise MigrationFailure("a migration of this domain is already in progress")
        self._set(
            MigrationInfo(
                role=MigrationRole.SOURCE,
                phase=MigrationPhase.SCHEDULED,
                target_address=args.address,
                start_timestamp=format_time(utc_now()),
            )
        )
        self._requests.put_nowait(args)
        assert self.info is not None
        return self.info

    async def cancel(self) -> MigrationInfo:
        """Abort the running migration (libvirt's abortJob); the guest stays here."""
        if self.info is None or not self.busy:
            raise MigrationFailure("no migration in progress")
        self._set(replace(self.info, abort_requested=True))
        await self._abort()
        return self.info

    async def _abort(self, *, attempts: int = 60, interval: float = 0.05) -> None:
        """abortJob, retried while libvirt has not begun the job yet ("no job is active")."""
        for _ in range(attempts):
            if self.info is None or self.info.phase is not MigrationPhase.RUNNING:
                return  # not started (the job sees abort_requested) or already over
            try:
                await self._virt.abort_job(self._domain)
                return
            except LibvirtFailure as exc:
                log.info("migration_abort_retry", error=exc.message)
            await asyncio.sleep(interval)
        raise MigrationFailure("libvirt did not accept the abort")

    async def run(self) -> None:
        while True:
            args = await self._requests.get()
            try:
                await self._migrate(args)
            except Exception as exc:  # task boundary: a failed job must not end the daemon
                log.exception("migration_job_crashed")
                self._finish(failure=f"internal error: {exc}")

    async def _migrate(self, args: MigrateArgs) -> None:
        assert self.info is not None
        if self.info.abort_requested:
            self._finish(failure="aborted before it started", aborted=True)
            return
        endpoint = Endpoint(address=Path(args.address), session=self._session)
        request = await self._request(endpoint, args)
        self._set(replace(self.info, phase=MigrationPhase.RUNNING))
        self._watch = StallWatch(timeout=args.progress_timeout_seconds, started=self._clock())
        self._stalled = None
        log.info(
            "migration_started",
            target=args.address,
            disks=list(request.copy_disks),
            shared_disks=list(request.shared_disks),
            bandwidth_mib=request.bandwidth_mib,
            timeout_seconds=request.timeout,
            progress_timeout_seconds=args.progress_timeout_seconds,
            auto_converge=request.auto_converge,
            post_copy=request.post_copy,
        )
        started = time.monotonic()
        failure = await self._run_job(request)
        if failure is not None:
            await self._after_failure(failure, completion_timeout=request.timeout)
            return
        stats = await self._completed_stats()
        log.info("migration_succeeded", seconds=round(time.monotonic() - started, 3))
        self._finish(stats=stats)

    async def _run_job(self, request: MigrationRequest) -> str | None:
        """Migrate while polling progress; the failure's text, or None on success."""
        failure: str | None = None
        try:
            async with asyncio.TaskGroup() as tg:
                progress = tg.create_task(self._progress())
                try:
                    await self._virt.migrate(self._domain, request)
                finally:
                    progress.cancel()
        except* Exception as group:  # libvirt refused or timed out (typed launcher errors)
            failure = str(group.exceptions[0])
        return failure

    async def _request(self, endpoint: Endpoint, args: MigrateArgs) -> MigrationRequest:
        try:
            target_xml = args.domain_xml or endpoint.xml_file.read_text()
            dest_xml = migxml.destination_xml(
                await self._virt.migratable_xml(self._domain), target_xml
            )
        except (OSError, migxml.XmlMismatch) as exc:
            raise MigrationFailure(f"cannot use the target at {args.address}: {exc}") from exc
        # A volume migration's disks are copied to the target's new claims, each seen by
        # the guest at the size it has here (docs/volume-migration.md).
        moved = {d for d, vol in self._shared_disks().items() if vol in args.migrated_volumes}
        if moved:
            sizes = {d: await self._virt.block_capacity(self._domain, d) for d in sorted(moved)}
            dest_xml = migxml.with_slices(dest_xml, sizes)
        writable = migxml.writable_disks(dest_xml)
        shared = set(self._shared_disks()) - moved
        name = migxml.domain_name(target_xml)
        dest_name = name if name and name != self._domain else None
        return MigrationRequest(
            dest_uri=endpoint.libvirt_uri,
            migration_uri=endpoint.migration_uri,
            dest_xml=dest_xml,
            dest_name=dest_name,
            persist_xml=migxml.renamed(dest_xml, dest_name) if dest_name else None,
            copy_disks=tuple(d for d in writable if d not in shared),
            shared_disks=tuple(d for d in writable if d in shared),
            disks_uri=endpoint.disks_uri,
            bandwidth_mib=args.bandwidth_mib,
            timeout=float(args.timeout_seconds),
            max_downtime_ms=self._downtime.initial_ms,
            auto_converge=args.allow_auto_converge,
            post_copy=args.allow_post_copy,
        )

    async def _after_failure(self, failure: str, *, completion_timeout: float) -> None:
        """A stalled job (progressTimeout, already aborted) or one past its completion
        timeout (aborted here) ends with KubeVirt's reason and counts as timed out."""
        assert self.info is not None
        aborted = self.info.abort_requested
        reason, timed_out = failure, False
        if self._stalled is not None:
            reason, timed_out = self._stalled, True
        elif not aborted and "timed out" in failure:
            with contextlib.suppress(Exception):
                await self._virt.abort_job(self._domain)
            reason, timed_out = completion_reason(completion_timeout), True
        log.warning("migration_failed", reason=reason, aborted=aborted, error=failure)
        self._finish(failure=reason, aborted=aborted, timed_out=timed_out)

    async def _progress(self) -> None:
        polls = 0
        while True:
            await asyncio.sleep(self._interval)
            polls += 1
            try:
                await self._poll()
                if polls == self._downtime.relax_after_polls:
                    await self._relax()
            except Exception as exc:  # the job may end between two polls
                log.info("migration_progress_unavailable", error=str(exc))

    async def _relax(self) -> None:
        """Not converged yet: allow QEMU's usual pause rather than never switching over."""
        relaxed = self._downtime.relaxed_ms
        await self._virt.set_max_downtime(self._domain, relaxed)
        log.info("migration_downtime_relaxed", max_downtime_ms=relaxed)

    async def _poll(self) -> None:
        stats = await self._virt.job_stats(self._domain)
        if self.info is not None and self.info.phase is MigrationPhase.RUNNING:
            self._set(_with_stats(self.info, stats))
            if self.info.abort_requested:
                # An abort that landed before QEMU began streaming was a no-op.
                await self._virt.abort_job(self._domain)
            else:
                await self._abort_if_stalled(stats)

    async def _abort_if_stalled(self, stats: JobStats) -> None:
        """KubeVirt's progressTimeout: no progress for that long aborts the job, which then
        fails with the stall as its reason (the guest stays here)."""
        now = self._clock()
        self._watch.saw(stats, now=now)
        seconds = self._watch.stalled_for(now=now)
        if seconds is None or self._stalled is not None:
            return
        log.warning(
            "migration_stalled",
            seconds=seconds,
            progress_timeout_seconds=self._watch.timeout,
            data_processed=stats.data_processed,
            data_remaining=stats.data_remaining,
        )
        await self._virt.abort_job(self._domain)
        self._stalled = stall_reason(seconds)

    async def _completed_stats(self) -> JobStats | None:
        try:
            return await self._virt.job_stats(self._domain, completed=True)
        except Exception:  # figures are a bonus; the migration itself succeeded
            return None

    def _finish(
        self,
        *,
        failure: str | None = None,
        aborted: bool = False,
        timed_out: bool = False,
        stats: JobStats | None = None,
    ) -> None:
        assert self.info is not None
        info = replace(
            self.info,
            phase=MigrationPhase.FAILED if failure else MigrationPhase.SUCCEEDED,
            failure_reason=failure,
            aborted=aborted,
            timed_out=timed_out,
            end_timestamp=format_time(utc_now()),
        )
        self._set(_with_stats(info, stats) if stats is not None else info)

    def _set(self, info: MigrationInfo) -> None:
        self.info = info
        self._publish(info)


def _with_stats(info: MigrationInfo, stats: JobStats) -> MigrationInfo:
    return replace(
        info,
        elapsed_ms=stats.elapsed_ms if stats.elapsed_ms is not None else info.elapsed_ms,
        downtime_ms=stats.downtime_ms if stats.downtime_ms is not None else info.downtime_ms,
        data_total=stats.data_total,
        data_processed=stats.data_processed,
        data_remaining=stats.data_remaining,
    )


class ManagerPort(Protocol):
    """What the migration commands need of the DomainManager."""

    async def prepare_target(self, raw_vmi: object) -> str: ...

    def set_migration(self, info: MigrationInfo) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointConfig:
    libvirt_root: Path  # the private daemon's root (sock/, run/ under it)
    short_id: str
    link_root: Path = LINK_ROOT  # a non-root launcher's is under its private dir
    session: bool = False


class Migrations:
    """The launcher's migration commands: prepare (target), migrate and cancel (source)."""

    def __init__(
        self, *, manager: ManagerPort, source: SourceMigrator, endpoint: EndpointConfig
    ) -> None:
        self._manager = manager
        self.source = source
        self._config = endpoint
        self.endpoint: Endpoint | None = None

    async def prepare_target(self, raw_vmi: object) -> PrepareTargetResult:
        xml = await self._manager.prepare_target(raw_vmi)
        close_endpoint(self.endpoint)
        cfg = self._config
        self.endpoint = open_endpoint(
            cfg.libvirt_root,
            short_id=cfg.short_id,
            xml=xml,
            link_root=cfg.link_root,
            session=cfg.session,
        )
        ep = self.endpoint
        log.info("migration_target_prepared", address=str(ep.address))
        return PrepareTargetResult(
            address=str(ep.address),
            libvirt_uri=ep.libvirt_uri,
            migration_uri=ep.migration_uri,
            disks_uri=ep.disks_uri,
            domain_xml=xml,
        )

    def migrate(self, args: MigrateArgs) -> MigrationInfo:
        return self.source.start(args)

    async def cancel(self) -> MigrationInfo:
        return await self.source.cancel()

    def close(self) -> None:
        close_endpoint(self.endpoint)
        self.endpoint = None
