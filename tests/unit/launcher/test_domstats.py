"""libvirt's flat domain statistics read into the wire's DomainStats."""

from __future__ import annotations

from launcher.domstats import parse_stats
from shared.wire.stats import BlockStats, DomainStats, NetStats, VcpuStats


def test_counters_devices_and_vcpus_are_read() -> None:
    """Block devices are named by index when libvirt gives no name, interfaces without a
    name (user networking) are left out, vCPUs without a state are skipped, and missing
    counters read as 0."""
    raw = {
        "cpu.time": 5,
        "vcpu.current": 2,
        "vcpu.maximum": 3,
        "vcpu.0.state": 1,
        "vcpu.0.time": 7,
        "vcpu.2.state": 2,
        "balloon.current": 100,
        "block.count": 2,
        "block.0.name": "vda",
        "block.0.rd.bytes": 10,
        "block.1.fl.times": 3,
        "net.count": 2,
        "net.1.name": "vnet1",
        "net.1.tx.drop": 4,
    }
    assert parse_stats(raw) == DomainStats(
        cpu_time_ns=5,
        vcpus=2,
        memory_actual_kib=100,
        block=(BlockStats(name="vda", read_bytes=10), BlockStats(name="1", flush_time_ns=3)),
        net=(NetStats(name="vnet1", tx_dropped=4),),
        vcpu=(VcpuStats(id=0, state=1, time_ns=7), VcpuStats(id=2, state=2)),
    )


def test_no_statistics_read_as_zero() -> None:
    """An empty reply is all zeros and no devices."""
    assert parse_stats({}) == DomainStats()
