"""The pool controller over a fake API server: VMs `<pool>-<index>` created once however
often it syncs before the cache catches up, and a template change rolled to the VMs
(rewritten, their VMIs restarted)."""

from __future__ import annotations

import copy
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
from shared.model import VirtualMachine
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
    api.seed(VMIS, {"metadata": {"name": "p-0", "namespace": "ns"}, "spec": {}})
    raw = copy.deepcopy(api.stored(VMPOOLS, "ns/p"))
    template = raw["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]
    template["domain"]["memory"] = {"guest": "96Mi"}
    new = VirtualMachinePool.from_dict(raw)
    informers.pools.store.upsert("ns/p", new)
    await ctl.sync("ns/p")
    vm = api.stored(VMS, "ns/p-0")
    assert vm["metadata"]["labels"][REVISION_LABEL] == template_hash(new)
    assert vm["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "96Mi"}
    assert names(api, VMIS) == []
