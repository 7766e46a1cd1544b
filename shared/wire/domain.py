"""The launcher's view of its domain, as it crosses the wire (replies and pushed events).

These types are the launcher↔handler contract; the handler turns them into VMI status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self, TypeVar

from shared.wire.errors import InvalidArgument

E = TypeVar("E", bound=StrEnum)


class DomainState(StrEnum):
    """libvirt's domain states, named as KubeVirt names them."""

    NO_STATE = "NoState"
    RUNNING = "Running"
    BLOCKED = "Blocked"
    PAUSED = "Paused"
    SHUTDOWN = "Shutdown"
    SHUTOFF = "Shutoff"
    CRASHED = "Crashed"
    PM_SUSPENDED = "PMSuspended"


class EventType(StrEnum):
    ADDED = "Added"
    MODIFIED = "Modified"
    DELETED = "Deleted"


def _str(args: Mapping[str, Any], key: str, *, default: str | None = None) -> str:
    value = args.get(key, default)
    if not isinstance(value, str):
        raise InvalidArgument(key, f"expected a string, got {type(value).__name__}")
    return value


def _enum(enum: type[E], args: Mapping[str, Any], key: str, *, what: str) -> E:
    value = _str(args, key)
    try:
        return enum(value)
    except ValueError:
        raise InvalidArgument(key, f"unknown {what} {value!r}") from None


def _map(args: Mapping[str, Any], key: str, *, default: Any = None) -> Mapping[str, Any]:
    value = args.get(key, default)
    if not isinstance(value, Mapping):
        raise InvalidArgument(key, "expected a map")
    return value


def _bool(args: Mapping[str, Any], key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(key, f"expected a boolean, got {type(value).__name__}")
    return value


def _count(args: Mapping[str, Any], key: str) -> int:
    value = args.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(key, "expected a count")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessCredentialStatus:
    """The last sync of the guest-agent access credentials (the VMI's
    AccessCredentialsSynchronized condition): succeeded, or why not."""

    succeeded: bool
    message: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"succeeded": self.succeeded, "message": self.message}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        return cls(succeeded=_bool(data, "succeeded"), message=_str(data, "message", default=""))


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainStatus:
    """One domain: identity, state and reason, and what the launcher knows beside libvirt."""

    name: str
    namespace: str
    vmi_name: str
    vmi_uid: str
    state: DomainState
    reason: str = ""
    agent_connected: bool = False
    graceful_shutdown: bool = False
    migration: Mapping[str, Any] = field(default_factory=dict)
    fs_frozen: bool = False  # the guest's filesystems frozen (VMI freeze)
    access_credential: AccessCredentialStatus | None = None  # None: nothing to sync
    # Times the guest's watchdog expired in this launcher, and libvirt's action the last time.
    watchdog_fired: int = 0
    watchdog_action: str = ""

    def to_wire(self) -> dict[str, Any]:
        access = self.access_credential
        return {
            **({"accessCredential": access.to_wire()} if access is not None else {}),
            "name": self.name,
            "namespace": self.namespace,
            "vmiName": self.vmi_name,
            "vmiUid": self.vmi_uid,
            "state": str(self.state),
            "reason": self.reason,
            "agentConnected": self.agent_connected,
            "gracefulShutdown": self.graceful_shutdown,
            "migration": dict(self.migration),
            "fsFrozen": self.fs_frozen,
            "watchdogFired": self.watchdog_fired,
            "watchdogAction": self.watchdog_action,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        parsed = _enum(DomainState, data, "state", what="domain state")
        migration = _map(data, "migration", default={})
        access = data.get("accessCredential")
        return cls(
            access_credential=(
                AccessCredentialStatus.from_wire(_map(data, "accessCredential"))
                if access is not None
                else None
            ),
            name=_str(data, "name"),
            namespace=_str(data, "namespace"),
            vmi_name=_str(data, "vmiName"),
            vmi_uid=_str(data, "vmiUid"),
            state=parsed,
            reason=_str(data, "reason", default=""),
            agent_connected=_bool(data, "agentConnected"),
            graceful_shutdown=_bool(data, "gracefulShutdown"),
            migration=dict(migration),
            fs_frozen=_bool(data, "fsFrozen"),
            watchdog_fired=_count(data, "watchdogFired"),
            watchdog_action=_str(data, "watchdogAction", default=""),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainEvent:
    """Pushed by the launcher to the handler's notify socket."""

    type: EventType
    domain: DomainStatus
    reason: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"type": str(self.type), "domain": self.domain.to_wire(), "reason": self.reason}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            type=_enum(EventType, data, "type", what="event type"),
            domain=DomainStatus.from_wire(_map(data, "domain")),
            reason=_str(data, "reason", default=""),
        )
