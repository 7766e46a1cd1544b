"""expand_disks: a running guest's claim disks grown to their claims' capacity (KubeVirt's
ExpandDisks). The handler sends each claim volume's capacity as the VMI's
status.volumeStatus[].persistentVolumeClaimInfo says; the launcher grows every disk whose
guest-visible size is smaller (never shrinks one) and answers with what it grew."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from shared.wire.errors import InvalidArgument


def _sizes(value: Any, key: str) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise InvalidArgument(key, "expected a map of volume name to bytes")
    out: dict[str, int] = {}
    for name, size in value.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgument(key, "volume names must be non-empty strings")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidArgument(f"{key}.{name}", "expected a non-negative byte count")
        out[name] = size
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpandDisksArgs:
    """Each claim volume's capacity in bytes (its claim's status.capacity.storage)."""

    capacities: Mapping[str, int]

    def to_wire(self) -> dict[str, Any]:
        return {"capacities": dict(self.capacities)}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        return cls(capacities=_sizes(args.get("capacities"), "capacities"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpandDisksReply:
    """The volumes whose disk was grown, with the size the guest sees now (bytes)."""

    expanded: Mapping[str, int] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"expanded": dict(self.expanded)}

    @classmethod
    def from_wire(cls, reply: Any) -> Self:
        if not isinstance(reply, Mapping):
            raise InvalidArgument("reply", "expected a map")
        return cls(expanded=_sizes(reply.get("expanded") or {}, "expanded"))
