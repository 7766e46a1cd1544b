"""Per-VMI metrics in KubeVirt's names, types and labels, from each launcher's GetDomainStats.

`VMIStatsCollector` is a prometheus_client custom collector: a scrape first awaits
`refresh()` (health.py's `collect` hook), which asks every connected launcher for its stats
at once, each under its own timeout, so a stuck launcher costs the scrape at most that
timeout and never touches the reconcile loop. `collect()` then turns the latest report of
each VMI into metric families, as KubeVirt's domainstats collector does: libvirt's
cumulative counters are published as they are (a new QEMU starts them from 0, which
Prometheus' rate() reads as a reset). A launcher that does not answer in time keeps its
previous report; a VMI that is gone loses its series. Disk and interface labels are the
VMI's own names (the launcher maps libvirt's device names back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from handler import commands
from handler.errors import SyncError
from handler.launchers import LauncherPort
from shared.kube import Registry
from shared.tasks import cancelling
from shared.wire.stats import BlockStats, DomainStats, NetStats

log = structlog.get_logger("handler.metrics")

Targets = Callable[[], Iterable[tuple[str, LauncherPort | None]]]  # VMI key, launcher if connected
VMI_LABELS = ("node", "namespace", "name")
_Reports = list[tuple[tuple[str, ...], DomainStats]]  # (node, namespace, name), latest stats
_KIB = 1024
_NS = 1e-9
_VCPU_STATES = {0: "offline", 1: "running", 2: "blocked"}


@dataclass(frozen=True, slots=True)
class _Spec:
    """One per-VMI family: name, help, type and how to read it off a report."""

    name: str
    help: str
    counter: bool
    read: Callable[[DomainStats], float]


_Dev = TypeVar("_Dev", bound=NetStats | BlockStats)


@dataclass(frozen=True, slots=True)
class _DevSpec(Generic[_Dev]):
    """One per-device family: name, help and how to read it off a device's counters."""

    name: str
    help: str
    read: Callable[[_Dev], float]


_VMI_FAMILIES = (
    _Spec("kubevirt_vmi_cpu_usage_seconds_total",
          "Total CPU time spent in all modes (sum of both vcpu and hypervisor usage).",
          True, lambda s: s.cpu_time_ns * _NS),
    _Spec("kubevirt_vmi_cpu_user_usage_seconds_total", "Total CPU time spent in user mode.",
          True, lambda s: s.cpu_user_ns * _NS),
    _Spec("kubevirt_vmi_cpu_system_usage_seconds_total", "Total CPU time spent in system mode.",
          True, lambda s: s.cpu_system_ns * _NS),
    _Spec("kubevirt_vmi_memory_resident_bytes",
          "Resident set size of the process running the domain.",
          False, lambda s: s.memory_rss_kib * _KIB),
    _Spec("kubevirt_vmi_memory_available_bytes", "Amount of usable memory as seen by the domain.",
          False, lambda s: s.memory_available_kib * _KIB),
    _Spec("kubevirt_vmi_memory_domain_bytes",
          "The amount of memory in bytes allocated to the domain.",
          False, lambda s: s.memory_actual_kib * _KIB),
    _Spec("kubevirt_vmi_memory_usable_bytes",
          "The amount of memory which can be reclaimed by balloon without pushing the guest "
          "system to swap.", False, lambda s: s.memory_usable_kib * _KIB),
    _Spec("kubevirt_vmi_memory_unused_bytes",
          "The amount of memory left completely unused by the system.",
          False, lambda s: s.memory_unused_kib * _KIB),
)  # fmt: skip
_NET_FAMILIES: tuple[_DevSpec[NetStats], ...] = (
    _DevSpec("kubevirt_vmi_network_receive_bytes_total",
             "Total network traffic received in bytes.", lambda n: n.rx_bytes),
    _DevSpec("kubevirt_vmi_network_transmit_bytes_total",
             "Total network traffic transmitted in bytes.", lambda n: n.tx_bytes),
    _DevSpec("kubevirt_vmi_network_receive_packets_total",
             "Total network traffic received packets.", lambda n: n.rx_packets),
    _DevSpec("kubevirt_vmi_network_transmit_packets_total",
             "Total network traffic transmitted packets.", lambda n: n.tx_packets),
    _DevSpec("kubevirt_vmi_network_receive_errors_total",
             "Total network received error packets.", lambda n: n.rx_errors),
    _DevSpec("kubevirt_vmi_network_transmit_errors_total",
             "Total network transmitted error packets.", lambda n: n.tx_errors),
    _DevSpec("kubevirt_vmi_network_receive_packets_dropped_total",
             "The total number of rx packets dropped on vNIC interfaces.", lambda n: n.rx_dropped),
    _DevSpec("kubevirt_vmi_network_transmit_packets_dropped_total",
             "The total number of tx packets dropped on vNIC interfaces.", lambda n: n.tx_dropped),
)  # fmt: skip
_BLOCK_FAMILIES: tuple[_DevSpec[BlockStats], ...] = (
    _DevSpec("kubevirt_vmi_storage_read_traffic_bytes_total",
             "Total number of bytes read from storage.", lambda b: b.read_bytes),
    _DevSpec("kubevirt_vmi_storage_write_traffic_bytes_total",
             "Total number of written bytes.", lambda b: b.write_bytes),
    _DevSpec("kubevirt_vmi_storage_iops_read_total",
             "Total number of I/O read operations.", lambda b: b.read_requests),
    _DevSpec("kubevirt_vmi_storage_iops_write_total",
             "Total number of I/O write operations.", lambda b: b.write_requests),
    _DevSpec("kubevirt_vmi_storage_read_times_seconds_total",
             "Total time spent on read operations.", lambda b: b.read_time_ns * _NS),
    _DevSpec("kubevirt_vmi_storage_write_times_seconds_total",
             "Total time spent on write operations.", lambda b: b.write_time_ns * _NS),
    _DevSpec("kubevirt_vmi_storage_flush_requests_total",
             "Total storage flush requests.", lambda b: b.flush_requests),
    _DevSpec("kubevirt_vmi_storage_flush_times_seconds_total",
             "Total time spent on cache flushing.", lambda b: b.flush_time_ns * _NS),
)  # fmt: skip
_MIGRATION_FAMILIES = (
    ("kubevirt_vmi_migration_data_processed_bytes",
     "The total Guest OS data processed and migrated to the new VM.", "data_processed"),
    ("kubevirt_vmi_migration_data_remaining_bytes",
     "The remaining guest OS data to be migrated to the new VM.", "data_remaining"),
    ("kubevirt_vmi_migration_dirty_memory_rate_bytes",
     "The rate of memory being dirty in the Guest OS.", "dirty_rate_bps"),
    ("kubevirt_vmi_migration_memory_transfer_rate_bytes",
     "The rate at which the memory is being transferred.", "memory_bps"),
)  # fmt: skip
_VCPU_HELP = (
    "Total amount of time spent in each state by each vcpu (cpu_time excluding hypervisor "
    "time). Where `id` is the vcpu identifier and `state` can be one of the following: "
    "[`OFFLINE`, `RUNNING`, `BLOCKED`]."
)


class VMIStatsCollector:
    """The kubevirt_vmi_* families of this node's VMIs, from their launchers' latest reports."""

    def __init__(self, registry: Registry, *, node: str, targets: Targets, timeout: float) -> None:
        self._node = node
        self._targets = targets
        self._timeout = timeout
        self._lock = asyncio.Lock()
        self._latest: dict[str, DomainStats] = {}
        self.failures = registry.counter(
            "kubevirt_py_handler_stats_failures_total",
            "GetDomainStats calls that failed or timed out during a scrape.",
            ("node",),
        )
        registry.add(self)

    async def refresh(self) -> None:
        """Ask every connected launcher for stats; concurrent scrapes share one round."""
        async with self._lock:
            targets = dict(self._targets())
            found: dict[str, DomainStats] = {}
            async with asyncio.TaskGroup() as tg:
                for key, launcher in targets.items():
                    if launcher is not None:
                        tg.create_task(self._one(key, launcher, found))
            self._latest.update(found)
            for key in set(self._latest) - set(targets):
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
        """Forget a VMI that is gone (its series disappear with it)."""
        self._latest.pop(key, None)

    def vmis(self) -> list[str]:
        """The VMIs that have series (tests, leak checks)."""
        return sorted(self._latest)

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's collector protocol: every family, one series per VMI/device."""
        reports = [((self._node, *key.split("/", 1)), st) for key, st in self._latest.items()]
        yield from _vmi_families(reports)
        yield _vcpu_family(reports)
        yield from _device_families(reports, _NET_FAMILIES, "interface", lambda s: s.net)
        yield from _device_families(reports, _BLOCK_FAMILIES, "drive", lambda s: s.block)
        yield from _migration_families(reports)


def _vmi_families(reports: _Reports) -> Iterator[Metric]:
    for spec in _VMI_FAMILIES:
        kind = CounterMetricFamily if spec.counter else GaugeMetricFamily
        family = kind(spec.name, spec.help, labels=VMI_LABELS)
        for labels, st in reports:
            family.add_metric(labels, float(spec.read(st)))
        yield family


def _vcpu_family(reports: _Reports) -> Metric:
    family = CounterMetricFamily(
        "kubevirt_vmi_vcpu_seconds_total", _VCPU_HELP, labels=(*VMI_LABELS, "id", "state")
    )
    for labels, st in reports:
        for v in st.vcpu:
            state = _VCPU_STATES.get(v.state, "unknown")
            family.add_metric((*labels, str(v.id), state), v.time_ns * _NS)
    return family


def _device_families(
    reports: _Reports,
    specs: tuple[_DevSpec[_Dev], ...],
    label: str,
    devices: Callable[[DomainStats], tuple[_Dev, ...]],
) -> Iterator[Metric]:
    for spec in specs:
        family = CounterMetricFamily(spec.name, spec.help, labels=(*VMI_LABELS, label))
        for vmi, stats in reports:
            for dev in devices(stats):
                family.add_metric((*vmi, dev.name), float(spec.read(dev)))
        yield family


def _migration_families(reports: _Reports) -> Iterator[Metric]:
    for name, help_text, field in _MIGRATION_FAMILIES:
        family = GaugeMetricFamily(name, help_text, labels=VMI_LABELS)
        for labels, st in reports:
            if st.migration is not None:
                family.add_metric(labels, float(getattr(st.migration, field)))
        yield family
