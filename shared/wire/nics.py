"""sync_interfaces: the handler hands the launcher the running VMI; the launcher attaches
each hot-plugged NIC its pod was wired for and the domain lacks, and detaches each NIC
marked absent the domain still has (NIC hotplug, shared/nics.py). The reply names what it
attached and detached and the VMI interfaces the domain has now."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from shared.wire.errors import InvalidArgument


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncInterfacesArgs:
    """The VMI as a Kubernetes dict (the launcher parses it)."""

    vmi: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"vmi": dict(self.vmi)}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"vmi"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        vmi = args.get("vmi")
        if not isinstance(vmi, Mapping):
            raise InvalidArgument("vmi", "expected the VirtualMachineInstance as a map")
        return cls(vmi=vmi)


def _names(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(key, "expected a list of interface names")
    return tuple(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfacesReply:
    """Interfaces attached and detached by this call; those the domain has now."""

    attached: tuple[str, ...] = ()
    detached: tuple[str, ...] = ()
    present: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {
            "attached": list(self.attached),
            "detached": list(self.detached),
            "present": list(self.present),
        }

    @classmethod
    def from_wire(cls, raw: Any) -> Self:
        if not isinstance(raw, Mapping):
            raise InvalidArgument("reply", "expected a map")
        return cls(
            attached=_names(raw, "attached"),
            detached=_names(raw, "detached"),
            present=_names(raw, "present"),
        )
