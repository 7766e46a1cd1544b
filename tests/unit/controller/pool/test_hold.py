"""Opportunistic statePreservation Offline (controller/pool/keeper.py): the pool holds its
VMs with KubeVirt's finalizer pool.kubevirt.io/finalizer, and a held VM deleted by
someone else first lets go of its DataVolumes, then loses the finalizer; without Offline,
or once its pool is gone, the finalizer is only removed (nothing held for good)."""

from __future__ import annotations

import copy
from typing import Any

from controller.pool.logic import vm_body
from controller.pool.preserve import POOL_FINALIZER
from shared.kube import DATAVOLUMES, VMPOOLS, VMS
from shared.model import VirtualMachine
from shared.model.pool import VirtualMachinePool
from tests.unit.controller.pool.test_controller import observe_vms, rig
from tests.unit.controller.pool.test_logic import pool_dict
from tests.unit.controller.pool.test_preserve import owners, pool_of_two

HOLD = {"opportunistic": {"statePreservation": "Offline"}}


def finalizers(api: Any, name: str) -> list[str]:
    return list(api.stored(VMS, f"ns/{name}")["metadata"].get("finalizers") or [])


def delete_by_someone(api: Any, informers: Any, name: str) -> VirtualMachine:
    """VM `name` as the API shows it once deleted while finalizers hold it."""
    raw = api.stored(VMS, f"ns/{name}")
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    vm = VirtualMachine.from_dict(copy.deepcopy(raw))
    informers.vms.store.upsert(f"ns/{name}", vm)
    return vm


async def held_pool(strategy: dict[str, Any]) -> tuple[Any, Any, Any]:
    """A pool of 2 made with opportunistic Offline (p-0, p-1 held, each owning data-<n>),
    then given `strategy`."""
    return await pool_of_two(HOLD, scaleInStrategy=strategy)


def test_only_opportunistic_offline_makes_vms_held() -> None:
    """vm_body(): the finalizer with opportunistic Offline; none by default or proactive."""
    held = VirtualMachinePool.from_dict(pool_dict(1, scaleInStrategy=HOLD))
    assert vm_body(held, 0)["metadata"]["finalizers"] == [POOL_FINALIZER]
    for spec in ({}, {"scaleInStrategy": {"proactive": {"statePreservation": "Offline"}}}):
        plain = VirtualMachinePool.from_dict(pool_dict(1, **spec))
        assert "finalizers" not in vm_body(plain, 0)["metadata"]


async def test_vms_made_before_get_the_finalizer() -> None:
    """A pool switched to opportunistic Offline puts the finalizer on its VMs lacking it."""
    api, ctl, informers = rig(pool_dict(1))
    await ctl.sync("ns/p")
    observe_vms(api, ctl, informers)
    assert finalizers(api, "p-0") == []
    raw = copy.deepcopy(api.stored(VMPOOLS, "ns/p"))
    raw["spec"]["scaleInStrategy"] = HOLD
    informers.pools.store.upsert("ns/p", VirtualMachinePool.from_dict(raw))
    await ctl.sync("ns/p")
    assert finalizers(api, "p-0") == [POOL_FINALIZER]


async def test_a_held_vm_deleted_lets_go_of_its_datavolumes_then_its_finalizer() -> None:
    """p-1 deleted by someone: data-1 loses its owner first, then p-1 its finalizer (the
    garbage collector then deletes p-1, not data-1); p-0 and data-0 are left alone."""
    api, ctl, informers = await held_pool(HOLD)
    assert finalizers(api, "p-1") == [POOL_FINALIZER]
    delete_by_someone(api, informers, "p-1")
    api.calls.clear()
    await ctl.sync("ns/p")
    assert owners(api, "data-1") == [] and finalizers(api, "p-1") == []
    assert [c for c in api.calls if c[0] == "patch"][:2] == [
        ("patch", "datavolumes"), ("patch", "virtualmachines")]  # fmt: skip
    assert owners(api, "data-0") == ["p-0"] and finalizers(api, "p-0") == [POOL_FINALIZER]


async def test_a_datavolume_not_let_go_keeps_the_vm_held() -> None:
    """data-1 changed meanwhile (Conflict): p-1 keeps its finalizer, ReplicaFailure."""
    api, ctl, informers = await held_pool(HOLD)
    delete_by_someone(api, informers, "p-1")
    api.stored(DATAVOLUMES, "ns/data-1")["metadata"]["resourceVersion"] = "999"
    await ctl.sync("ns/p")
    assert finalizers(api, "p-1") == [POOL_FINALIZER] and owners(api, "data-1") == ["p-1"]
    conditions = api.stored(VMPOOLS, "ns/p")["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["ReplicaFailure"], conditions


async def test_without_offline_the_finalizer_is_only_removed() -> None:
    """The pool switched back to Disabled: a held VM deleted loses its finalizer, its
    DataVolume still owned by it (deleted with it)."""
    api, ctl, informers = await held_pool({"opportunistic": {"statePreservation": "Disabled"}})
    delete_by_someone(api, informers, "p-1")
    await ctl.sync("ns/p")
    assert finalizers(api, "p-1") == [] and owners(api, "data-1") == ["p-1"]


async def test_held_vms_of_a_gone_pool_are_freed() -> None:
    """The pool deleted (gone from the cache), then its VMs deleted by the garbage
    collector: each VM's update queues the pool's key, whose sync removes the finalizer."""
    api, ctl, informers = await held_pool(HOLD)
    informers.pools.store.remove("ns/p")
    _, vm_handlers = ctl.handlers()
    assert vm_handlers.on_update is not None
    for name in ("p-0", "p-1"):
        old = informers.vms.store.get(f"ns/{name}")
        vm_handlers.on_update(old, delete_by_someone(api, informers, name))
    assert len(ctl.queue) == 1
    await ctl.sync("ns/p")
    assert finalizers(api, "p-0") == [] and finalizers(api, "p-1") == []
    assert owners(api, "data-1") == ["p-1"]


async def test_a_held_vm_the_pool_removes_itself_follows_the_proactive_setting() -> None:
    """A held VM the pool deletes itself (autohealing: 3 start failures) with opportunistic
    Offline: its finalizer is removed before the deletion, nothing kept (KubeVirt's rule:
    what the pool deletes follows the proactive setting, Disabled here)."""
    api, ctl, informers = await held_pool(HOLD)
    raw = copy.deepcopy(api.stored(VMPOOLS, "ns/p"))
    raw["spec"]["autohealing"] = {"startUpFailureThreshold": 1}
    informers.pools.store.upsert("ns/p", VirtualMachinePool.from_dict(raw))
    vm = api.stored(VMS, "ns/p-1")
    vm["status"] = {"startFailure": {"consecutiveFailCount": 1}}
    informers.vms.store.upsert("ns/p-1", VirtualMachine.from_dict(copy.deepcopy(vm)))
    api.calls.clear()
    await ctl.sync("ns/p")
    writes = [c for c in api.calls if c[0] in ("patch", "delete")]
    assert writes[:2] == [("patch", "virtualmachines"), ("delete", "virtualmachines")], writes
    assert owners(api, "data-1") == ["p-1"]
