"""VirtualMachineRestore over a fake API: claims made from the snapshot's VolumeSnapshots,
the VM's spec written back (in place, keeping its stopped runStrategy) or a new VM made
(patches applied), the claims handed to the VM, a running target stopped (StopTarget) or
refused (FailImmediate), a not-ready snapshot waited for, a restart making nothing twice."""

from __future__ import annotations

from typing import Any, cast

import pytest

from controller.informers import build_informers
from controller.snapshot.restore import RestoreController
from controller.snapshot.restore_logic import PatchError, apply_patches
from shared.kube import (
    PVCS,
    VMRESTORES,
    VMS,
    VMSNAPSHOTCONTENTS,
    KubeClient,
    QueueConfig,
    Registry,
    StatusWriter,
    WorkQueue,
)
from shared.model import VirtualMachine, VMIPhase
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot
from tests.unit.controller import builders
from tests.unit.controller.snapshot.test_snapshot_controller import SnapApi, vm_with_claim

SNAP_UID = "snap-uid"
RESTORE_UID = "restore-uid"
VS = f"vmsnapshot-{SNAP_UID}-volume-disk"


def content() -> dict[str, Any]:
    vm = vm_with_claim().to_dict()
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineSnapshotContent",
        "metadata": {"name": f"vmsnapshot-content-{SNAP_UID}", "namespace": "ns"},
        "spec": {
            "virtualMachineSnapshotName": "snap",
            "source": {
                "virtualMachine": {
                    "metadata": {"name": "vm1", "labels": {"app": "x"}},
                    "spec": vm["spec"],
                }
            },
            "volumeBackups": [
                {
                    "volumeName": "disk",
                    "persistentVolumeClaim": {
                        "metadata": {"name": "data"},
                        "spec": {"storageClassName": "csi-local", "accessModes": ["ReadWriteOnce"]},
                    },
                    "volumeSnapshotName": VS,
                }
            ],
        },
    }


def rig(
    *,
    target: str = "vm1",
    ready: bool = True,
    running: bool = False,
    policy: str | None = None,
    patches: list[str] | None = None,
) -> tuple[SnapApi, RestoreController]:
    api = SnapApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    ctl = RestoreController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(QueueConfig(name="restore"), registry=registry),
        writer=StatusWriter(client, VMRESTORES, model=VirtualMachineRestore, registry=registry),
    )
    api.seed(VMSNAPSHOTCONTENTS, content())
    snap = VirtualMachineSnapshot.from_dict(
        {
            "metadata": {"name": "snap", "namespace": "ns", "uid": SNAP_UID},
            "spec": {"source": {"kind": "VirtualMachine", "name": "vm1"}},
            "status": {
                "readyToUse": ready,
                "phase": "Succeeded" if ready else "InProgress",
                "virtualMachineSnapshotContentName": f"vmsnapshot-content-{SNAP_UID}",
            },
        }
    )
    informers.snapshots.store.upsert(snap.key, snap)
    vm_raw = vm_with_claim().to_dict()
    vm_raw["spec"]["runStrategy"] = "Always" if running else "Halted"
    vm = VirtualMachine.from_dict(api.seed(VMS, vm_raw))
    informers.vms.store.upsert(vm.key, vm)
    if running:
        vmi = builders.make_vmi(phase=VMIPhase.RUNNING)
        informers.vmis.store.upsert(vmi.key, vmi)
    spec: dict[str, Any] = {
        "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": target},
        "virtualMachineSnapshotName": "snap",
    }
    if policy:
        spec["targetReadinessPolicy"] = policy
    if patches:
        spec["patches"] = patches
    restore = VirtualMachineRestore.from_dict(
        api.seed(
            VMRESTORES,
            {
                "apiVersion": "snapshot.kubevirt.io/v1beta1",
                "kind": "VirtualMachineRestore",
                "metadata": {
                    "name": "restore",
                    "namespace": "ns",
                    "uid": RESTORE_UID,
                    "creationTimestamp": builders.ago(1),
                },
                "spec": spec,
            },
        )
    )
    informers.restores.store.upsert(restore.key, restore)
    return api, ctl


def status(api: SnapApi, ctl: RestoreController) -> dict[str, Any]:
    raw = api.stored(VMRESTORES, "ns/restore")
    restore = VirtualMachineRestore.from_dict(raw)
    ctl._informers.restores.store.upsert(restore.key, restore)
    return cast(dict[str, Any], raw.get("status") or {})


async def test_in_place_restore_of_a_stopped_vm() -> None:
    """A claim from the VolumeSnapshot, the VM's volume on it, still Halted, complete."""
    api, ctl = rig()
    await ctl.sync("ns/restore")
    claim = api.stored(PVCS, f"ns/restore-{RESTORE_UID}-disk")
    assert claim["spec"]["dataSource"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": VS,
    }
    assert claim["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachine"
    vm = api.stored(VMS, "ns/vm1")
    assert vm["spec"]["runStrategy"] == "Halted"
    volumes = vm["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["persistentVolumeClaim"] == {"claimName": f"restore-{RESTORE_UID}-disk"}
    st = status(api, ctl)
    assert st["complete"] is True
    assert st["restores"][0]["persistentVolumeClaim"] == f"restore-{RESTORE_UID}-disk"
    writes = len(api.writes())
    await ctl.sync("ns/restore")
    assert len(api.writes()) == writes  # complete: nothing more


async def test_a_restart_mid_restore_makes_nothing_twice() -> None:
    """The claim exists (made by this restore) and the VM carries the marker: no new writes
    to them."""
    api, ctl = rig()
    await ctl.sync("ns/restore")
    api.stored(VMRESTORES, "ns/restore")["status"] = {}
    status(api, ctl)
    vm = VirtualMachine.from_dict(api.stored(VMS, "ns/vm1"))
    ctl._informers.vms.store.upsert(vm.key, vm)
    await ctl.sync("ns/restore")
    creates = [c for c in api.calls if c[0] in ("create", "update")]
    assert creates == [("create", "persistentvolumeclaims"), ("update", "virtualmachines")]


async def test_restore_into_a_new_vm_with_patches() -> None:
    """Target vm2 does not exist: made with the snapshot's spec and the patches."""
    patch = '{"op": "replace", "path": "/spec/runStrategy", "value": "Halted"}'
    api, ctl = rig(target="vm2", patches=[patch])
    await ctl.sync("ns/restore")
    vm2 = api.stored(VMS, "ns/vm2")
    assert vm2["spec"]["runStrategy"] == "Halted"
    assert vm2["metadata"]["labels"] == {"app": "x"}
    assert vm2["metadata"]["annotations"]["restore.kubevirt.io/lastRestoreUID"] == (
        f"restore-{RESTORE_UID}"
    )
    assert status(api, ctl)["complete"] is True


async def test_stop_target_stops_a_running_vm_first() -> None:
    """StopTarget: runStrategy Halted, then it waits for the VMI to go."""
    api, ctl = rig(running=True, policy="StopTarget")
    await ctl.sync("ns/restore")
    assert api.stored(VMS, "ns/vm1")["spec"]["runStrategy"] == "Halted"
    st = status(api, ctl)
    assert not st.get("complete")
    progressing = next(c for c in st["conditions"] if c["type"] == "Progressing")
    assert progressing["message"] == "stopping VirtualMachine vm1"
    assert ("create", "persistentvolumeclaims") not in api.calls


async def test_fail_immediate_refuses_a_running_target() -> None:
    """FailImmediate on a running VM: Ready False with the reason, nothing made."""
    api, ctl = rig(running=True, policy="FailImmediate")
    await ctl.sync("ns/restore")
    ready = next(c for c in status(api, ctl)["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    assert "FailImmediate" in ready["message"]
    assert ("create", "persistentvolumeclaims") not in api.calls


async def test_a_snapshot_not_ready_is_waited_for() -> None:
    """The snapshot is not readyToUse: Progressing says so, nothing is made."""
    api, ctl = rig(ready=False)
    await ctl.sync("ns/restore")
    progressing = next(c for c in status(api, ctl)["conditions"] if c["type"] == "Progressing")
    assert progressing["message"] == "VirtualMachineSnapshot snap is not ready to use"
    assert ("create", "persistentvolumeclaims") not in api.calls


def test_patches_add_replace_remove_and_refuse_a_bad_path() -> None:
    """RFC 6902 add/replace/remove; a path that does not exist is a PatchError."""
    obj = {"spec": {"a": [1, 2], "b": "x"}}
    out = apply_patches(
        obj,
        [
            '[{"op": "add", "path": "/spec/a/-", "value": 3}]',
            '{"op": "replace", "path": "/spec/b", "value": "y"}',
            '{"op": "remove", "path": "/spec/a/0"}',
        ],
    )
    assert out == {"spec": {"a": [2, 3], "b": "y"}}
    with pytest.raises(PatchError, match="/spec/nope/x"):
        apply_patches(obj, ['{"op": "replace", "path": "/spec/nope/x", "value": 1}'])


async def test_in_place_volume_policy_replaces_the_claim() -> None:
    """volumeRestorePolicy InPlace: the old claim is deleted first (waited for), then made
    again from the VolumeSnapshot under its own name."""
    api, ctl = rig()
    api.seed(PVCS, {"metadata": {"name": "data", "namespace": "ns"}, "spec": {}})
    raw = api.stored(VMRESTORES, "ns/restore")
    raw["spec"]["volumeRestorePolicy"] = "InPlace"
    status(api, ctl)
    await ctl.sync("ns/restore")
    assert ("delete", "persistentvolumeclaims") in api.calls
    progressing = next(c for c in status(api, ctl)["conditions"] if c["type"] == "Progressing")
    assert progressing["message"] == "waiting for the old claim data to be deleted"
    await ctl.sync("ns/restore")
    claim = api.stored(PVCS, "ns/data")
    assert claim["spec"]["dataSource"]["name"] == VS
    assert status(api, ctl)["complete"] is True
