"""VirtualMachineClone over a fake API: a temporary snapshot, then a temporary restore
carrying the clone's patches (the new MAC, the firmware UUID gone, the SMBIOS serial,
filtered labels), then both deleted and Succeeded once the target carries the restore's
marker (also after a restart); a missing source VM fails naming it."""

from __future__ import annotations

import json
from typing import Any, cast

from controller.informers import build_informers
from controller.snapshot.clone import CloneController
from controller.snapshot.clone_logic import clone_patches, kept
from shared.kube import (
    VMCLONES,
    VMRESTORES,
    VMSNAPSHOTCONTENTS,
    VMSNAPSHOTS,
    KubeClient,
    QueueConfig,
    Registry,
    StatusWriter,
    WorkQueue,
)
from shared.model import VirtualMachine
from shared.model.clone import VirtualMachineClone
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot
from tests.unit.controller import builders
from tests.unit.controller.snapshot.test_restore import content
from tests.unit.controller.snapshot.test_snapshot_controller import SnapApi, vm_with_claim

UID = "clone-uid"
MAC = "02:00:00:00:00:02"


def clone_obj(**spec: Any) -> VirtualMachineClone:
    return VirtualMachineClone.from_dict(
        {
            "apiVersion": "clone.kubevirt.io/v1beta1",
            "kind": "VirtualMachineClone",
            "metadata": {"name": "c", "namespace": "ns", "uid": UID},
            "spec": {
                "source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"},
                "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm2"},
                **spec,
            },
        }
    )


def rig(*, vm: bool = True) -> tuple[SnapApi, CloneController]:
    api = SnapApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    ctl = CloneController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(QueueConfig(name="clone"), registry=registry),
        writer=StatusWriter(client, VMCLONES, model=VirtualMachineClone, registry=registry),
    )
    if vm:
        source = vm_with_claim()
        informers.vms.store.upsert(source.key, source)
    clone = VirtualMachineClone.from_dict(
        api.seed(VMCLONES, clone_obj(newMacAddresses={"default": MAC}).to_dict())
    )
    informers.clones.store.upsert(clone.key, clone)
    return api, ctl


def phase(api: SnapApi, ctl: CloneController) -> str:
    clone = VirtualMachineClone.from_dict(api.stored(VMCLONES, "ns/c"))
    ctl._informers.clones.store.upsert(clone.key, clone)
    return str(clone.phase)


async def test_clone_snapshots_restores_with_patches_and_cleans_up() -> None:
    """snapshot → restore (patches) → target marked → both deleted, Succeeded."""
    api, ctl = rig()
    inf = ctl._informers
    await ctl.sync("ns/c")
    assert phase(api, ctl) == "SnapshotInProgress"
    snap_raw = api.stored(VMSNAPSHOTS, f"ns/tmp-snapshot-{UID}")
    assert snap_raw["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachineClone"

    raw = content()
    raw["metadata"]["name"] = f"vmsnapshot-content-uid-tmp-snapshot-{UID}"
    raw["spec"]["source"]["virtualMachine"]["spec"]["template"]["spec"]["domain"]["devices"][
        "interfaces"
    ] = [{"name": "default", "masquerade": {}, "macAddress": "02:00:00:00:00:01"}]
    api.seed(VMSNAPSHOTCONTENTS, raw)
    snap_raw["status"] = {
        "readyToUse": True,
        "phase": "Succeeded",
        "virtualMachineSnapshotContentName": raw["metadata"]["name"],
    }
    snap = VirtualMachineSnapshot.from_dict(snap_raw)
    inf.snapshots.store.upsert(snap.key, snap)
    await ctl.sync("ns/c")
    assert phase(api, ctl) == "RestoreInProgress"
    restore = api.stored(VMRESTORES, f"ns/tmp-restore-{UID}")
    assert restore["spec"]["target"]["name"] == "vm2"
    patches = [json.loads(p) for p in restore["spec"]["patches"]]
    assert {
        "op": "add",
        "path": "/spec/template/spec/domain/devices/interfaces/0/macAddress",
        "value": MAC,
    } in patches
    inf.restores.store.upsert(f"ns/tmp-restore-{UID}", VirtualMachineRestore.from_dict(restore))

    target = VirtualMachine.from_dict(
        {
            "metadata": {
                "name": "vm2",
                "namespace": "ns",
                "annotations": {"restore.kubevirt.io/lastRestoreUID": f"tmp-restore-{UID}-r"},
            }
        }
    )
    inf.vms.store.upsert(target.key, target)
    await ctl.sync("ns/c")
    assert phase(api, ctl) == "Succeeded"
    assert ("ns/tmp-restore-" + UID) not in {k for (_, k) in api.objects}
    assert (VMSNAPSHOTS.plural, f"ns/tmp-snapshot-{UID}") not in api.objects


async def test_a_missing_source_vm_fails() -> None:
    """No VM of the source's name: Failed, the field named."""
    api, ctl = rig(vm=False)
    await ctl.sync("ns/c")
    assert phase(api, ctl) == "Failed"
    ready = next(
        c for c in api.stored(VMCLONES, "ns/c")["status"]["conditions"] if c["type"] == "Ready"
    )
    assert ready["message"] == "spec.source: VirtualMachine vm1 does not exist"


def test_clone_patches_mac_firmware_and_filters() -> None:
    """No new MAC for an interface: its pinned MAC goes; UUID goes; serial set; a label
    filtered out is removed; user patches come last."""
    clone = clone_obj(
        newSMBiosSerial="serial-2",
        labelFilters=["*", "!secret/*"],
        patches=['{"op": "add", "path": "/metadata/labels/new", "value": "1"}'],
    )
    spec = {
        "template": {
            "spec": {
                "domain": {
                    "devices": {
                        "interfaces": [{"name": "default", "macAddress": "02:00:00:00:00:01"}]
                    },
                    "firmware": {"uuid": "u", "serial": "s"},
                }
            }
        }
    }
    meta = {"labels": {"app": "x", "secret/a": "y"}}
    ops = [json.loads(p) for p in clone_patches(clone, meta, spec)]
    domain = "/spec/template/spec/domain"
    assert ops == [
        {"op": "remove", "path": f"{domain}/devices/interfaces/0/macAddress"},
        {"op": "remove", "path": f"{domain}/firmware/uuid"},
        {"op": "add", "path": f"{domain}/firmware/serial", "value": "serial-2"},
        {"op": "remove", "path": "/metadata/labels/secret~1a"},
        {"op": "add", "path": "/metadata/labels/new", "value": "1"},
    ]


def test_filters_keep_all_by_default_and_the_last_match_wins() -> None:
    """No filters keep everything; "*" then "!x*" drops x-prefixed keys."""
    assert kept("anything", [])
    assert kept("app", ["*", "!x*"]) and not kept("xy", ["*", "!x*"])
