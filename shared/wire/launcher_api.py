"""The launcher's command set: method names, their timeout tiers, and typed arguments.

The handler (client) and the launcher (server) both import this table, so a method
and its tier are written down once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from shared.wire.client import Tier
from shared.wire.errors import InvalidArgument

LAUNCHER_INIT_SOCKET = "launcher-init-sock"
LAUNCHER_SOCKET = "launcher-sock"
NOTIFY_METHOD = "domain_event"


class Method(StrEnum):
    PING = "ping"
    SYNC = "sync"
    PAUSE = "pause"
    UNPAUSE = "unpause"
    SHUTDOWN = "shutdown"
    KILL = "kill"
    DELETE = "delete"
    SOFT_REBOOT = "soft_reboot"
    GET_DOMAIN = "get_domain"
    GET_DOMAIN_STATS = "get_domain_stats"
    GUEST_PING = "guest_ping"
    GET_GUEST_INFO = "get_guest_info"
    GET_USERS = "get_users"
    GET_FILESYSTEMS = "get_filesystems"
    GET_INTERFACES = "get_interfaces"
    FREEZE = "freeze"
    UNFREEZE = "unfreeze"
    RESET = "reset"
    PREPARE_MIGRATION_TARGET = "prepare_migration_target"
    MIGRATE = "migrate"
    CANCEL_MIGRATION = "cancel_migration"


TIERS: Mapping[Method, Tier] = {
    Method.PING: Tier.SHORT,
    Method.SYNC: Tier.LONG,
    Method.PAUSE: Tier.MEDIUM,
    Method.UNPAUSE: Tier.MEDIUM,
    Method.SHUTDOWN: Tier.MEDIUM,
    Method.KILL: Tier.MEDIUM,
    Method.DELETE: Tier.MEDIUM,
    Method.SOFT_REBOOT: Tier.MEDIUM,
    Method.GET_DOMAIN: Tier.SHORT,
    Method.GET_DOMAIN_STATS: Tier.SHORT,
    Method.GUEST_PING: Tier.SHORT,
    Method.GET_GUEST_INFO: Tier.MEDIUM,
    Method.GET_USERS: Tier.MEDIUM,
    Method.GET_FILESYSTEMS: Tier.MEDIUM,
    Method.GET_INTERFACES: Tier.MEDIUM,
    Method.FREEZE: Tier.MEDIUM,
    Method.UNFREEZE: Tier.MEDIUM,
    Method.RESET: Tier.MEDIUM,
    Method.PREPARE_MIGRATION_TARGET: Tier.LONG,
    Method.MIGRATE: Tier.MEDIUM,
    Method.CANCEL_MIGRATION: Tier.MEDIUM,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncArgs:
    """Sync: the VMI as a Kubernetes dict; the launcher parses and validates it."""

    vmi: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"vmi": dict(self.vmi)}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        vmi = args.get("vmi")
        if not isinstance(vmi, Mapping):
            raise InvalidArgument("vmi", "expected the VirtualMachineInstance as a map")
        return cls(vmi=vmi)


@dataclass(frozen=True, slots=True, kw_only=True)
class FreezeArgs:
    """Freeze: thaw by itself after this many seconds (0: only on unfreeze)."""

    unfreeze_timeout_seconds: float

    def to_wire(self) -> dict[str, Any]:
        return {"unfreezeTimeoutSeconds": self.unfreeze_timeout_seconds}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        extra = sorted(set(args) - {"unfreezeTimeoutSeconds"})
        if extra:
            raise InvalidArgument(extra[0], "unknown argument")
        value = args.get("unfreezeTimeoutSeconds")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidArgument("unfreezeTimeoutSeconds", "a number of seconds ≥ 0 is required")
        return cls(unfreeze_timeout_seconds=float(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class NoArgs:
    """Commands that take nothing; unknown keys are refused so typos surface."""

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        if args:
            raise InvalidArgument(sorted(args)[0], "this method takes no arguments")
        return cls()
