"""What goes in and out of the libvirt door (launcher/virt.py) without libvirt itself:
events as the loop received them, migration requests, job figures, watchdog actions, so
the rest of the launcher and its unit tests use them without importing libvirt."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    """A libvirt lifecycle or agent event, as the loop received it."""

    domain: str
    event: str
    detail: int = 0
    agent_connected: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationRequest:
    """One peer-to-peer migration: where to, over which streams, with which definition."""

    dest_uri: str  # the destination daemon, e.g. qemu+unix:///system?socket=…
    migration_uri: str  # the memory stream, e.g. unix:///…/mem.sock
    dest_xml: str
    # The domain's name on the destination when it differs (a decentralized migration),
    # and its persistent definition then (dest_xml under that name); None: dest_xml's.
    dest_name: str | None = None
    persist_xml: str | None = None
    copy_disks: tuple[str, ...] = ()  # target devs whose top layer is copied (NBD)
    shared_disks: tuple[str, ...] = ()  # writable target devs both sides open (not copied)
    disks_uri: str | None = None
    bandwidth_mib: int = 0
    timeout: float = 300.0
    max_downtime_ms: int | None = None  # None: QEMU's own limit (300 ms)
    auto_converge: bool = False
    post_copy: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStats:
    elapsed_ms: int | None = None
    downtime_ms: int | None = None
    data_total: int | None = None
    data_processed: int | None = None
    data_remaining: int | None = None
    memory_dirty_rate: int | None = None
    memory_bps: int | None = None


# libvirt's virDomainEventWatchdogAction, as words.
WATCHDOG_ACTIONS = {0: "none", 1: "pause", 2: "reset", 3: "poweroff", 4: "shutdown",
                    5: "debug", 6: "inject-nmi"}  # fmt: skip


def watchdog_action(code: int) -> str:
    """libvirt's watchdog event action as a word."""
    return WATCHDOG_ACTIONS.get(code, f"action{code}")


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupJob:
    """A domain's backup job: running (with its progress), or how the last one ended
    (`completed` False with `error` when it failed; None when there has been none)."""

    running: bool = False
    completed: bool | None = None
    error: str = ""
    data_total: int | None = None
    data_processed: int | None = None
