"""GetDomainStats' reply on the wire (shared.wire.stats)."""

from __future__ import annotations

from shared.wire.stats import (
    BlockStats,
    DomainStats,
    MigrationJobStats,
    NetStats,
    VcpuStats,
)


def test_stats_round_trip_with_every_nested_part() -> None:
    """Block, net, vCPU and migration-job figures survive the wire unchanged."""
    stats = DomainStats(
        cpu_time_ns=5,
        block=(BlockStats(name="containerdisk", read_time_ns=7, flush_requests=2),),
        net=(NetStats(name="default", rx_errors=1, tx_dropped=3),),
        vcpu=(VcpuStats(id=0, state=1, time_ns=9),),
        migration=MigrationJobStats(data_processed=4, data_remaining=6),
    )
    assert DomainStats.from_wire(stats.to_wire()) == stats


def test_keys_a_newer_peer_adds_are_ignored() -> None:
    """Unknown keys at any level are dropped rather than failing the scrape."""
    wire = DomainStats(block=(BlockStats(name="d"),)).to_wire()
    wire["future"] = 1
    wire["block"][0]["future"] = 2
    assert DomainStats.from_wire(wire).block == (BlockStats(name="d"),)
