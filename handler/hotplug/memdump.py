"""Memory dump volumes, the handler's half (KubeVirt's flow): the claim the attachment pod
mounted on this node gets the dump's file, which is bind-mounted into the launcher pod as
the volume's file; the launcher dumps the guest's memory into it.

    AttachedToNode → older dumps on the claim removed, `<vmi>-<claim>-<YYYYMMDD-HHMMSS>
                     .memory.dump` made (owned by the launchers' user) and bind-mounted
                     → MemoryDumpInProgress (memoryDumpVolume.targetFileName)
    MemoryDumpInProgress → memory_dump on the launcher, asked again until it ended
                     → MemoryDumpCompleted | MemoryDumpFailed (the launcher's reason)

The VM controller removes the volume once the dump ended; the handler then only unmounts
(the guest never had a device for it).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import structlog

from handler import commands
from handler.errors import HandlerError, SyncError
from handler.hotplug import pvc
from handler.hotplug.mounts import MountPort
from handler.launchers import LauncherPort
from shared.model import VirtualMachineInstance
from shared.model.volumestatus import (
    DomainMemoryDumpInfo,
    VolumePhase,
    VolumeReason,
    VolumeStatus,
)
from shared.wire.memorydump import DumpState, MemoryDumpArgs

log = structlog.get_logger("handler.hotplug.memdump")

DUMP_SUFFIX = ".memory.dump"
STARTING = frozenset({VolumePhase.ATTACHED_TO_NODE, VolumePhase.MOUNTED_TO_POD})


@dataclass(frozen=True, slots=True, kw_only=True)
class DumpContext:
    """Where a dump goes: the node's pods dir, the mount table, the launcher pod's file
    for the volume, and now."""

    pods_dir: Path
    mounts: MountPort
    target: Path
    now: datetime


def dump_file_name(vmi: str, volume: str, now: datetime) -> str:
    """KubeVirt's name for a dump: `<vmi>-<volume>-<YYYYMMDD-HHMMSS>.memory.dump`."""
    return f"{vmi}-{volume}-{now.strftime('%Y%m%d-%H%M%S')}{DUMP_SUFFIX}"


async def sync_entry(
    vmi: VirtualMachineInstance,
    entry: VolumeStatus,
    launcher: LauncherPort,
    ctx: DumpContext,
) -> tuple[VolumeStatus, bool]:
    """The entry's next state, and whether to look again soon (a dump on its way)."""
    if entry.phase in STARTING:
        try:
            entry = _mount(vmi, entry, ctx)
        except (HandlerError, OSError) as exc:
            return _with(entry, reason=VolumeReason.MOUNT_FAILED, message=str(exc)), True
    if entry.phase is not VolumePhase.MEMORY_DUMP_IN_PROGRESS:
        return entry, False
    return await _progress(entry, launcher)


def _mount(vmi: VirtualMachineInstance, entry: VolumeStatus, ctx: DumpContext) -> VolumeStatus:
    name = entry.name or ""
    info = entry.memory_dump_volume or DomainMemoryDumpInfo(claim_name=name)
    root = pvc.claim_root(info.claim_name or name, entry, pods_dir=ctx.pods_dir)
    file_name = dump_file_name(vmi.name, name, ctx.now)
    if not ctx.mounts.is_mounted(ctx.target):
        for old in root.glob(f"*{DUMP_SUFFIX}"):
            old.unlink(missing_ok=True)  # one dump per claim, as KubeVirt keeps it
        dump = root / file_name
        os.close(os.open(dump, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o660))
        pvc.hand_over(dump)
        ctx.mounts.bind(dump, ctx.target)
        log.info("memory_dump_file_mounted", volume=name, file=file_name)
    return _with(
        entry,
        phase=VolumePhase.MEMORY_DUMP_IN_PROGRESS,
        reason=VolumeReason.MOUNTED_TO_POD,
        message=f"Memory dump Volume {name} is attached, getting memory dump",
        memory_dump_volume=dataclasses.replace(info, target_file_name=file_name),
    )


async def _progress(entry: VolumeStatus, launcher: LauncherPort) -> tuple[VolumeStatus, bool]:
    name = entry.name or ""
    info = entry.memory_dump_volume or DomainMemoryDumpInfo()
    args = MemoryDumpArgs(volume=name, file_name=info.target_file_name or "")
    try:
        reply = await commands.memory_dump(launcher, args)
    except SyncError as exc:
        return _with(entry, message=exc.message), True
    if reply.file_name != args.file_name:
        return entry, True  # an earlier dump still runs
    info = dataclasses.replace(info, start_timestamp=reply.start_timestamp)
    if reply.state is DumpState.IN_PROGRESS:
        return _with(entry, memory_dump_volume=info), True
    info = dataclasses.replace(info, end_timestamp=reply.end_timestamp)
    if reply.state is DumpState.FAILED:
        log.warning("memory_dump_failed", volume=name, reason=reply.reason)
        return _with(
            entry,
            phase=VolumePhase.MEMORY_DUMP_FAILED,
            message=f"Memory dump to pvc {name} failed: {reply.reason}",
            memory_dump_volume=info,
        ), False
    return _with(
        entry,
        phase=VolumePhase.MEMORY_DUMP_COMPLETED,
        reason=VolumeReason.READY,
        message=f"Memory dump to Volume {name} has completed successfully",
        memory_dump_volume=info,
    ), False


def _with(entry: VolumeStatus, **changes: object) -> VolumeStatus:
    return dataclasses.replace(entry, **changes)  # type: ignore[arg-type]
