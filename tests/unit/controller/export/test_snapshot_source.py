"""An export of a VirtualMachineSnapshot over a fake API server: Pending while the snapshot
is missing or not readyToUse; then one claim per volume backup restored from its
VolumeSnapshot (`<export>-<claim>`, controlled by the export) and served by the exporter pod;
a claim of that name that is not the export's blocks it (InUse)."""

from __future__ import annotations

from typing import Any

from shared.kube import PODS, PVCS, VMSNAPSHOTCONTENTS
from shared.kube.resources import VMEXPORTS
from shared.model.snapshot import VirtualMachineSnapshot
from tests.unit.controller.export.test_controller import export, refresh, rig, status

SOURCE = {"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot", "name": "snap"}


def snapshot(*, ready: bool) -> VirtualMachineSnapshot:
    return VirtualMachineSnapshot.from_dict(
        {"metadata": {"name": "snap", "namespace": "ns", "uid": "s1"},
         "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm"}},
         "status": {"readyToUse": ready, "virtualMachineSnapshotContentName": "content-s1"}}
    )  # fmt: skip


def content() -> dict[str, Any]:
    backup = {
        "volumeName": "data",
        "volumeSnapshotName": "vmsnapshot-s1-volume-data",
        "persistentVolumeClaim": {
            "metadata": {"name": "disk"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-local",
                     "volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}},
                     "volumeName": "pv-1"},
        },
    }  # fmt: skip
    return {
        "metadata": {"name": "content-s1", "namespace": "ns"},
        "spec": {"virtualMachineSnapshotName": "snap", "volumeBackups": [backup]},
    }


def reason(api: Any) -> str:
    (cond,) = status(api)["conditions"]
    return str(cond["reason"])


async def test_snapshot_export_restores_its_claims_and_serves_them() -> None:
    """Missing, then not ready: Pending with the reason and no pod. Ready: the claim
    `exp-disk` made from the VolumeSnapshot (the backed-up spec without volumeName), owned
    by the export, mounted by the exporter pod as a Block device and named in the links."""
    api, ctl, informers = rig()
    api.seed(VMEXPORTS, export(source=SOURCE))
    refresh(api, informers)
    await ctl.sync("ns/exp")
    assert reason(api) == "VMSnapshotNotFound"
    informers.snapshots.store.upsert("ns/snap", snapshot(ready=False))
    await ctl.sync("ns/exp")
    assert reason(api) == "VMSnapshotNotReady"
    assert (PODS.plural, "ns/virt-export-exp") not in api.objects

    informers.snapshots.store.upsert("ns/snap", snapshot(ready=True))
    api.seed(VMSNAPSHOTCONTENTS, content())
    refresh(api, informers)
    await ctl.sync("ns/exp")
    claim = api.stored(PVCS, "ns/exp-disk")
    assert claim["spec"]["dataSource"] == {
        "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
        "name": "vmsnapshot-s1-volume-data",
    }  # fmt: skip
    assert "volumeName" not in claim["spec"] and claim["spec"]["volumeMode"] == "Block"
    (owner,) = claim["metadata"]["ownerReferences"]
    assert owner["uid"] == "u1" and owner["controller"] is True
    pod = api.stored(PODS, "ns/virt-export-exp")
    (device,) = pod["spec"]["containers"][0]["volumeDevices"]
    assert device["devicePath"] == "/export-volumes/exp-disk"
    pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    refresh(api, informers)
    await ctl.sync("ns/exp")
    (volume,) = status(api)["links"]["internal"]["volumes"]
    assert status(api)["phase"] == "Ready" and volume["name"] == "exp-disk"


async def test_a_foreign_claim_of_the_restored_name_blocks() -> None:
    """`exp-disk` already there and not the export's: Pending (InUse) naming it, no pod."""
    api, ctl, informers = rig()
    api.seed(VMEXPORTS, export(source=SOURCE))
    api.seed(PVCS, {"metadata": {"name": "exp-disk", "namespace": "ns"}, "spec": {}})
    api.seed(VMSNAPSHOTCONTENTS, content())
    informers.snapshots.store.upsert("ns/snap", snapshot(ready=True))
    refresh(api, informers)
    await ctl.sync("ns/exp")
    (cond,) = status(api)["conditions"]
    assert cond["reason"] == "InUse" and "exp-disk" in cond["message"]
    assert (PODS.plural, "ns/virt-export-exp") not in api.objects
