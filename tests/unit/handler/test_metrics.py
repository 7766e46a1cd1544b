"""kubevirt_vmi_* metrics from GetDomainStats (handler.metrics)."""

from __future__ import annotations

import dataclasses

from handler.launchers import LauncherPort
from handler.metrics import VMIStatsCollector
from shared.kube import Registry
from shared.wire.launcher_api import Method
from tests.unit.handler.fakes import FakeLauncher

VMI = 'node="node01",namespace="default",name="tiny"'


def _collector(
    targets: dict[str, LauncherPort | None], *, timeout: float = 1.0
) -> tuple[VMIStatsCollector, Registry]:
    registry = Registry()
    return VMIStatsCollector(
        registry, node="node01", targets=targets.items, timeout=timeout
    ), registry


def _lines(registry: Registry) -> set[str]:
    return {line for line in registry.render().splitlines() if not line.startswith("#")}


async def test_stats_are_published_in_kubevirt_names() -> None:
    """CPU seconds, memory bytes, per-interface and per-drive counters, KubeVirt's labels."""
    collector, registry = _collector({"default/tiny": FakeLauncher()})
    await collector.collect()
    lines = _lines(registry)
    expected = {
        f"kubevirt_vmi_cpu_usage_seconds_total{{{VMI}}} 2.5",
        f"kubevirt_vmi_memory_resident_bytes{{{VMI}}} {150000 * 1024}",
        f"kubevirt_vmi_memory_available_bytes{{{VMI}}} {120000 * 1024}",
        f"kubevirt_vmi_memory_domain_bytes{{{VMI}}} {131072 * 1024}",
        f'kubevirt_vmi_network_receive_bytes_total{{{VMI},interface="vnet0"}} 1000',
        f'kubevirt_vmi_network_transmit_bytes_total{{{VMI},interface="vnet0"}} 2000',
        f'kubevirt_vmi_network_receive_packets_total{{{VMI},interface="vnet0"}} 10',
        f'kubevirt_vmi_network_transmit_packets_total{{{VMI},interface="vnet0"}} 20',
        f'kubevirt_vmi_storage_read_traffic_bytes_total{{{VMI},drive="vda"}} 4096',
        f'kubevirt_vmi_storage_write_traffic_bytes_total{{{VMI},drive="vda"}} 512',
        f'kubevirt_vmi_storage_iops_read_total{{{VMI},drive="vda"}} 8',
        f'kubevirt_vmi_storage_iops_write_total{{{VMI},drive="vda"}} 1',
    }
    assert expected <= lines


async def test_a_stuck_launcher_costs_only_its_timeout_and_keeps_old_values() -> None:
    """A launcher that never answers: counted as a failure; its last values stay."""
    launcher = FakeLauncher()
    collector, registry = _collector({"default/tiny": launcher}, timeout=0.05)
    await collector.collect()
    launcher.hang.add(Method.GET_DOMAIN_STATS)
    await collector.collect()
    assert f"kubevirt_vmi_cpu_usage_seconds_total{{{VMI}}} 2.5" in _lines(registry)
    assert 'kubevirt_py_handler_stats_failures_total{node="node01"} 1' in _lines(registry)


async def test_counters_follow_a_source_reset() -> None:
    """A cumulative counter that drops (new QEMU) restarts from the new value."""
    launcher = FakeLauncher()
    collector, registry = _collector({"default/tiny": launcher})
    await collector.collect()
    launcher.stats = dataclasses.replace(launcher.stats, cpu_time_ns=1_000_000_000)
    await collector.collect()
    assert f"kubevirt_vmi_cpu_usage_seconds_total{{{VMI}}} 1" in _lines(registry)


async def test_series_of_a_vmi_that_is_gone_are_removed() -> None:
    """No series survive their VMI (handler memory must not grow with churn)."""
    targets: dict[str, LauncherPort | None] = {"default/tiny": FakeLauncher()}
    collector, registry = _collector(targets)
    await collector.collect()
    targets["default/tiny"] = None  # disconnected for now: keep the series
    await collector.collect()
    assert any("kubevirt_vmi_cpu" in line for line in _lines(registry))
    targets.clear()
    await collector.collect()
    assert not any(line.startswith("kubevirt_vmi_") for line in _lines(registry))
