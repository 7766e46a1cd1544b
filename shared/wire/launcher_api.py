"""The launcher's command set: method names, their timeout tiers, and typed arguments.

The handler (client) and the launcher (server) both import this table, so a method
and its tier are written down once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from shared.model.volumes import DEFAULT_HOTPLUG_BUS, HOTPLUG_BUSES
from shared.wire.client import Tier
from shared.wire.errors import InvalidArgument

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
    GUEST_EXEC = "guest_exec"
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
    ATTACH_VOLUME = "attach_volume"
    DETACH_VOLUME = "detach_volume"
    FORWARD_PORT = "forward_port"
    EXPAND_DISKS = "expand_disks"
    HOTPLUG_RESOURCES = "hotplug_resources"  # shared/wire/resources.py
    SET_LINK_STATES = "set_link_states"  # shared/wire/links.py
    BACKUP_BEGIN = "backup_begin"  # shared/wire/backup.py
    BACKUP_STATUS = "backup_status"
    MEMORY_DUMP = "memory_dump"  # shared/wire/memorydump.py
    SYNC_INTERFACES = "sync_interfaces"  # shared/wire/nics.py


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
    Method.GUEST_EXEC: Tier.MEDIUM,
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
    Method.ATTACH_VOLUME: Tier.MEDIUM,
    Method.DETACH_VOLUME: Tier.MEDIUM,
    Method.FORWARD_PORT: Tier.MEDIUM,
    Method.EXPAND_DISKS: Tier.MEDIUM,
    Method.HOTPLUG_RESOURCES: Tier.MEDIUM,
    Method.SET_LINK_STATES: Tier.MEDIUM,
    Method.BACKUP_BEGIN: Tier.MEDIUM,
    Method.BACKUP_STATUS: Tier.SHORT,
    Method.MEMORY_DUMP: Tier.SHORT,
    Method.SYNC_INTERFACES: Tier.MEDIUM,
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


def _text(args: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidArgument(key, "expected a non-empty string")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class AttachVolumeArgs:
    """attach_volume: the hotplugged volume whose disk file the handler made reachable
    (podlayout.hotplug_disk_file), the bus and serial its disk asks for."""

    volume: str
    bus: str = DEFAULT_HOTPLUG_BUS
    serial: str | None = None
    readonly: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"volume": self.volume, "bus": self.bus, "readonly": self.readonly}
        if self.serial:
            wire["serial"] = self.serial
        return wire

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"volume", "bus", "serial", "readonly"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        bus = _text(args, "bus", required=False) or DEFAULT_HOTPLUG_BUS
        if bus not in HOTPLUG_BUSES:
            raise InvalidArgument("bus", f"{bus!r} cannot be hotplugged (one of {HOTPLUG_BUSES})")
        readonly = args.get("readonly", False)
        if not isinstance(readonly, bool):
            raise InvalidArgument("readonly", "expected a boolean")
        return cls(
            volume=_text(args, "volume", required=True) or "",
            bus=bus,
            serial=_text(args, "serial", required=False),
            readonly=readonly,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DetachVolumeArgs:
    """detach_volume: the hotplugged volume whose disk leaves the guest."""

    volume: str

    def to_wire(self) -> dict[str, Any]:
        return {"volume": self.volume}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"volume"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        return cls(volume=_text(args, "volume", required=True) or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeReply:
    """What attach_volume / detach_volume answer: the guest device (None once gone) and
    whether the domain still holds the disk (a guest may ignore an unplug)."""

    target: str | None
    attached: bool

    def to_wire(self) -> dict[str, Any]:
        return {"target": self.target, "attached": self.attached}

    @classmethod
    def from_wire(cls, reply: Any) -> Self:
        if not isinstance(reply, Mapping) or not isinstance(reply.get("attached"), bool):
            raise InvalidArgument("attached", "expected a map with a boolean 'attached'")
        target = reply.get("target")
        return cls(target=target if isinstance(target, str) else None, attached=reply["attached"])


FORWARD_PROTOCOLS = ("tcp",)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestExecArgs:
    """GuestExec: run `command` in the guest through its agent (exec probes); the answer is
    ``{"exitCode": N}``, or a timeout error after `timeout_seconds`."""

    command: tuple[str, ...]
    timeout_seconds: int = 1

    def to_wire(self) -> dict[str, Any]:
        return {"command": list(self.command), "timeoutSeconds": self.timeout_seconds}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"command", "timeoutSeconds"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        command, timeout = args.get("command"), args.get("timeoutSeconds", 1)
        if not isinstance(command, list) or not command:
            raise InvalidArgument("command", "expected a non-empty list of strings")
        if not all(isinstance(c, str) for c in command):
            raise InvalidArgument("command", "expected a non-empty list of strings")
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 60:
            raise InvalidArgument("timeoutSeconds", f"expected 1-60, got {timeout!r}")
        return cls(command=tuple(command), timeout_seconds=timeout)


@dataclass(frozen=True, slots=True, kw_only=True)
class ForwardPortArgs:
    """ForwardPort: make the guest's `port` reachable on the same port of the pod's IP
    (masquerade); the answer is ``{"port": N}``."""

    port: int
    protocol: str = "tcp"

    def to_wire(self) -> dict[str, Any]:
        return {"port": self.port, "protocol": self.protocol}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"port", "protocol"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        port, protocol = args.get("port"), args.get("protocol", "tcp")
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise InvalidArgument("port", f"expected a port number 1-65535, got {port!r}")
        if protocol not in FORWARD_PROTOCOLS:
            raise InvalidArgument("protocol", f"expected tcp, got {protocol!r}")
        return cls(port=port, protocol=protocol)
