"""A pool's scale-in statePreservation (controller/pool/preserve.py): with Offline a VM
scaled in lets go of its DataVolumes (ownerReference removed) before it is deleted, a VM
whose DataVolume could not be let go is kept, Disabled leaves them to the garbage
collector, and a member made again takes its DataVolumes back."""

from __future__ import annotations

import copy
from typing import Any

from controller.pool import preserve
from controller.pool.logic import vm_body
from shared.kube import DATAVOLUMES, VMPOOLS, VMS
from shared.model import VirtualMachine
from shared.model.datavolume import DataVolume
from shared.model.pool import VirtualMachinePool
from tests.unit.controller.pool.test_controller import names, observe_vms, rig
from tests.unit.controller.pool.test_logic import pool_dict

OFFLINE = {"proactive": {"statePreservation": "Offline",
                         "selectionPolicy": {"sortPolicy": "DescendingOrder"}}}  # fmt: skip
DISABLED = {"proactive": {"selectionPolicy": {"sortPolicy": "DescendingOrder"}}}


def seed_datavolume(api: Any, informers: Any, name: str, vm: VirtualMachine | None) -> None:
    """DataVolume `name` (controlled by `vm`, or by nothing), in the API and the cache."""
    refs = [vm.controller_reference().to_dict()] if vm is not None else []
    raw = {"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
           "metadata": {"name": name, "namespace": "ns", "uid": f"dv-{name}",
                        "ownerReferences": refs},
           "spec": {}, "status": {"phase": "Succeeded"}}  # fmt: skip
    stored = api.seed(DATAVOLUMES, raw)
    informers.datavolumes.store.upsert(f"ns/{name}", DataVolume.from_dict(stored))


async def pool_of_two(strategy: dict[str, Any], **then: Any) -> tuple[Any, Any, Any]:
    """A pool of 2 made with `strategy` (p-0, p-1, each owning its data-<n>), then its
    spec changed by `then` in the cache."""
    api, ctl, informers = rig(pool_dict(2, scaleInStrategy=strategy))
    await ctl.sync("ns/p")
    observe_vms(api, ctl, informers)
    for i in (0, 1):
        seed_datavolume(api, informers, f"data-{i}", informers.vms.store.get(f"ns/p-{i}"))
    raw = copy.deepcopy(api.stored(VMPOOLS, "ns/p"))
    raw["spec"].update(then)
    informers.pools.store.upsert("ns/p", VirtualMachinePool.from_dict(raw))
    return api, ctl, informers


async def two_members(strategy: dict[str, Any]) -> tuple[Any, Any, Any]:
    """A pool of 2 (p-0, p-1, each owning its data-<n>), then scaled to 1."""
    return await pool_of_two(strategy, replicas=1)


def owners(api: Any, name: str) -> list[str]:
    refs = api.stored(DATAVOLUMES, f"ns/{name}")["metadata"].get("ownerReferences") or []
    return [r["name"] for r in refs]


async def test_offline_lets_go_of_the_datavolumes_then_deletes_the_vm() -> None:
    """Offline, 2 → 1: data-1 loses its owner (p-1) first, then p-1 is deleted; data-1
    stays, data-0 stays p-0's."""
    api, ctl, _ = await two_members(OFFLINE)
    api.calls.clear()
    await ctl.sync("ns/p")
    assert names(api, VMS) == ["p-0"]
    assert owners(api, "data-1") == [] and owners(api, "data-0") == ["p-0"]
    writes = [c for c in api.calls if c[0] in ("patch", "delete")]
    assert writes[:2] == [("patch", "datavolumes"), ("delete", "virtualmachines")], writes


async def test_disabled_leaves_the_datavolumes_to_their_vm() -> None:
    """Disabled (the default): p-1 is deleted, data-1 still owned by it (the garbage
    collector deletes it with the VM); no DataVolume is patched."""
    api, ctl, _ = await two_members(DISABLED)
    api.calls.clear()
    await ctl.sync("ns/p")
    assert names(api, VMS) == ["p-0"]
    assert owners(api, "data-1") == ["p-1"]
    assert ("patch", "datavolumes") not in api.calls


async def test_a_datavolume_not_let_go_keeps_its_vm() -> None:
    """Offline, data-1 changed since the cache saw it (Conflict): p-1 is not deleted
    (its claim would go with it), the pool reports ReplicaFailure and retries."""
    api, ctl, informers = await two_members(OFFLINE)
    stale = informers.datavolumes.store.get("ns/data-1")
    api.stored(DATAVOLUMES, "ns/data-1")["metadata"]["resourceVersion"] = "999"
    assert stale.metadata.resource_version != "999"
    await ctl.sync("ns/p")
    assert names(api, VMS) == ["p-0", "p-1"]
    assert owners(api, "data-1") == ["p-1"]
    conditions = api.stored(VMPOOLS, "ns/p")["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["ReplicaFailure"], conditions


async def test_a_member_made_again_takes_its_datavolume_back() -> None:
    """p-1 made again (scale-out) with data-1 left without a controller: the pool gives
    data-1 back to the new p-1 (controller reference); data-0, owned, is left alone."""
    api, ctl, informers = rig(pool_dict(2, scaleInStrategy=OFFLINE))
    await ctl.sync("ns/p")
    observe_vms(api, ctl, informers)
    seed_datavolume(api, informers, "data-0", informers.vms.store.get("ns/p-0"))
    seed_datavolume(api, informers, "data-1", None)
    await ctl.sync("ns/p")
    [ref] = api.stored(DATAVOLUMES, "ns/data-1")["metadata"]["ownerReferences"]
    vm = informers.vms.store.get("ns/p-1")
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "VirtualMachine", "p-1", vm.uid, True)  # fmt: skip
    assert owners(api, "data-0") == ["p-0"]


def test_only_proactive_offline_or_online_preserves() -> None:
    """preserving(): proactive Offline, and Online as KubeVirt 1.8 (any value but
    Disabled); Disabled, no strategy, opportunistic only: no."""

    def pool(strategy: dict[str, Any] | None) -> VirtualMachinePool:
        spec = {"scaleInStrategy": strategy} if strategy is not None else {}
        return VirtualMachinePool.from_dict(pool_dict(1, **spec))

    assert preserve.preserving(pool(OFFLINE))
    assert preserve.preserving(pool({"proactive": {"statePreservation": "Online"}}))
    assert not preserve.preserving(pool(DISABLED))
    assert not preserve.preserving(pool(None))
    assert not preserve.preserving(pool({"opportunistic": {"statePreservation": "Disabled"}}))


def test_release_takes_only_what_the_vm_controls() -> None:
    """to_release(): the VM's template and volume DataVolumes it controls; another
    owner's DataVolume of the same name and a missing one are left out."""
    p = VirtualMachinePool.from_dict(pool_dict(1))
    raw = vm_body(p, 0)
    raw["metadata"]["uid"] = "vm-uid"
    vm = VirtualMachine.from_dict(raw)
    mine = DataVolume.from_dict({"metadata": {"name": "data-0", "namespace": "ns",
        "ownerReferences": [vm.controller_reference().to_dict()]}})  # fmt: skip
    other = DataVolume.from_dict({"metadata": {"name": "data-0", "namespace": "ns",
        "ownerReferences": [{"kind": "VirtualMachine", "name": "x", "uid": "u2",
                             "controller": True}]}})  # fmt: skip
    assert preserve.to_release(vm, {"data-0": mine}.get) == [mine]
    assert preserve.to_release(vm, {"data-0": other}.get) == []
    assert preserve.to_release(vm, lambda name: None) == []
    patch = preserve.released(mine, vm)
    assert patch["metadata"]["ownerReferences"] == []
