"""KubeVirt's vmsnapshot series from the snapshot and restore caches
(controller.metrics_snapshot)."""

from __future__ import annotations

from typing import Any

from controller.metrics_snapshot import SnapshotMetrics
from shared.kube import Registry
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot

API = "snapshot.kubevirt.io/v1beta1"


def _obj(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": "ns"},
            **fields}  # fmt: skip


def _snapshot(name: str, phase: str, created: str | None) -> VirtualMachineSnapshot:
    status: dict[str, Any] = {"phase": phase}
    if created:
        status["creationTime"] = created
    spec = {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"}}
    return VirtualMachineSnapshot.from_dict(
        _obj("VirtualMachineSnapshot", name, spec=spec, status=status)
    )


def _restore(name: str, *, complete: bool, disks: int) -> VirtualMachineRestore:
    spec = {"target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"},
            "virtualMachineSnapshotName": "s1"}  # fmt: skip
    status = {"complete": complete,
              "restores": [{"volumeName": f"d{i}", "persistentVolumeClaim": f"c{i}"}
                           for i in range(disks)]}  # fmt: skip
    return VirtualMachineRestore.from_dict(
        _obj("VirtualMachineRestore", name, spec=spec, status=status)
    )


def test_succeeded_snapshots_export_their_time_and_complete_restores_their_disks() -> None:
    """A Succeeded snapshot exports its creationTime in seconds, labelled with the VM, the
    snapshot and the namespace; one still in progress exports nothing. Completed restores'
    disks add up per target VM; an incomplete restore's do not count."""
    registry = Registry()
    snaps = [
        _snapshot("s1", "Succeeded", "2026-11-27T10:00:00Z"),
        _snapshot("s2", "InProgress", None),
    ]
    restores = [
        _restore("r1", complete=True, disks=2),
        _restore("r2", complete=True, disks=1),
        _restore("r3", complete=False, disks=5),
    ]
    registry.add(SnapshotMetrics(snapshots=lambda: snaps, restores=lambda: restores))
    name = "kubevirt_vmsnapshot_succeeded_timestamp_seconds"
    key = {"name": "vm1", "snapshot_name": "s1", "namespace": "ns"}
    assert registry.sample(name, key) == 1795773600.0
    assert registry.sample(name, {**key, "snapshot_name": "s2"}) is None
    restored = "kubevirt_vmsnapshot_disks_restored_from_source"
    assert registry.sample(restored, {"vm_name": "vm1", "vm_namespace": "ns"}) == 3
