"""GetDomainStats' reply: the counters the handler turns into kubevirt_vmi_* metrics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockStats:
    name: str
    read_bytes: int = 0
    write_bytes: int = 0
    read_requests: int = 0
    write_requests: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class NetStats:
    name: str
    rx_bytes: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    tx_packets: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainStats:
    """Counters as libvirt reports them (cpu in ns, memory in KiB)."""

    cpu_time_ns: int = 0
    cpu_user_ns: int = 0
    cpu_system_ns: int = 0
    vcpus: int = 0
    memory_actual_kib: int = 0
    memory_rss_kib: int = 0
    memory_available_kib: int = 0
    memory_usable_kib: int = 0
    memory_unused_kib: int = 0
    block: tuple[BlockStats, ...] = ()
    net: tuple[NetStats, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: getattr(self, name) for name in self.__dataclass_fields__ if name not in _NESTED
        }
        out["block"] = [_fields(b) for b in self.block]
        out["net"] = [_fields(n) for n in self.net]
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        scalars = {k: int(v) for k, v in data.items() if k not in _NESTED and k in _SCALARS}
        return cls(
            **scalars,
            block=tuple(BlockStats(**b) for b in data.get("block", [])),
            net=tuple(NetStats(**n) for n in data.get("net", [])),
            extra=dict(data.get("extra", {})),
        )


_NESTED = frozenset({"block", "net", "extra"})
_SCALARS = frozenset(DomainStats.__dataclass_fields__) - _NESTED


def _fields(obj: BlockStats | NetStats) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
