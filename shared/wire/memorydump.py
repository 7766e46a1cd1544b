"""memory_dump: the handler asks the launcher for a memory-only dump of the running guest
into a memory dump volume's file (KubeVirt's VirtualMachineMemoryDump); the launcher
dumps in the background and answers the dump's state each time it is asked again, so the
call is idempotent by file name (a new file name starts a new dump once the last ended)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from shared.wire.errors import InvalidArgument


class DumpState(enum.StrEnum):
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDumpArgs:
    """The volume whose file the handler bind-mounted into the launcher
    (podlayout.hotplug_disk_file), and the dump's file name on the claim."""

    volume: str
    file_name: str

    def to_wire(self) -> dict[str, Any]:
        return {"volume": self.volume, "fileName": self.file_name}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"volume", "fileName"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        return cls(volume=_text(args, "volume"), file_name=_text(args, "fileName"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDumpReply:
    """The launcher's last (or current) dump: its file name, state and times."""

    file_name: str
    state: DumpState
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "fileName": self.file_name,
            "state": str(self.state),
            "startTimestamp": self.start_timestamp,
            "endTimestamp": self.end_timestamp,
            "reason": self.reason,
        }

    @classmethod
    def from_wire(cls, reply: Any) -> Self:
        if not isinstance(reply, Mapping):
            raise InvalidArgument("state", "expected a map")
        try:
            state = DumpState(str(reply.get("state")))
        except ValueError:
            raise InvalidArgument("state", f"unknown dump state {reply.get('state')!r}") from None
        return cls(
            file_name=_text(reply, "fileName"),
            state=state,
            start_timestamp=_optional(reply, "startTimestamp"),
            end_timestamp=_optional(reply, "endTimestamp"),
            reason=_optional(reply, "reason"),
        )


def _text(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value or "/" in value:
        raise InvalidArgument(key, "expected a non-empty file or volume name")
    return value


def _optional(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) else None
