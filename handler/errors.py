"""The handler's errors: one base class, and the typed sync failure that becomes a condition.

A reconcile that cannot do what the VMI asks raises `SyncError`; its `reason` is written
into the VMI's `Synchronized` condition (and, when `fatal`, into a Failed phase), so users
read why on the object instead of in the handler's log.
"""

from __future__ import annotations

from enum import StrEnum


class HandlerError(Exception):
    """Base class of every error raised by the handler."""


class StartupError(HandlerError):
    """The daemon cannot start (bad configuration, unusable paths)."""


class SyncReason(StrEnum):
    """Why a sync failed; the `reason` of the Synchronized=False condition."""

    LAUNCHER_NOT_READY = "LauncherNotReady"
    LAUNCHER_UNREACHABLE = "LauncherUnreachable"
    LAUNCHER_TIMEOUT = "LauncherTimeout"
    INVALID_SPEC = "InvalidSpec"
    HYPERVISOR_UNSUPPORTED = "HypervisorUnsupported"
    IMAGE_NOT_FOUND = "ImageNotFound"
    DISK_ERROR = "DiskError"
    LIBVIRT_ERROR = "LibvirtError"
    SYNC_FAILED = "SyncFailed"


class SyncError(HandlerError):
    """A sync step failed; `requeue` retries with backoff, `fatal` fails the VMI."""

    def __init__(
        self, reason: SyncReason, message: str, *, requeue: bool = True, fatal: bool = False
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.requeue = requeue
        self.fatal = fatal


class Superseded(HandlerError):
    """A status write no longer applies to the VMI on the server: another writer made it
    final meanwhile (the controller failed it: final is final), or a new VMI of the same
    name replaced it. The write is dropped; the next reconcile starts from the new state."""


class LauncherUnavailable(HandlerError):
    """No connection to the VMI's launcher right now (not ready yet, or reconnecting)."""
