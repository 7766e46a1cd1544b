"""The pool controller over a fake API server: VMs `<pool>-<index>` created once however
often it syncs before the cache catches up, and a template change rolled to the VMs
(rewritten, their VMIs restarted), within maxUnavailable."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, cast

from controller.informers import build_informers
from controller.pool.controller import PoolController
from controller.pool.logic import REVISION_LABEL, template_hash
from shared.kube import (
    VMIS,
    VMPOOLS,
    VMS,
    Expectations,
    KubeClient,
    QueueConfig,
    Registry,
    Resource,
    StatusWriter,
    WorkQueue,
)
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.pool import VirtualMachinePool
from tests.unit.controller import builders
from tests.unit.controller.pool.test_logic import pool_dict
from tests.unit.controller.replicaset.test_controller import FleetApi
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers


def names(api: FakeApi, resource: Resource) -> list[str]:
    return sorted(k.split("/")[1] for (plural, k) in api.objects if plural == resource.plural)


def rig(raw: dict[str, Any]) -> tuple[FleetApi, PoolController, Any]:
    api = FleetApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    clock = FakeClock()
    ctl = PoolController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(
            QueueConfig(name="pool"), registry=registry, clock=clock, timers=FakeTimers(clock)
        ),
        expectations=Expectations(),
        writer=StatusWriter(client, VMPOOLS, model=VirtualMachinePool, registry=registry),
    )
    stored = api.seed(VMPOOLS, raw)
    informers.pools.store.upsert("ns/p", VirtualMachinePool.from_dict(stored))
    return api, ctl, informers


def observe_vms(api: FleetApi, ctl: PoolController, informers: Any) -> None:
    _, vm_handlers = ctl.handlers()
    assert vm_handlers.on_add is not None
    for (plural, key), raw in list(api.objects.items()):
        if plural == "virtualmachines" and key not in informers.vms.store:
            vm = VirtualMachine.from_dict(copy.deepcopy(raw))
            informers.vms.store.upsert(key, vm)
            vm_handlers.on_add(vm)


async def test_syncs_before_the_cache_catches_up_create_each_vm_once() -> None:
    """Two syncs, then the cache shows the VMs: p-0 and p-1, once each; status replicas 2."""
    api, ctl, informers = rig(pool_dict(2))
    await ctl.sync("ns/p")
    await ctl.sync("ns/p")
    assert names(api, VMS) == ["p-0", "p-1"]
    assert [c for c in api.calls if c == ("create", "virtualmachines")] == [
        ("create", "virtualmachines")
    ] * 2
    observe_vms(api, ctl, informers)
    await ctl.sync("ns/p")
    assert api.stored(VMPOOLS, "ns/p")["status"]["replicas"] == 2


async def test_a_template_change_is_rolled_to_the_vms() -> None:
    """New template: each VM rewritten with the new revision, its VMI deleted to restart."""
    api, ctl, informers = rig(pool_dict(1))
    await ctl.sync("ns/p")
    observe_vms(api, ctl, informers)
    seed_vmi(api, informers, "p-0")
    new = change_template(api, informers, {"guest": "96Mi"})
    await ctl.sync("ns/p")
    vm = api.stored(VMS, "ns/p-0")
    assert vm["metadata"]["labels"][REVISION_LABEL] == template_hash(new)
    assert vm["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "96Mi"}
    assert names(api, VMIS) == []


def seed_vmi(api: FleetApi, informers: Any, name: str) -> None:
    """A Ready VMI of VM `name` (owned by it), in the API and the cache; the VM Ready."""
    vm = informers.vms.store.get(f"ns/{name}")
    owner = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": name,
             "uid": vm.uid, "controller": True}  # fmt: skip
    raw = {"metadata": {"name": name, "namespace": "ns", "uid": f"vmi-{name}",
                        "ownerReferences": [owner]},
           "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    api.seed(VMIS, raw)
    informers.vmis.store.upsert(f"ns/{name}", VirtualMachineInstance.from_dict(raw))
    ready = dataclasses.replace(vm, status=dataclasses.replace(vm.status, ready=True))
    informers.vms.store.upsert(f"ns/{name}", ready)


def change_template(api: FleetApi, informers: Any, memory: dict[str, str]) -> VirtualMachinePool:
    raw = copy.deepcopy(api.stored(VMPOOLS, "ns/p"))
    raw["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]["memory"] = memory
    new = VirtualMachinePool.from_dict(raw)
    informers.pools.store.upsert("ns/p", new)
    return new


async def test_max_unavailable_bounds_the_restarts() -> None:
    """maxUnavailable 1 over two Ready VMs: one VM rewritten and its VMI restarted; the
    pool waits until that VMI's deletion is seen, then counts that VM unavailable (no
    VMI) and restarts nothing more; once it is Ready again the other VM is rolled."""
    api, ctl, informers = rig(pool_dict(2, maxUnavailable=1))
    await ctl.sync("ns/p")
    observe_vms(api, ctl, informers)
    for name in ("p-0", "p-1"):
        seed_vmi(api, informers, name)
    change_template(api, informers, {"guest": "96Mi"})
    await ctl.sync("ns/p")
    assert len(names(api, VMIS)) == 1
    gone = next(n for n in ("p-0", "p-1") if n not in names(api, VMIS))
    assert not ctl.expectations.satisfied("ns/p")
    deleted = informers.vmis.store.get(f"ns/{gone}")
    informers.vmis.store.remove(f"ns/{gone}")
    ctl.vmi_handlers().on_delete(deleted)  # type: ignore[misc]
    assert ctl.expectations.satisfied("ns/p")
    informers.vms.store.upsert(
        f"ns/{gone}", VirtualMachine.from_dict(api.stored(VMS, f"ns/{gone}"))
    )
    await ctl.sync("ns/p")
    assert len(names(api, VMIS)) == 1  # the rolled VM has no VMI yet: unavailable
    seed_vmi(api, informers, gone)
    await ctl.sync("ns/p")
    assert names(api, VMIS) == [gone]
