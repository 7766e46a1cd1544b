"""libvirt's answers read into the launcher's types, without importing libvirt (only
launcher/virt.py does): a state's reason code as a word, a job's statistics."""

from __future__ import annotations

from typing import Any

from launcher.virttypes import JobStats
from shared.wire.domain import DomainState

# libvirt's virDomain*Reason enums, per state (codes are libvirt's stable ABI).
_REASONS: dict[DomainState, dict[int, str]] = {
    DomainState.RUNNING: {
        1: "Booted", 2: "Migrated", 3: "Restored", 4: "FromSnapshot", 5: "Unpaused",
        6: "MigrationCanceled", 7: "SaveCanceled", 8: "Wakeup", 9: "Crashed", 10: "PostCopy",
    },
    DomainState.PAUSED: {
        1: "User", 2: "Migration", 3: "Save", 4: "Dump", 5: "IOError", 6: "Watchdog",
        7: "FromSnapshot", 8: "ShuttingDown", 9: "Snapshot", 10: "Crashed", 11: "StartingUp",
        12: "PostCopy", 13: "PostCopyFailed",
    },
    DomainState.SHUTOFF: {
        1: "Shutdown", 2: "Destroyed", 3: "Crashed", 4: "Migrated", 5: "Saved", 6: "Failed",
        7: "FromSnapshot", 8: "DaemonDown",
    },
    DomainState.SHUTDOWN: {1: "User"},
    DomainState.CRASHED: {1: "Panicked"},
}  # fmt: skip


def reason_name(state: DomainState, reason: int) -> str:
    """libvirt's reason code for a state, as a word (Unknown when unlisted)."""
    return _REASONS.get(state, {}).get(reason, "Unknown")


def opt(raw: dict[str, Any], key: str) -> int | None:
    """An optional integer field of a libvirt typed-parameter dict."""
    value = raw.get(key)
    return int(value) if value is not None else None


def job_stats(raw: dict[str, Any]) -> JobStats:
    """virDomainGetJobStats' parameters as JobStats."""
    return JobStats(
        elapsed_ms=opt(raw, "time_elapsed"),
        downtime_ms=opt(raw, "downtime"),
        data_total=opt(raw, "data_total"),
        data_processed=opt(raw, "data_processed"),
        data_remaining=opt(raw, "data_remaining"),
        memory_dirty_rate=opt(raw, "memory_dirty_rate"),
        memory_bps=opt(raw, "memory_bps"),
    )
