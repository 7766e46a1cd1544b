"""Push-mode backups of the running guest's disks (KubeVirt's VirtualMachineBackup, the
launcher side): backup_begin starts one libvirt backup job with its checkpoint, and
backup_status follows it.

    begin:  live disks → base checkpoint still known? (else full, and why)
            → guest frozen (qemu-ga) → virDomainBackupBegin(<domainbackup>,
              <domaincheckpoint>) → thawed  (frozen only while the point in time is taken)
            → the job copies in the background into <target dir>/<volume>.qcow2
    status: running / completed / failed (libvirt's job stats); once completed, the base
            checkpoint is deleted (its bitmap merged away): the new one is the next base

Bitmaps live in qcow2 disks (launcher/backupxml.py) and checkpoints in this launcher's
libvirtd: a restart or a migration starts from a new libvirtd that knows none, so the next
backup falls back to full and says why (`full_reason`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from launcher.backupxml import BackupDisk, backup_disks, backup_xml, checkpoint_xml, target_file
from launcher.errors import AgentNotConnected, CommandError, DiskFailure, LibvirtFailure
from launcher.virttypes import BackupJob
from shared.wire.backup import BackupBeginArgs, BackupReply, BackupVolume, JobState

log = structlog.get_logger("launcher.backup")


class BackupVirt(Protocol):
    """What backups need of libvirt (launcher.virt.Virt; fakes in unit tests)."""

    async def domain_xml(self, name: str) -> str: ...
    async def backup_begin(self, name: str, backup_xml: str, checkpoint_xml: str) -> None: ...
    async def checkpoints(self, name: str) -> list[str]: ...
    async def delete_checkpoint(self, name: str, checkpoint: str) -> None: ...
    async def backup_job(self, name: str) -> BackupJob: ...
    async def fs_freeze(self, name: str) -> int: ...
    async def fs_thaw(self, name: str) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class _Started:
    """The backup this launcher started last."""

    target_dir: str
    checkpoint: str | None
    base: str | None
    volumes: tuple[BackupVolume, ...]
    full_reason: str


class Backups:
    """Starts and follows the domain's backup jobs."""

    def __init__(
        self,
        *,
        virt: BackupVirt,
        domain: Callable[[], str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._virt = virt
        self._domain = domain
        self._clock = clock
        self._started: _Started | None = None

    async def begin(self, args: BackupBeginArgs) -> BackupReply:
        """Start the backup job; answers Running with the disks and the checkpoint made.
        The same backup asked again (a controller that did not see its first answer) is
        answered with its state, not started twice."""
        if self._started is not None and self._started.target_dir == args.target_dir:
            return await self.status()
        name = self._domain()
        disks = list(backup_disks(await self._virt.domain_xml(name)))
        if not disks:
            raise DiskFailure("the VM has no writable disk to back up")
        target = Path(args.target_dir)
        if not target.parent.is_dir():
            raise DiskFailure(f"the target claim is not mounted at {target.parent}")
        try:
            target.mkdir(exist_ok=True)  # one directory per backup: a claim holds a chain
        except OSError as e:
            raise DiskFailure(f"cannot make {target} on the target claim: {e}") from e
        base, full_reason = await self._base(name, args.incremental, disks)
        tracked = any(d.tracked for d in disks)
        checkpoint = args.checkpoint if tracked else None
        backup = backup_xml(disks, target_dir=args.target_dir, incremental=base)
        cp_xml = checkpoint_xml(args.checkpoint, disks) if checkpoint else ""
        frozen_for = await self._begin_frozen(name, backup, cp_xml, skip=args.skip_quiesce)
        volumes = tuple(
            BackupVolume(
                volume=d.volume,
                target=d.target,
                file=Path(target_file(args.target_dir, d)).name,
                incremental=bool(base) and d.tracked,
            )
            for d in disks
        )
        self._started = _Started(
            target_dir=args.target_dir,
            checkpoint=checkpoint,
            base=base,
            volumes=volumes,
            full_reason=full_reason,
        )
        log.info("backup_started", checkpoint=checkpoint, base=base, frozen_s=frozen_for)
        return self._reply(JobState.RUNNING, frozen_seconds=frozen_for)

    async def status(self) -> BackupReply:
        """The job's state; a completed job's base checkpoint is deleted (best effort)."""
        started = self._started
        if started is None:
            raise LibvirtFailure("no backup was started by this launcher")
        name = self._domain()
        job = await self._virt.backup_job(name)
        if job.running:
            return self._reply(JobState.RUNNING, total=job.data_total)
        if job.completed is not True:
            message = job.error or "the backup job is gone without a result"
            return self._reply(JobState.FAILED, message=message)
        if started.base:
            try:
                await self._virt.delete_checkpoint(name, started.base)
            except CommandError as e:  # the new checkpoint is the base from now on anyway
                log.warning("base_checkpoint_not_deleted", base=started.base, error=str(e))
            self._started = dataclasses.replace(started, base=None)
        return self._reply(JobState.COMPLETED, total=job.data_total)

    async def _base(
        self, name: str, incremental: str | None, disks: list[BackupDisk]
    ) -> tuple[str | None, str]:
        """The base checkpoint to copy from, or None and why the backup is full."""
        if not incremental:
            return None, ""
        if not any(d.tracked for d in disks):
            return None, "no disk of the VM can carry a dirty bitmap (raw disks only)"
        if incremental not in await self._virt.checkpoints(name):
            return None, (
                f"checkpoint {incremental!r} is unknown to the VM's libvirt: the VM restarted "
                "or migrated since (its checkpoints live in the launcher)"
            )
        return incremental, ""

    async def _begin_frozen(self, name: str, backup: str, cp_xml: str, *, skip: bool) -> float:
        """backupBegin with the guest's filesystems frozen around it (when it has an agent
        and the backup does not skip quiescing); how long the guest was frozen."""
        frozen = False
        if not skip:
            try:
                await self._virt.fs_freeze(name)
                frozen = True
            except AgentNotConnected:
                log.info("backup_without_freeze", reason="no guest agent")
        started = self._clock()
        try:
            await self._virt.backup_begin(name, backup, cp_xml)
        finally:
            if frozen:
                await self._virt.fs_thaw(name)
        return self._clock() - started if frozen else 0.0

    def _reply(
        self,
        state: JobState,
        *,
        message: str = "",
        total: int | None = None,
        frozen_seconds: float | None = None,
    ) -> BackupReply:
        started = self._started
        assert started is not None  # every caller has one
        return BackupReply(
            state=state,
            checkpoint=started.checkpoint,
            volumes=started.volumes,
            message=message,
            bytes_total=total,
            full_reason=started.full_reason,
            frozen_seconds=frozen_seconds,
        )
