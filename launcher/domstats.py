"""libvirt's domain statistics (virConnectGetAllDomainStats' typed parameters, a flat
dict such as {"block.0.rd.bytes": 512}) read into the wire's DomainStats. Pure: the
adapter (virt.py) fetches them; device names stay libvirt's (vda, vnet0)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from shared.wire.stats import BlockStats, DomainStats, NetStats, VcpuStats

T = TypeVar("T")

# Field of the wire's stats ← the key after "block.<i>." / "net.<i>.".
_BLOCK = {
    "read_bytes": "rd.bytes",
    "write_bytes": "wr.bytes",
    "read_requests": "rd.reqs",
    "write_requests": "wr.reqs",
    "read_time_ns": "rd.times",
    "write_time_ns": "wr.times",
    "flush_requests": "fl.reqs",
    "flush_time_ns": "fl.times",
}
_NET = {
    "rx_bytes": "rx.bytes",
    "tx_bytes": "tx.bytes",
    "rx_packets": "rx.pkts",
    "tx_packets": "tx.pkts",
    "rx_errors": "rx.errs",
    "tx_errors": "tx.errs",
    "rx_dropped": "rx.drop",
    "tx_dropped": "tx.drop",
}


def parse_stats(raw: Mapping[str, Any]) -> DomainStats:
    """One domain's statistics. Interfaces without a host device (QEMU user networking)
    have no name and no counters: they are left out."""

    def num(key: str) -> int:
        return _num(raw, key)

    vcpu = tuple(
        VcpuStats(id=i, state=num(f"vcpu.{i}.state"), time_ns=num(f"vcpu.{i}.time"))
        for i in range(num("vcpu.maximum") or num("vcpu.current"))
        if f"vcpu.{i}.state" in raw
    )
    return DomainStats(
        cpu_time_ns=num("cpu.time"),
        cpu_user_ns=num("cpu.user"),
        cpu_system_ns=num("cpu.system"),
        vcpus=num("vcpu.current"),
        memory_actual_kib=num("balloon.current"),
        memory_rss_kib=num("balloon.rss"),
        memory_available_kib=num("balloon.available"),
        memory_usable_kib=num("balloon.usable"),
        memory_unused_kib=num("balloon.unused"),
        block=_devices(raw, "block", BlockStats, _BLOCK, named_only=False),
        net=_devices(raw, "net", NetStats, _NET, named_only=True),
        vcpu=vcpu,
    )


def _devices(
    raw: Mapping[str, Any],
    kind: str,
    model: Callable[..., T],
    fields: Mapping[str, str],
    *,
    named_only: bool,
) -> tuple[T, ...]:
    """Each "<kind>.<i>." device's counters (named by index when libvirt gives no name,
    or left out when `named_only`)."""
    found = []
    for i in range(_num(raw, f"{kind}.count")):
        name = raw.get(f"{kind}.{i}.name")
        if name is None and named_only:
            continue
        counters = {field: _num(raw, f"{kind}.{i}.{key}") for field, key in fields.items()}
        found.append(model(name=str(i if name is None else name), **counters))
    return tuple(found)


def _num(raw: Mapping[str, Any], key: str) -> int:
    return int(raw.get(key, 0))
