"""virt-controller's series for the newer families, and the launcher churn counters.

`FleetMetrics` is a prometheus_client collector computed at every scrape from the informer
caches (no API call), as controller/metrics.py's object series are. KubeVirt has no series
for these, so the names are kubevirt-py's, in KubeVirt's `kubevirt_` style:

    kubevirt_vmirs_replicas{namespace, name}            spec.replicas (desired)
    kubevirt_vmirs_current_replicas{namespace, name}    status.replicas
    kubevirt_vmirs_ready_replicas{namespace, name}      status.readyReplicas
    kubevirt_vmpool_replicas / _current_replicas / _ready_replicas   the same for pools
    kubevirt_datavolumes{namespace, phase}              DataVolumes per phase
    kubevirt_migration_policy_vmis{policy}              VMIs whose last migration was handed
                                                        over under this MigrationPolicy (0
                                                        for a policy no VMI used)

`LauncherChurn` counts launcher pods by node from the pod informer's changes:

    kubevirt_vmi_launcher_pods_scheduled_total{node}   launcher pods bound to the node
    kubevirt_vmi_launcher_pods_failed_total{node}      launcher pods that ended Failed there
                                                       (not being deleted: a crash, a
                                                       liveness kill, a kubelet rejection)

Every replica keeps the caches and counts (as the object series), so rules take `max` over
the replicas' scrapes. Pods already present when the informer first lists are not counted.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from controller.informers import Informers
from controller.metrics_snapshot import SnapshotMetrics
from shared.kube import Counter, Handlers, Registry
from shared.launcherpod import LauncherPod, PodPhase
from shared.model import VirtualMachineInstance, VirtualMachineInstanceReplicaSet
from shared.model.datavolume import DataVolume
from shared.model.migrationpolicy import MigrationPolicy
from shared.model.pool import VirtualMachinePool

_FLEET = {
    "kubevirt_vmirs": "VirtualMachineInstanceReplicaSet",
    "kubevirt_vmpool": "VirtualMachinePool",
}


class FleetMetrics:
    """The collector; each argument lists an informer cache."""

    def __init__(
        self,
        *,
        replicasets: Callable[[], Iterable[VirtualMachineInstanceReplicaSet]],
        pools: Callable[[], Iterable[VirtualMachinePool]],
        datavolumes: Callable[[], Iterable[DataVolume]],
        policies: Callable[[], Iterable[MigrationPolicy]],
        vmis: Callable[[], Iterable[VirtualMachineInstance]],
    ) -> None:
        self._replicasets = replicasets
        self._pools = pools
        self._datavolumes = datavolumes
        self._policies = policies
        self._vmis = vmis

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's collector protocol."""
        yield from _replicas("kubevirt_vmirs", list(self._replicasets()))
        yield from _replicas("kubevirt_vmpool", list(self._pools()))
        yield _datavolumes(self._datavolumes())
        yield _policy_matches(self._policies(), self._vmis())


def _replicas(
    prefix: str, sets: list[VirtualMachineInstanceReplicaSet] | list[VirtualMachinePool]
) -> Iterator[Metric]:
    kind, labels = _FLEET[prefix], ("namespace", "name")
    desired = GaugeMetricFamily(
        f"{prefix}_replicas", f"The {kind}'s desired replicas.", labels=labels
    )
    current = GaugeMetricFamily(
        f"{prefix}_current_replicas", f"The {kind}'s replicas (status.replicas).", labels=labels
    )
    ready = GaugeMetricFamily(
        f"{prefix}_ready_replicas", f"The {kind}'s ready replicas.", labels=labels
    )
    for s in sets:
        key = (s.namespace, s.name)
        desired.add_metric(key, float(s.spec.wanted))
        current.add_metric(key, float(s.status.replicas))
        ready.add_metric(key, float(s.status.ready_replicas))
    yield from (desired, current, ready)


def _datavolumes(dvs: Iterable[DataVolume]) -> Metric:
    family = GaugeMetricFamily(
        "kubevirt_datavolumes",
        "DataVolumes per namespace and phase.",
        labels=("namespace", "phase"),
    )
    counts = Tally((dv.namespace, str(dv.phase) or "Pending") for dv in dvs)
    for (namespace, phase), n in sorted(counts.items()):
        family.add_metric((namespace, phase), float(n))
    return family


def _policy_matches(
    policies: Iterable[MigrationPolicy], vmis: Iterable[VirtualMachineInstance]
) -> Metric:
    family = GaugeMetricFamily(
        "kubevirt_migration_policy_vmis",
        "VMIs whose last migration was handed over under this MigrationPolicy.",
        labels=("policy",),
    )
    counts = Tally({p.name: 0 for p in policies})
    for vmi in vmis:
        state = vmi.status.migration_state
        if state is not None and state.migration_policy_name:
            counts[state.migration_policy_name] += 1
    for policy, n in sorted(counts.items()):
        family.add_metric((policy,), float(n))
    return family


class LauncherChurn:
    """Counts launcher pods scheduled to and failed on each node (pod informer handlers)."""

    def __init__(self, *, scheduled: Counter, failed: Counter, synced: Callable[[], bool]) -> None:
        self._scheduled, self._failed, self._synced = scheduled, failed, synced

    def handlers(self) -> Handlers[LauncherPod]:
        """Callbacks for the pod informer."""
        return Handlers(on_add=self._added, on_update=self._updated)

    def _added(self, pod: LauncherPod) -> None:
        if self._synced():  # created (or first seen) while we watch
            self._count(None, pod)

    def _updated(self, old: LauncherPod, new: LauncherPod) -> None:
        self._count(old, new)

    def _count(self, old: LauncherPod | None, new: LauncherPod) -> None:
        if new.node_name and not (old is not None and old.node_name):
            self._scheduled.labels(new.node_name).inc()
        if new.node_name and _failed(new) and not (old is not None and _failed(old)):
            self._failed.labels(new.node_name).inc()


def _failed(pod: LauncherPod) -> bool:
    return pod.phase is PodPhase.FAILED and not pod.deleting


def register(registry: Registry, informers: Informers) -> None:
    """Add the fleet and snapshot series' collectors and the churn counters (pod handlers)."""
    inf = informers
    registry.add(
        FleetMetrics(
            replicasets=inf.replicasets.store.list,
            pools=inf.pools.store.list,
            datavolumes=inf.datavolumes.store.list,
            policies=inf.policies.store.list,
            vmis=inf.vmis.store.list,
        )
    )
    registry.add(
        SnapshotMetrics(snapshots=inf.snapshots.store.list, restores=inf.restores.store.list)
    )
    churn = LauncherChurn(
        scheduled=registry.counter(
            "kubevirt_vmi_launcher_pods_scheduled_total",
            "Launcher pods bound to the node, seen by this controller.",
            ("node",),
        ),
        failed=registry.counter(
            "kubevirt_vmi_launcher_pods_failed_total",
            "Launcher pods that ended Failed on the node without being deleted.",
            ("node",),
        ),
        synced=inf.pods.has_synced.is_set,
    )
    inf.pods.add_handlers(churn.handlers())
