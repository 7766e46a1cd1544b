"""Per-VMI metrics in KubeVirt's names, collected from each launcher's GetDomainStats.

A scrape asks every connected launcher for its stats at once, each under its own
timeout, so a stuck launcher costs the scrape at most that timeout and never touches
the reconcile loop (calls on a launcher connection run concurrently). A launcher that
does not answer in time keeps its previous values; a VMI that is gone loses its series.
Cumulative libvirt counters are published as counters (reset when the source resets,
e.g. after a migration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from handler import commands
from handler.errors import SyncError
from handler.launchers import LauncherPort
from shared.kube import Counter, Gauge, Registry
from shared.tasks import cancelling
from shared.wire.stats import DomainStats

log = structlog.get_logger("handler.metrics")

Targets = Callable[[], Iterable[tuple[str, LauncherPort | None]]]  # VMI key, launcher if connected
VMI_LABELS = ("node", "namespace", "name")
_KIB = 1024
_HELP = {
    "kubevirt_vmi_cpu_usage_seconds_total": (
        "Total CPU time spent in all modes (sum of both vcpu and hypervisor usage)."
    ),
    "kubevirt_vmi_memory_resident_bytes": "Resident set size of the process running the domain.",
    "kubevirt_vmi_memory_available_bytes": "Amount of usable memory as seen by the domain.",
    "kubevirt_vmi_memory_domain_bytes": "The amount of memory in bytes allocated to the domain.",
    "kubevirt_vmi_network_receive_bytes_total": "Total network traffic received in bytes.",
    "kubevirt_vmi_network_transmit_bytes_total": "Total network traffic transmitted in bytes.",
    "kubevirt_vmi_network_receive_packets_total": "Total network traffic received packets.",
    "kubevirt_vmi_network_transmit_packets_total": "Total network traffic transmitted packets.",
    "kubevirt_vmi_storage_read_traffic_bytes_total": "Total number of bytes read from storage.",
    "kubevirt_vmi_storage_write_traffic_bytes_total": "Total number of written bytes.",
    "kubevirt_vmi_storage_iops_read_total": "Total number of I/O read operations.",
    "kubevirt_vmi_storage_iops_write_total": "Total number of I/O write operations.",
    "kubevirt_py_handler_stats_failures_total": (
        "GetDomainStats calls that failed or timed out during a scrape."
    ),
}


@dataclass(frozen=True, slots=True)
class _Series:
    family: Counter | Gauge
    labels: tuple[str, ...]


class VMIStatsCollector:
    """Keeps the kubevirt_vmi_* series in the registry current, on demand."""

    def __init__(self, registry: Registry, *, node: str, targets: Targets, timeout: float) -> None:
        self._node = node
        self._targets = targets
        self._timeout = timeout
        self._lock = asyncio.Lock()
        self._series: dict[str, set[_Series]] = {}
        net, blk = (*VMI_LABELS, "interface"), (*VMI_LABELS, "drive")
        self.cpu = _counter(registry, "kubevirt_vmi_cpu_usage_seconds_total", VMI_LABELS)
        self.resident = _gauge_family(registry, "kubevirt_vmi_memory_resident_bytes", VMI_LABELS)
        self.available = _gauge_family(registry, "kubevirt_vmi_memory_available_bytes", VMI_LABELS)
        self.domain = _gauge_family(registry, "kubevirt_vmi_memory_domain_bytes", VMI_LABELS)
        self.rx_bytes = _counter(registry, "kubevirt_vmi_network_receive_bytes_total", net)
        self.tx_bytes = _counter(registry, "kubevirt_vmi_network_transmit_bytes_total", net)
        self.rx_packets = _counter(registry, "kubevirt_vmi_network_receive_packets_total", net)
        self.tx_packets = _counter(registry, "kubevirt_vmi_network_transmit_packets_total", net)
        self.read_bytes = _counter(registry, "kubevirt_vmi_storage_read_traffic_bytes_total", blk)
        self.write_bytes = _counter(registry, "kubevirt_vmi_storage_write_traffic_bytes_total", blk)
        self.iops_read = _counter(registry, "kubevirt_vmi_storage_iops_read_total", blk)
        self.iops_write = _counter(registry, "kubevirt_vmi_storage_iops_write_total", blk)
        self.failures = _counter(registry, "kubevirt_py_handler_stats_failures_total", ("node",))

    async def collect(self) -> None:
        """Refresh every VMI's series; concurrent scrapes wait for the same collection."""
        async with self._lock:
            targets = dict(self._targets())
            found: dict[str, DomainStats] = {}
            async with asyncio.TaskGroup() as tg:
                for key, launcher in targets.items():
                    if launcher is not None:
                        tg.create_task(self._one(key, launcher, found))
            for key, stats in found.items():
                self._publish(key, stats)
            for key in set(self._series) - set(targets):
                self.drop(key)

    async def _one(self, key: str, launcher: LauncherPort, found: dict[str, DomainStats]) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                found[key] = await commands.stats(launcher)
        except TimeoutError:
            if cancelling():
                raise
            self._failed(key, "timed out")
        except SyncError as exc:
            self._failed(key, exc.message)

    def _failed(self, key: str, why: str) -> None:
        self.failures.labels(self._node).inc()
        log.info("stats_unavailable", vmi=key, error=why)

    def drop(self, key: str) -> None:
        """Remove every series of a VMI that is gone."""
        for s in self._series.pop(key, set()):
            s.family.remove(*s.labels)

    def _publish(self, key: str, st: DomainStats) -> None:
        namespace, _, name = key.partition("/")
        vmi = (self._node, namespace, name)
        self._count(key, self.cpu, vmi, st.cpu_time_ns / 1e9)
        self._gauge(key, self.resident, vmi, st.memory_rss_kib * _KIB)
        self._gauge(key, self.available, vmi, st.memory_available_kib * _KIB)
        self._gauge(key, self.domain, vmi, st.memory_actual_kib * _KIB)
        for n in st.net:
            labels = (*vmi, n.name)
            self._count(key, self.rx_bytes, labels, n.rx_bytes)
            self._count(key, self.tx_bytes, labels, n.tx_bytes)
            self._count(key, self.rx_packets, labels, n.rx_packets)
            self._count(key, self.tx_packets, labels, n.tx_packets)
        for b in st.block:
            labels = (*vmi, b.name)
            self._count(key, self.read_bytes, labels, b.read_bytes)
            self._count(key, self.write_bytes, labels, b.write_bytes)
            self._count(key, self.iops_read, labels, b.read_requests)
            self._count(key, self.iops_write, labels, b.write_requests)

    def _gauge(self, key: str, family: Gauge, labels: tuple[str, ...], value: float) -> None:
        family.labels(*labels).set(value)
        self._series.setdefault(key, set()).add(_Series(family, labels))

    def _count(self, key: str, family: Counter, labels: tuple[str, ...], value: float) -> None:
        """Publish a cumulative source counter; a decrease means the source reset."""
        child = family.labels(*labels)
        if value < child.value:
            family.remove(*labels)
            child = family.labels(*labels)
        child.inc(value - child.value)
        self._series.setdefault(key, set()).add(_Series(family, labels))


def _counter(registry: Registry, name: str, labels: tuple[str, ...]) -> Counter:
    return registry.counter(name, _HELP[name], labels)


def _gauge_family(registry: Registry, name: str, labels: tuple[str, ...]) -> Gauge:
    return registry.gauge(name, _HELP[name], labels)
