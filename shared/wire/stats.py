"""GetDomainStats' reply: the counters the handler turns into kubevirt_vmi_* metrics.

Block and interface names are the VMI's own disk and interface names (the launcher maps
libvirt's device names back through the domain's aliases), as KubeVirt labels them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self, TypeVar


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockStats:
    name: str
    read_bytes: int = 0
    write_bytes: int = 0
    read_requests: int = 0
    write_requests: int = 0
    read_time_ns: int = 0
    write_time_ns: int = 0
    flush_requests: int = 0
    flush_time_ns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class NetStats:
    name: str
    rx_bytes: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    tx_packets: int = 0
    rx_errors: int = 0
    tx_errors: int = 0
    rx_dropped: int = 0
    tx_dropped: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class VcpuStats:
    """One vCPU: its state (libvirt's VIR_VCPU_*: 0 offline, 1 running, 2 blocked) and time."""

    id: int
    state: int = 0
    time_ns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationJobStats:
    """An outgoing migration's progress, while it runs (libvirt's job stats)."""

    data_total: int = 0
    data_processed: int = 0
    data_remaining: int = 0
    dirty_rate_bps: int = 0
    memory_bps: int = 0


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
    vcpu: tuple[VcpuStats, ...] = ()
    migration: MigrationJobStats | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: getattr(self, name) for name in self.__dataclass_fields__ if name not in _NESTED
        }
        out["block"] = [_fields(b) for b in self.block]
        out["net"] = [_fields(n) for n in self.net]
        out["vcpu"] = [_fields(v) for v in self.vcpu]
        if self.migration is not None:
            out["migration"] = _fields(self.migration)
        out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        scalars = {k: int(v) for k, v in data.items() if k in _SCALARS}
        migration = data.get("migration")
        return cls(
            **scalars,
            block=tuple(_known(BlockStats, b) for b in data.get("block", [])),
            net=tuple(_known(NetStats, n) for n in data.get("net", [])),
            vcpu=tuple(_known(VcpuStats, v) for v in data.get("vcpu", [])),
            migration=_known(MigrationJobStats, migration) if migration else None,
            extra=dict(data.get("extra", {})),
        )


_NESTED = frozenset({"block", "net", "vcpu", "migration", "extra"})
_SCALARS = frozenset(DomainStats.__dataclass_fields__) - _NESTED
_T = TypeVar("_T", BlockStats, NetStats, VcpuStats, MigrationJobStats)


def _fields(obj: BlockStats | NetStats | VcpuStats | MigrationJobStats) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def _known(kind: type[_T], data: Mapping[str, Any]) -> _T:
    """The dataclass from a wire map, ignoring keys a newer peer may add."""
    return kind(**{f.name: data[f.name] for f in fields(kind) if f.name in data})
