"""virt-controller's series for replica sets, pools, DataVolumes and migration policies,
and the launcher churn counters (controller.metrics_fleet)."""

from __future__ import annotations

from typing import Any

from controller.metrics_fleet import FleetMetrics, LauncherChurn
from shared.kube import Registry
from shared.launcherpod import LauncherPod, PodPhase
from shared.model import VirtualMachineInstance, VirtualMachineInstanceReplicaSet
from shared.model.datavolume import DataVolume
from shared.model.migrationpolicy import MigrationPolicy
from shared.model.pool import VirtualMachinePool


def _obj(kind: str, api: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ns"},
            **fields}  # fmt: skip


def _vmi(name: str, policy: str | None) -> VirtualMachineInstance:
    state = {"migrationState": {"migrationPolicyName": policy}} if policy else {}
    raw = _obj("VirtualMachineInstance", "kubevirt.io/v1", name, spec={"domain": {"devices": {}}},
               status=state)  # fmt: skip
    return VirtualMachineInstance.from_dict(raw)


def _registry() -> Registry:
    rs = VirtualMachineInstanceReplicaSet.from_dict(
        _obj(
            "VirtualMachineInstanceReplicaSet",
            "kubevirt.io/v1",
            "web",
            spec={"replicas": 3},
            status={"replicas": 2, "readyReplicas": 1},
        )
    )
    pool = VirtualMachinePool.from_dict(
        _obj(
            "VirtualMachinePool",
            "pool.kubevirt.io/v1beta1",
            "pool",
            spec={},
            status={"replicas": 1, "readyReplicas": 1},
        )
    )
    dvs = [
        DataVolume.from_dict(_obj("DataVolume", "cdi.kubevirt.io/v1beta1", n, status=s))
        for n, s in (("a", {"phase": "Succeeded"}), ("b", {"phase": "Succeeded"}), ("c", {}))
    ]
    policies = [
        MigrationPolicy.from_dict(
            {
                "apiVersion": "migrations.kubevirt.io/v1alpha1",
                "kind": "MigrationPolicy",
                "metadata": {"name": n},
                "spec": {"selectors": {}},
            }
        )
        for n in ("fast", "idle")
    ]
    vmis = [_vmi("v1", "fast"), _vmi("v2", "fast"), _vmi("v3", None)]
    registry = Registry()
    registry.add(
        FleetMetrics(
            replicasets=lambda: [rs],
            pools=lambda: [pool],
            datavolumes=lambda: dvs,
            policies=lambda: policies,
            vmis=lambda: vmis,
        )
    )
    return registry


def test_fleet_series_show_desired_current_and_ready() -> None:
    """A set of 3 wanted, 2 current, 1 ready; a pool with replicas unset (1 wanted)."""
    r, key = _registry(), {"namespace": "ns", "name": "web"}
    assert r.sample("kubevirt_vmirs_replicas", key) == 3
    assert r.sample("kubevirt_vmirs_current_replicas", key) == 2
    assert r.sample("kubevirt_vmirs_ready_replicas", key) == 1
    key = {"namespace": "ns", "name": "pool"}
    assert r.sample("kubevirt_vmpool_replicas", key) == 1
    assert r.sample("kubevirt_vmpool_ready_replicas", key) == 1


def test_datavolume_phases_and_policy_matches() -> None:
    """DataVolumes counted per phase (no phase yet: Pending); each policy's VMIs, 0 for a
    policy none used."""
    r = _registry()
    assert r.sample("kubevirt_datavolumes", {"namespace": "ns", "phase": "Succeeded"}) == 2
    assert r.sample("kubevirt_datavolumes", {"namespace": "ns", "phase": "Pending"}) == 1
    assert r.sample("kubevirt_migration_policy_vmis", {"policy": "fast"}) == 2
    assert r.sample("kubevirt_migration_policy_vmis", {"policy": "idle"}) == 0


def _pod(phase: PodPhase, node: str | None = "node01", *, deleting: bool = False) -> LauncherPod:
    return LauncherPod(namespace="ns", name="virt-launcher-x", uid="p1", phase=phase,
                       node_name=node, deleting=deleting)  # fmt: skip


def test_launcher_churn_counts_scheduling_and_failures_once() -> None:
    """A pod bound to node01 counts once as scheduled; ending Failed counts once as failed
    (repeated updates do not count again); one Failed while being deleted does not count;
    pods listed before the informer synced are not counted."""
    registry, synced = Registry(), [False]
    churn = LauncherChurn(
        scheduled=registry.counter("kubevirt_vmi_launcher_pods_scheduled_total", "s", ("node",)),
        failed=registry.counter("kubevirt_vmi_launcher_pods_failed_total", "f", ("node",)),
        synced=lambda: synced[0],
    )
    h = churn.handlers()
    assert h.on_add is not None and h.on_update is not None
    h.on_add(_pod(PodPhase.FAILED))  # listed at start: history, not churn
    synced[0] = True
    pending, running = _pod(PodPhase.PENDING, None), _pod(PodPhase.RUNNING)
    failed = _pod(PodPhase.FAILED)
    h.on_add(pending)
    h.on_update(pending, running)
    h.on_update(running, running)
    h.on_update(running, failed)
    h.on_update(failed, failed)
    h.on_update(running, _pod(PodPhase.FAILED, deleting=True))
    node = {"node": "node01"}
    assert registry.sample("kubevirt_vmi_launcher_pods_scheduled_total", node) == 1
    assert registry.sample("kubevirt_vmi_launcher_pods_failed_total", node) == 1
