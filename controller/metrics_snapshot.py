"""KubeVirt's vmsnapshot series, computed at every scrape from the snapshot and restore caches.

    kubevirt_vmsnapshot_succeeded_timestamp_seconds{name, snapshot_name, namespace}
        when the snapshot `snapshot_name` of VM `name` succeeded (its status.creationTime)
    kubevirt_vmsnapshot_disks_restored_from_source{vm_name, vm_namespace}
        disks that completed VirtualMachineRestores restored into the VM

KubeVirt's names and labels; its `_bytes` companion needs the restored claims' sizes, which
this collector does not read (docs/monitoring.md).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from shared.model.meta import parse_time
from shared.model.snapshot import SnapshotPhase, VirtualMachineRestore, VirtualMachineSnapshot


class SnapshotMetrics:
    """The collector; each argument lists an informer cache."""

    def __init__(
        self,
        *,
        snapshots: Callable[[], Iterable[VirtualMachineSnapshot]],
        restores: Callable[[], Iterable[VirtualMachineRestore]],
    ) -> None:
        self._snapshots, self._restores = snapshots, restores

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's collector protocol."""
        yield _succeeded(self._snapshots())
        yield _restored(self._restores())


def _succeeded(snapshots: Iterable[VirtualMachineSnapshot]) -> Metric:
    family = GaugeMetricFamily(
        "kubevirt_vmsnapshot_succeeded_timestamp_seconds",
        "Returns the timestamp of successful virtual machine snapshot.",
        labels=("name", "snapshot_name", "namespace"),
    )
    for s in snapshots:
        created = s.status.creation_time
        if s.phase is SnapshotPhase.SUCCEEDED and created:
            key = (s.spec.source.name or "", s.name, s.namespace)
            family.add_metric(key, parse_time(created).timestamp())
    return family


def _restored(restores: Iterable[VirtualMachineRestore]) -> Metric:
    family = GaugeMetricFamily(
        "kubevirt_vmsnapshot_disks_restored_from_source",
        "Returns the total number of virtual machine disks restored from the source virtual "
        "machine.",
        labels=("vm_name", "vm_namespace"),
    )
    counts: Tally[tuple[str, str]] = Tally()
    for r in restores:
        if r.status.complete:
            counts[(r.spec.target.name or "", r.namespace)] += len(r.status.restores)
    for key, n in sorted(counts.items()):
        family.add_metric(key, float(n))
    return family
