"""The VirtualMachineSnapshot controller over a fake API: a running VM with an agent is
frozen only while its VolumeSnapshots are created and thawed at once; the snapshot is
Succeeded when they are readyToUse; a freeze that hangs thaws and fails with the reason;
a missing VM or a claim without a VolumeSnapshotClass fails naming them; a second sync
(a restart) makes nothing twice."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from controller.informers import build_informers
from controller.snapshot.controller import SnapshotController, SnapshotTiming
from controller.snapshot.logic import freeze_budget
from shared.kube import (
    PVCS,
    STORAGECLASSES,
    VMSNAPSHOTCONTENTS,
    VMSNAPSHOTS,
    VOLUMESNAPSHOTCLASSES,
    VOLUMESNAPSHOTS,
    KubeClient,
    NotFound,
    QueueConfig,
    Registry,
    Resource,
    StatusWriter,
    WorkQueue,
)
from shared.kube.api_types import ListResult
from shared.model import VirtualMachine, VMIPhase
from shared.model.snapshot import VirtualMachineSnapshot
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi

UID = "snap-uid"
VS_NAME = f"vmsnapshot-{UID}-volume-disk"


class SnapApi(FakeApi):
    """FakeApi plus list_all and the freeze/unfreeze subresources (recorded)."""

    def __init__(self, *, hang_freeze: bool = False) -> None:
        super().__init__()
        self.hang_freeze = hang_freeze
        self.actions: list[str] = []

    async def list_all(self, resource: Resource, **_: Any) -> ListResult:
        items = [o for (plural, _), o in self.objects.items() if plural == resource.plural]
        return ListResult(items=items, resource_version="1")

    async def call_subresource(
        self, method: str, resource: Resource, name: str, *, subresource: str, **_: Any
    ) -> dict[str, Any]:
        self.actions.append(subresource)
        if subresource == "freeze" and self.hang_freeze:
            await asyncio.sleep(3600)
        return {}

    async def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        self.calls.append(("delete", resource.plural))
        if self.objects.pop(self._key(resource, name, namespace), None) is None:
            raise NotFound(404, "NotFound", f"{name} not found")
        return {}

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        if resource is VOLUMESNAPSHOTS:
            self.actions.append("create-volumesnapshot")
        obj = dict(body)
        obj["metadata"] = {**obj["metadata"], "uid": f"uid-{obj['metadata']['name']}"}
        return await super().create(resource, obj, namespace=namespace)


def vm_with_claim() -> VirtualMachine:
    vm = builders.make_vm()
    raw = vm.to_dict()
    raw["spec"]["template"]["spec"]["volumes"] = [
        {"name": "disk", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config"}},
    ]
    return VirtualMachine.from_dict(raw)


def rig(
    *, hang_freeze: bool = False, agent: bool = True, snapshot_class: bool = True, vm: bool = True
) -> tuple[SnapApi, SnapshotController, VirtualMachineSnapshot]:
    api = SnapApi(hang_freeze=hang_freeze)
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    ctl = SnapshotController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(QueueConfig(name="snap"), registry=registry),
        writer=StatusWriter(client, VMSNAPSHOTS, model=VirtualMachineSnapshot, registry=registry),
        timing=SnapshotTiming(poll=1.0, freeze_timeout=0.05),
    )
    api.seed(STORAGECLASSES, {"metadata": {"name": "csi-local"}, "provisioner": "csi.example"})
    if snapshot_class:
        api.seed(VOLUMESNAPSHOTCLASSES, {"metadata": {"name": "snaps"}, "driver": "csi.example"})
    api.seed(
        PVCS,
        {
            "metadata": {"name": "data", "namespace": "ns"},
            "spec": {"storageClassName": "csi-local", "accessModes": ["ReadWriteOnce"]},
        },
    )
    if vm:
        the_vm = vm_with_claim()
        informers.vms.store.upsert(the_vm.key, the_vm)
        agent_cond = (builders.condition("AgentConnected"),) if agent else ()
        vmi = builders.make_vmi(phase=VMIPhase.RUNNING, conditions=agent_cond)
        informers.vmis.store.upsert(vmi.key, vmi)
    snap = VirtualMachineSnapshot.from_dict(
        api.seed(
            VMSNAPSHOTS,
            {
                "apiVersion": "snapshot.kubevirt.io/v1beta1",
                "kind": "VirtualMachineSnapshot",
                "metadata": {
                    "name": "snap",
                    "namespace": "ns",
                    "uid": UID,
                    "creationTimestamp": builders.ago(1),
                },
                "spec": {
                    "source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"}
                },
            },
        )
    )
    informers.snapshots.store.upsert(snap.key, snap)
    return api, ctl, snap


def refresh(api: SnapApi, ctl: SnapshotController) -> VirtualMachineSnapshot:
    snap = VirtualMachineSnapshot.from_dict(api.stored(VMSNAPSHOTS, "ns/snap"))
    ctl._informers.snapshots.store.upsert(snap.key, snap)
    return snap


async def test_online_snapshot_freezes_only_around_the_volume_snapshots() -> None:
    """freeze → VolumeSnapshot created → unfreeze; content holds the VM and the backup;
    cloud-init is excluded; InProgress until the VolumeSnapshot is readyToUse."""
    api, ctl, _ = rig()
    await ctl.sync("ns/snap")
    assert api.actions == ["freeze", "create-volumesnapshot", "unfreeze"]
    content = api.stored(VMSNAPSHOTCONTENTS, f"ns/vmsnapshot-content-{UID}")
    (backup,) = content["spec"]["volumeBackups"]
    assert backup["volumeSnapshotName"] == VS_NAME
    assert backup["persistentVolumeClaim"]["spec"]["storageClassName"] == "csi-local"
    assert content["spec"]["source"]["virtualMachine"]["metadata"]["name"] == "vm1"
    vs = api.stored(VOLUMESNAPSHOTS, f"ns/{VS_NAME}")
    assert vs["spec"]["volumeSnapshotClassName"] == "snaps"
    assert vs["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachineSnapshotContent"
    status = refresh(api, ctl).status
    assert status.phase == "InProgress"
    assert status.indications == ("Online", "GuestAgent")
    assert status.snapshot_volumes is not None
    assert status.snapshot_volumes.excluded_volumes == ("cloudinit",)

    api.stored(VOLUMESNAPSHOTS, f"ns/{VS_NAME}")["status"] = {
        "readyToUse": True,
        "creationTime": builders.ago(0),
    }
    await ctl.sync("ns/snap")
    status = refresh(api, ctl).status
    assert status.phase == "Succeeded"
    assert status.ready_to_use is True
    conds = {c.type: c.status for c in status.conditions}
    assert conds == {"Progressing": "False", "Ready": "True"}
    assert api.stored(VMSNAPSHOTCONTENTS, f"ns/vmsnapshot-content-{UID}")["status"]["readyToUse"]
    assert api.actions == ["freeze", "create-volumesnapshot", "unfreeze"]  # nothing twice


async def test_a_restart_after_the_volume_snapshots_makes_nothing_again() -> None:
    """A second sync (as after a controller restart) finds content and VolumeSnapshots."""
    api, ctl, _ = rig()
    await ctl.sync("ns/snap")
    refresh(api, ctl)
    await ctl.sync("ns/snap")
    creates = [c for c in api.calls if c[0] == "create"]
    assert creates == [("create", "virtualmachinesnapshotcontents"), ("create", "volumesnapshots")]


async def test_no_agent_snapshots_without_freezing() -> None:
    """Online without a guest agent: crash-consistent, NoGuestAgent, no freeze."""
    api, ctl, _ = rig(agent=False)
    await ctl.sync("ns/snap")
    assert api.actions == ["create-volumesnapshot"]
    assert refresh(api, ctl).status.indications == ("Online", "NoGuestAgent")


async def test_a_freeze_that_times_out_thaws_and_fails() -> None:
    """The agent never answers: thawed, no VolumeSnapshot, Failed with the reason."""
    api, ctl, _ = rig(hang_freeze=True)
    await ctl.sync("ns/snap")
    assert api.actions == ["freeze", "unfreeze"]
    status = refresh(api, ctl).status
    assert status.phase == "Failed"
    assert status.error is not None and "timed out" in (status.error.message or "")
    assert (("create", "volumesnapshots")) not in api.calls


async def test_a_missing_vm_fails_naming_it() -> None:
    """No VirtualMachine of the source's name: Failed, spec.source named."""
    api, ctl, _ = rig(vm=False)
    await ctl.sync("ns/snap")
    status = refresh(api, ctl).status
    assert status.phase == "Failed"
    assert status.error is not None
    assert "spec.source: VirtualMachine vm1 does not exist" in (status.error.message or "")


async def test_a_claim_without_a_snapshot_class_fails() -> None:
    """The claim's driver has no VolumeSnapshotClass: Failed naming volume and claim."""
    api, ctl, _ = rig(snapshot_class=False)
    await ctl.sync("ns/snap")
    status = refresh(api, ctl).status
    assert status.phase == "Failed"
    assert "volume disk: claim data" in (status.error.message or "") if status.error else False
    assert api.actions == []


async def test_a_passed_deadline_fails() -> None:
    """Created longer ago than failureDeadline and not done: Failed."""
    api, ctl, _ = rig()
    raw = api.stored(VMSNAPSHOTS, "ns/snap")
    raw["spec"]["failureDeadline"] = "1s"
    raw["metadata"]["creationTimestamp"] = builders.ago(60)
    refresh(api, ctl)
    await ctl.sync("ns/snap")
    status = refresh(api, ctl).status
    assert status.phase == "Failed"
    assert "failureDeadline (1s)" in (status.error.message or "") if status.error else False


async def test_a_restart_while_frozen_thaws() -> None:
    """The controller died between the VolumeSnapshots and the thaw (no status written):
    the next sync finds the guest frozen and everything made, and thaws it."""
    api, ctl, _ = rig()
    await ctl.sync("ns/snap")
    api.stored(VMSNAPSHOTS, "ns/snap").pop("status")
    refresh(api, ctl)
    vmi = ctl._informers.vmis.store.get("ns/vm1")
    assert vmi is not None
    frozen = dataclasses.replace(
        vmi, status=dataclasses.replace(vmi.status, fs_freeze_status="frozen")
    )
    ctl._informers.vmis.store.upsert(vmi.key, frozen)
    await ctl.sync("ns/snap")
    assert api.actions == ["freeze", "create-volumesnapshot", "unfreeze", "unfreeze"]


def test_the_freeze_waits_no_longer_than_the_failure_deadline() -> None:
    """The freeze gets the controller's cap, or what is left of failureDeadline when less;
    failureDeadline 0 (none) leaves the cap."""
    created = datetime(2026, 1, 1, tzinfo=UTC)

    def snap(deadline: str | None) -> VirtualMachineSnapshot:
        spec: dict[str, Any] = {"source": {"kind": "VirtualMachine", "name": "vm"}}
        if deadline is not None:
            spec["failureDeadline"] = deadline
        return VirtualMachineSnapshot.from_dict(
            {"metadata": {"name": "s", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}
        )

    later = created + timedelta(seconds=4)
    assert freeze_budget(snap("10s"), later, cap=60.0) == 6.0
    assert freeze_budget(snap(None), later, cap=60.0) == 60.0
    assert freeze_budget(snap("0s"), later, cap=60.0) == 60.0
    assert freeze_budget(snap("3s"), later, cap=60.0) == 0.0
