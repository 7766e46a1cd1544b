"""Claims a VMI names are read before its launcher pod is made: a missing claim makes no
pod and a Synchronized=False/FailedPvcNotFound condition naming it (the VM shows
ErrorPvcNotFound); once it exists the pod is made with it and the condition goes; a Lost
claim or one of an unknown volumeMode is refused with its reason; a block-mode claim is the
compute container's device."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.errors import SyncError
from controller.services.template import TemplateService
from controller.services.volumes.claims import Claim
from controller.vm.logic import printable_status
from shared.kube import PVCS
from shared.model import PrintableStatus, VirtualMachine, VirtualMachineInstance
from tests.unit.controller.builders import NOW, make_migration, vmi_dict
from tests.unit.controller.vmi.test_controller import KEY, Rig


def _vmi_with_claim() -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["disks"] = [{"name": "data", "disk": {"bus": "virtio"}}]
    raw["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "mypvc"}}]
    return raw


def _claim(*, phase: str = "Bound", mode: str = "Filesystem") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "mypvc", "namespace": "ns"},
        "spec": {"volumeMode": mode, "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": phase, "capacity": {"storage": "2Gi"}},
    }


async def test_a_missing_claim_makes_no_pod_and_a_condition_naming_it() -> None:
    """No claim: no pod, Synchronized=False/FailedPvcNotFound naming ns/mypvc, retried;
    the VM's printableStatus is ErrorPvcNotFound. Once the claim exists, the pod is made
    with it (its size for the launcher) and the condition is gone."""
    rig = Rig()
    rig.seed_vmi(_vmi_with_claim())
    with pytest.raises(SyncError) as err:
        await rig.ctl.sync(KEY)
    assert err.value.requeue
    assert "create" not in rig.writes()
    vmi = rig.stored_vmi()
    cond = vmi.status.condition("Synchronized")
    assert cond is not None and (cond.status, cond.reason) == ("False", "FailedPvcNotFound")
    assert "PVC ns/mypvc does not exist" in (cond.message or "")
    vm = VirtualMachine.from_dict({"metadata": {"name": "vm1", "namespace": "ns"}, "spec": {}})
    assert printable_status(vm, vmi, vm.status, now=NOW) == PrintableStatus.PVC_NOT_FOUND

    rig.api.seed(PVCS, _claim())
    rig.informers.vmis.store.upsert(KEY, vmi)
    await rig.ctl.sync(KEY)
    pods = [o for (plural, _), o in rig.api.objects.items() if plural == "pods"]
    assert len(pods) == 1
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "mypvc"}}
    assert volume in pods[0]["spec"]["volumes"]
    assert f"data={2 * 1024**3}" in pods[0]["spec"]["containers"][0]["args"]
    assert rig.stored_vmi().status.condition("Synchronized") is None


@pytest.mark.parametrize(
    ("claim", "reason", "text", "requeue"),
    [
        pytest.param(_claim(phase="Lost"), "FailedPvcLost", "is Lost", True, id="lost"),
        pytest.param(
            _claim(mode="Tape"), "FailedPvcUnsupported", "volumeMode Tape", False, id="mode"
        ),
    ],
)
async def test_unusable_claims_are_refused_with_why(
    claim: dict[str, Any], reason: str, text: str, requeue: bool
) -> None:
    """A Lost claim or one of an unknown volumeMode: no pod, a condition with its reason
    and why."""
    rig = Rig()
    rig.api.seed(PVCS, claim)
    rig.seed_vmi(_vmi_with_claim())
    with pytest.raises(SyncError) as err:
        await rig.ctl.sync(KEY)
    assert (err.value.reason, err.value.requeue) == (reason, requeue)
    assert "create" not in rig.writes()
    cond = rig.stored_vmi().status.condition("Synchronized")
    assert cond is not None and cond.reason == reason and text in (cond.message or "")


async def test_an_unschedulable_pod_names_the_claims_not_bound() -> None:
    """The claim exists but is not bound and the scheduler cannot place the pod: the
    VMI's PodScheduled=False condition names the claim and keeps the scheduler's why."""
    rig = Rig()
    rig.api.seed(PVCS, _claim(phase="Pending"))
    rig.seed_vmi(_vmi_with_claim())
    await rig.ctl.sync(KEY)
    scheduler_says = "0/2 nodes are available: 2 node(s) didn't find available persistent volumes"
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": scheduler_says,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    rig.observe_pods(phase="Pending", conditions=[unschedulable])
    rig.informers.vmis.store.upsert(KEY, rig.stored_vmi())
    await rig.ctl.sync(KEY)
    cond = rig.stored_vmi().status.condition("PodScheduled")
    assert cond is not None and cond.status == "False"
    assert cond.message == f"PVC ns/mypvc is not bound (Pending): {scheduler_says}"


@pytest.mark.parametrize("modes", [["ReadWriteMany"], ["ReadWriteOnce"]])
async def test_the_handoff_describes_each_bound_claim_once(modes: list[str]) -> None:
    """From the handoff on, status.volumeStatus carries the claim's info with its bound
    volume's access modes (the claim's status.accessModes), in the Scheduled write itself;
    later syncs read the claim no more."""
    rig = Rig()
    claim = _claim()
    claim["status"]["accessModes"] = modes
    claim["spec"]["accessModes"] = ["ReadWriteOnce", "ReadWriteMany"]
    rig.api.seed(PVCS, claim)
    rig.seed_vmi(_vmi_with_claim())
    await rig.ctl.sync(KEY)
    rig.observe_pods(phase="Running")
    await rig.ctl.sync(KEY)
    assert rig.writes() == ["create", "patch", "patch", "patch"]
    vmi = rig.stored_vmi()
    assert vmi.status.phase == "Scheduled"
    status = vmi.status.volume_state("data")
    assert status is not None and status.persistent_volume_claim_info is not None
    info = status.persistent_volume_claim_info
    assert (info.claim_name, info.access_modes, info.shared) == (
        "mypvc",
        tuple(modes),
        modes == ["ReadWriteMany"],
    )
    assert info.capacity == {"storage": "2Gi"} and info.requests == {"storage": "1Gi"}

    reads = len(rig.api.calls)
    rig.informers.vmis.store.upsert(KEY, vmi)
    await rig.ctl.sync(KEY)
    assert ("get", "persistentvolumeclaims") not in rig.api.calls[reads:]


async def test_a_block_claim_is_the_compute_containers_device() -> None:
    """A volumeMode Block claim is a pod volume given to the compute container as a device
    at /dev/vmi-disks/<volume> (volumeDevices), not mounted, with no disk size to make."""
    rig = Rig()
    rig.api.seed(PVCS, _claim(mode="Block"))
    rig.seed_vmi(_vmi_with_claim())
    await rig.ctl.sync(KEY)
    (pod,) = [o for (plural, _), o in rig.api.objects.items() if plural == "pods"]
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "mypvc"}}
    assert volume in pod["spec"]["volumes"]
    compute = pod["spec"]["containers"][0]
    assert compute["volumeDevices"] == [{"name": "data", "devicePath": "/dev/vmi-disks/data"}]
    assert all(m["name"] != "data" for m in compute["volumeMounts"])
    assert not any(a.startswith("data=") for a in compute["args"])
    assert rig.stored_vmi().status.condition("Synchronized") is None


async def test_an_expanded_claim_reaches_the_volume_status_and_requeues_its_vmi() -> None:
    """The claim grows (its informer's update): the VMI naming it is queued, and its sync
    carries the new capacity and request into volumeStatus (ExpandDisks' first half); an
    update that leaves the capacity alone queues nothing."""
    rig = Rig()
    claim = _claim()
    claim["status"]["accessModes"] = ["ReadWriteOnce"]
    rig.api.seed(PVCS, claim)
    rig.seed_vmi(_vmi_with_claim())
    await rig.ctl.sync(KEY)
    rig.observe_pods(phase="Running")
    await rig.ctl.sync(KEY)
    rig.informers.vmis.store.upsert(KEY, rig.stored_vmi())
    old = Claim.from_dict(claim)
    grown = dict(claim, status=dict(claim["status"], capacity={"storage": "4Gi"}))
    grown["spec"] = {"resources": {"requests": {"storage": "4Gi"}}}
    rig.informers.claims.store.upsert("ns/mypvc", Claim.from_dict(grown))
    while len(rig.ctl.queue):
        rig.ctl.queue.done(str(await rig.ctl.queue.get()))
    on_update = rig.ctl.claim_handlers().on_update
    assert on_update is not None
    on_update(old, old)
    assert len(rig.ctl.queue) == 0
    on_update(old, Claim.from_dict(grown))
    assert len(rig.ctl.queue) == 1
    await rig.ctl.sync(KEY)
    info = rig.stored_vmi().status.volume_state("data").persistent_volume_claim_info  # type: ignore[union-attr]
    assert info is not None
    assert info.capacity == {"storage": "4Gi"} and info.requests == {"storage": "4Gi"}


def test_a_migration_target_pod_has_the_block_claims_devices() -> None:
    """The target of a VMI on a Block claim gets the claim as a device at the same path
    as the source's pod (its launcher opens the same node), not as a mount."""
    vmi = VirtualMachineInstance.from_dict(_vmi_with_claim())
    block = Claim.from_dict(_claim(mode="Block"))
    target = TemplateService(TemplateConfig()).target_pod(
        vmi, make_migration(), source_node="node01", claims={"mypvc": block}
    )
    compute = target["spec"]["containers"][0]
    assert compute["volumeDevices"] == [{"name": "data", "devicePath": "/dev/vmi-disks/data"}]
