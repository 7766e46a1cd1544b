"""hotplug_resources: the handler asks the launcher for a vCPU count and a guest memory size
on the running domain (KubeVirt's CPU and memory hotplug); the reply is what the domain has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from shared.wire.errors import InvalidArgument

_ARGS = frozenset({"vcpus", "memory_kib"})
_REPLY = ("vcpus", "max_vcpus", "memory_boot_kib", "memory_requested_kib", "memory_current_kib")


def _count(args: Mapping[str, Any], key: str, *, required: bool) -> int | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(key, "expected a non-negative integer")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class HotplugResourcesArgs:
    """The vCPUs the guest should have; its total memory in KiB (None: unchanged)."""

    vcpus: int
    memory_kib: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"vcpus": self.vcpus, "memory_kib": self.memory_kib}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - _ARGS)
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        vcpus = _count(args, "vcpus", required=True) or 0
        if vcpus < 1:
            raise InvalidArgument("vcpus", "must be at least 1")
        return cls(vcpus=vcpus, memory_kib=_count(args, "memory_kib", required=False))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourcesReply:
    """The running domain's vCPUs (online, most) and memory: at boot, requested in all
    (boot + the virtio-mem device's requested size) and plugged by the guest now; the
    last two are None without a virtio-mem device."""

    vcpus: int
    max_vcpus: int
    memory_boot_kib: int
    memory_requested_kib: int | None = None
    memory_current_kib: int | None = None

    @property
    def memory_settled(self) -> bool:
        """The guest plugged all that was requested (or there is nothing to plug)."""
        return self.memory_requested_kib == self.memory_current_kib

    def to_wire(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _REPLY}

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> Self:
        return cls(
            vcpus=_count(raw, "vcpus", required=True) or 0,
            max_vcpus=_count(raw, "max_vcpus", required=True) or 0,
            memory_boot_kib=_count(raw, "memory_boot_kib", required=True) or 0,
            memory_requested_kib=_count(raw, "memory_requested_kib", required=False),
            memory_current_kib=_count(raw, "memory_current_kib", required=False),
        )
