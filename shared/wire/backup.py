"""backup_begin / backup_status: a push-mode libvirt backup of a running guest's disks into
a directory of a target claim, and its progress (KubeVirt's VirtualMachineBackup, the
launcher side).

    controller ──PUT …/virtualmachineinstances/<name>/backup {BackupRequest}──▶ virt-api
      ──▶ handler: mounts the target claim (its pod's volume on this node) into the launcher
          pod's hotplug-disks volume as `backup-<name>/`, then
      ──▶ launcher: backup_begin {BackupBeginArgs} → {BackupReply}
    controller ──PUT …/backup {BackupRequest, cmd: Status}──▶ … ──▶ backup_status
      (the handler unmounts the claim once the launcher answers a final state)

One contract for the three hops: the controller's body (BackupRequest, camelCase as the
rest of the API), what the handler sends the launcher (BackupBeginArgs), and the answer
(BackupReply), written once here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from shared.wire.errors import InvalidArgument

BACKUP_DIR_PREFIX = "backup-"  # the claim's directory in the launcher's hotplug-disks volume
MAX_NAME = 200


class BackupCmd(enum.StrEnum):
    """What the controller asks (KubeVirt's BackupCmd, plus Status: the job's progress)."""

    START = "Start"
    STATUS = "Status"


class JobState(enum.StrEnum):
    """The launcher's backup job: running, or how it ended."""

    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"

    @property
    def final(self) -> bool:
        """Completed or Failed: the target claim may be released."""
        return self is not JobState.RUNNING


def _text(args: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise InvalidArgument(key, f"expected a non-empty string of at most {MAX_NAME} characters")
    if "/" in value or value in (".", ".."):
        raise InvalidArgument(key, "must not contain '/' or be '.' or '..'")
    return value


def _flag(args: Mapping[str, Any], key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(key, "expected a boolean")
    return value


def _known(args: Mapping[str, Any], keys: set[str]) -> None:
    unknown = sorted(set(args) - keys)
    if unknown:
        raise InvalidArgument(unknown[0], "unknown argument")


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupRequest:
    """The controller's body: the backup's name (its directory on the claim), the new
    checkpoint, the base checkpoint of an incremental one, and the target claim's pod (in
    the VMI's namespace, on its node: the handler mounts its volume)."""

    cmd: BackupCmd = BackupCmd.START
    backup_name: str
    checkpoint: str | None = None
    incremental: str | None = None
    skip_quiesce: bool = False
    target_pod: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"cmd": str(self.cmd), "backupName": self.backup_name}
        for key, value in (
            ("checkpoint", self.checkpoint),
            ("incremental", self.incremental),
            ("targetPod", self.target_pod),
        ):
            if value:
                wire[key] = value
        if self.skip_quiesce:
            wire["skipQuiesce"] = True
        return wire

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        keys = {"cmd", "backupName", "checkpoint", "incremental", "skipQuiesce", "targetPod"}
        _known(args, keys)
        try:
            cmd = BackupCmd(args.get("cmd") or BackupCmd.START)
        except ValueError:
            raise InvalidArgument("cmd", f"one of {[str(c) for c in BackupCmd]}") from None
        start = cmd is BackupCmd.START
        return cls(
            cmd=cmd,
            backup_name=str(_text(args, "backupName")),
            checkpoint=_text(args, "checkpoint", required=start),
            incremental=_text(args, "incremental", required=False),
            skip_quiesce=_flag(args, "skipQuiesce"),
            target_pod=_text(args, "targetPod", required=start),
        )


def backup_dir(backup_name: str) -> str:
    """The target claim's directory in the launcher pod's hotplug-disks volume."""
    return f"{BACKUP_DIR_PREFIX}{backup_name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupBeginArgs:
    """backup_begin: where the disks go (a directory in the launcher's pod), the checkpoint
    to create, the base checkpoint (None: full), and whether to skip the guest freeze."""

    target_dir: str
    checkpoint: str
    incremental: str | None = None
    skip_quiesce: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "targetDir": self.target_dir,
            "checkpoint": self.checkpoint,
            "skipQuiesce": self.skip_quiesce,
        }
        if self.incremental:
            wire["incremental"] = self.incremental
        return wire

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        _known(args, {"targetDir", "checkpoint", "incremental", "skipQuiesce"})
        target = args.get("targetDir")
        if not isinstance(target, str) or not target.startswith("/"):
            raise InvalidArgument("targetDir", "expected an absolute path")
        return cls(
            target_dir=target,
            checkpoint=str(_text(args, "checkpoint")),
            incremental=_text(args, "incremental", required=False),
            skip_quiesce=_flag(args, "skipQuiesce"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupVolume:
    """A disk in the backup: its volume, target, file on the claim, and how it was copied
    (full, or only the blocks changed since the base checkpoint)."""

    volume: str
    target: str
    file: str
    incremental: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "volume": self.volume,
            "target": self.target,
            "file": self.file,
            "incremental": self.incremental,
        }

    @classmethod
    def from_wire(cls, raw: Any) -> Self:
        if not isinstance(raw, Mapping):
            raise InvalidArgument("volumes", "expected a list of maps")
        return cls(
            volume=str(raw.get("volume") or ""),
            target=str(raw.get("target") or ""),
            file=str(raw.get("file") or ""),
            incremental=raw.get("incremental") is True,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupReply:
    """The job's state, the checkpoint it made, its disks, and why it is not incremental
    (or failed) when it is not."""

    state: JobState
    checkpoint: str | None = None
    volumes: tuple[BackupVolume, ...] = ()
    message: str = ""
    bytes_total: int | None = None
    full_reason: str = ""  # set when an incremental backup was asked and a full one made
    frozen_seconds: float | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "state": str(self.state),
            "volumes": [v.to_wire() for v in self.volumes],
            "message": self.message,
            "fullReason": self.full_reason,
        }
        for key, value in (
            ("checkpoint", self.checkpoint),
            ("bytesTotal", self.bytes_total),
            ("frozenSeconds", self.frozen_seconds),
        ):
            if value is not None:
                wire[key] = value
        return wire

    @classmethod
    def from_wire(cls, reply: Any) -> Self:
        if not isinstance(reply, Mapping):
            raise InvalidArgument("reply", "expected a map")
        try:
            state = JobState(str(reply.get("state")))
        except ValueError:
            raise InvalidArgument("state", f"one of {[str(s) for s in JobState]}") from None
        total = reply.get("bytesTotal")
        frozen = reply.get("frozenSeconds")
        return cls(
            state=state,
            checkpoint=reply.get("checkpoint") or None,
            volumes=tuple(BackupVolume.from_wire(v) for v in reply.get("volumes") or ()),
            message=str(reply.get("message") or ""),
            bytes_total=total if isinstance(total, int) else None,
            full_reason=str(reply.get("fullReason") or ""),
            frozen_seconds=float(frozen) if isinstance(frozen, int | float) else None,
        )
