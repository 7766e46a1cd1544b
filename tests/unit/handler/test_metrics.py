"""kubevirt_vmi_* metrics from GetDomainStats (handler.metrics), through prometheus_client."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client.parser import text_string_to_metric_families

from handler.launchers import LauncherPort
from handler.metrics import VMIStatsCollector
from shared.kube import Registry
from shared.wire.launcher_api import Method
from shared.wire.stats import MigrationJobStats
from tests.unit.handler.fakes import FakeLauncher

VMI = {"node": "node01", "namespace": "default", "name": "tiny"}
NIC = {**VMI, "interface": "default"}
DRIVE = {**VMI, "drive": "containerdisk"}


def _collector(
    targets: dict[str, LauncherPort | None], *, timeout: float = 1.0
) -> tuple[VMIStatsCollector, Registry]:
    registry = Registry()
    return VMIStatsCollector(
        registry, node="node01", targets=targets.items, timeout=timeout
    ), registry


def _types(registry: Registry) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(registry.render())}


async def test_stats_are_published_in_kubevirt_names_types_and_labels() -> None:
    """CPU and vCPU seconds, memory bytes, per-interface and per-drive counters (errors,
    drops, storage times and flushes included), labelled with the VMI's own names."""
    collector, registry = _collector({"default/tiny": FakeLauncher()})
    await collector.refresh()
    expected = [
        ("kubevirt_vmi_cpu_usage_seconds_total", "counter", 2.5, VMI),
        ("kubevirt_vmi_memory_resident_bytes", "gauge", 150000 * 1024, VMI),
        ("kubevirt_vmi_memory_available_bytes", "gauge", 120000 * 1024, VMI),
        ("kubevirt_vmi_memory_domain_bytes", "gauge", 131072 * 1024, VMI),
        ("kubevirt_vmi_vcpu_seconds_total", "counter", 2.0, {**VMI, "id": "0", "state": "running"}),
        ("kubevirt_vmi_network_receive_bytes_total", "counter", 1000, NIC),
        ("kubevirt_vmi_network_transmit_bytes_total", "counter", 2000, NIC),
        ("kubevirt_vmi_network_receive_packets_total", "counter", 10, NIC),
        ("kubevirt_vmi_network_transmit_packets_total", "counter", 20, NIC),
        ("kubevirt_vmi_network_receive_errors_total", "counter", 1, NIC),
        ("kubevirt_vmi_network_transmit_errors_total", "counter", 2, NIC),
        ("kubevirt_vmi_network_receive_packets_dropped_total", "counter", 3, NIC),
        ("kubevirt_vmi_network_transmit_packets_dropped_total", "counter", 4, NIC),
        ("kubevirt_vmi_storage_read_traffic_bytes_total", "counter", 4096, DRIVE),
        ("kubevirt_vmi_storage_write_traffic_bytes_total", "counter", 512, DRIVE),
        ("kubevirt_vmi_storage_iops_read_total", "counter", 8, DRIVE),
        ("kubevirt_vmi_storage_iops_write_total", "counter", 1, DRIVE),
        ("kubevirt_vmi_storage_read_times_seconds_total", "counter", 0.003, DRIVE),
        ("kubevirt_vmi_storage_write_times_seconds_total", "counter", 0.001, DRIVE),
        ("kubevirt_vmi_storage_flush_requests_total", "counter", 2, DRIVE),
        ("kubevirt_vmi_storage_flush_times_seconds_total", "counter", 0.0005, DRIVE),
    ]
    types = _types(registry)
    for name, kind, value, labels in expected:
        assert registry.sample(name, labels) == pytest.approx(value), name
        assert types[name.removesuffix("_total") if kind == "counter" else name] == kind


async def test_a_running_migration_reports_its_progress() -> None:
    """While the source migrates, the migration gauges carry the job's figures; without a
    migration they have no series."""
    launcher = FakeLauncher()
    collector, registry = _collector({"default/tiny": launcher})
    await collector.refresh()
    assert registry.sample("kubevirt_vmi_migration_data_remaining_bytes", VMI) is None
    job = MigrationJobStats(data_processed=10, data_remaining=90, dirty_rate_bps=5, memory_bps=7)
    launcher.stats = dataclasses.replace(launcher.stats, migration=job)
    await collector.refresh()
    assert registry.sample("kubevirt_vmi_migration_data_processed_bytes", VMI) == 10
    assert registry.sample("kubevirt_vmi_migration_data_remaining_bytes", VMI) == 90
    assert registry.sample("kubevirt_vmi_migration_dirty_memory_rate_bytes", VMI) == 5
    assert registry.sample("kubevirt_vmi_migration_memory_transfer_rate_bytes", VMI) == 7


async def test_a_stuck_launcher_costs_only_its_timeout_and_keeps_old_values() -> None:
    """A launcher that never answers: counted as a failure; its last values stay."""
    launcher = FakeLauncher()
    collector, registry = _collector({"default/tiny": launcher}, timeout=0.05)
    await collector.refresh()
    launcher.hang.add(Method.GET_DOMAIN_STATS)
    await collector.refresh()
    assert registry.sample("kubevirt_vmi_cpu_usage_seconds_total", VMI) == 2.5
    assert registry.sample("kubevirt_py_handler_stats_failures_total", {"node": "node01"}) == 1


async def test_counters_are_the_source_values() -> None:
    """libvirt's counters are published as they are: a new QEMU's lower value is a reset
    for Prometheus' rate(), as with KubeVirt."""
    launcher = FakeLauncher()
    collector, registry = _collector({"default/tiny": launcher})
    await collector.refresh()
    launcher.stats = dataclasses.replace(launcher.stats, cpu_time_ns=1_000_000_000)
    await collector.refresh()
    assert registry.sample("kubevirt_vmi_cpu_usage_seconds_total", VMI) == 1.0


async def test_series_of_a_vmi_that_is_gone_are_removed() -> None:
    """No series survive their VMI (handler memory must not grow with churn)."""
    targets: dict[str, LauncherPort | None] = {"default/tiny": FakeLauncher()}
    collector, registry = _collector(targets)
    await collector.refresh()
    targets["default/tiny"] = None  # disconnected for now: keep the series
    await collector.refresh()
    assert registry.sample("kubevirt_vmi_cpu_usage_seconds_total", VMI) == 2.5
    targets.clear()
    await collector.refresh()
    assert collector.vmis() == []
    assert "kubevirt_vmi_cpu_usage_seconds_total{" not in registry.render()
