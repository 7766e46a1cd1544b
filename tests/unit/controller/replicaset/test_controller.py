"""The replica set controller over a fake API server: a burst of syncs never over-creates
(expectations), surplus members are deleted, orphans adopted, and a failed creation shows
as ReplicaFailure without creating the rest."""

from __future__ import annotations

import copy
import itertools
from typing import Any, cast

from controller.config import TimingConfig
from controller.informers import Informers, build_informers
from controller.replicaset.controller import ReplicaSetController
from shared.kube import (
    VMIRSS,
    VMIS,
    ApiError,
    DeleteOptions,
    Expectations,
    KubeClient,
    NotFound,
    QueueConfig,
    Registry,
    Resource,
    StatusWriter,
    WorkQueue,
)
from shared.model import VirtualMachineInstance, VirtualMachineInstanceReplicaSet
from tests.unit.controller import builders
from tests.unit.controller.replicaset.fleet import member_dict, rs_dict
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers


class FleetApi(FakeApi):
    """FakeApi that names objects from generateName and deletes."""

    def __init__(self) -> None:
        super().__init__()
        self._serial = itertools.count(1)

    async def create(
        self, resource: Resource, body: Any, *, namespace: str | None = None
    ) -> dict[str, Any]:
        body = copy.deepcopy(dict(body))
        meta = body["metadata"]
        if not meta.get("name"):
            n = next(self._serial)
            meta["name"] = f"{meta['generateName']}{n:05d}"
            meta["uid"] = f"uid-{meta['name']}"
        return await super().create(resource, body, namespace=namespace)

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]:
        self.calls.append(("delete", resource.plural))
        key = self._key(resource, name, namespace)
        if key not in self.objects:
            raise NotFound(404, "NotFound", name)
        return self.objects.pop(key)

    def vmis(self) -> list[dict[str, Any]]:
        return [o for (plural, _), o in self.objects.items() if plural == "virtualmachineinstances"]


class Rig:
    """A controller, its informers' caches (fed by hand) and the fake API."""

    def __init__(self, rs: dict[str, Any]) -> None:
        self.api = FleetApi()
        client = cast(KubeClient, self.api)
        registry = Registry()
        self.informers: Informers = build_informers(client)
        clock = FakeClock()
        self.ctl = ReplicaSetController(
            builders.deps(client, self.informers, registry=registry),
            queue=WorkQueue(
                QueueConfig(name="rs"), registry=registry, clock=clock, timers=FakeTimers(clock)
            ),
            expectations=Expectations(),
            writer=StatusWriter(
                client, VMIRSS, model=VirtualMachineInstanceReplicaSet, registry=registry
            ),
            timing=TimingConfig(),
        )
        self.rs_handlers, self.vmi_handlers = self.ctl.handlers()
        self.put_rs(rs)

    def put_rs(self, raw: dict[str, Any]) -> None:
        stored = self.api.seed(VMIRSS, raw)
        rs = VirtualMachineInstanceReplicaSet.from_dict(stored)
        self.informers.replicasets.store.upsert(rs.key, rs)

    def stored_rs(self) -> VirtualMachineInstanceReplicaSet:
        return VirtualMachineInstanceReplicaSet.from_dict(self.api.stored(VMIRSS, "ns/web"))

    def put_vmi(self, raw: dict[str, Any]) -> None:
        stored = self.api.seed(VMIS, raw)
        self.observe_vmi(stored)

    def observe_vmi(self, raw: dict[str, Any]) -> None:
        """The VMI informer delivers this object (add)."""
        vmi = VirtualMachineInstance.from_dict(copy.deepcopy(raw))
        self.informers.vmis.store.upsert(vmi.key, vmi)
        assert self.vmi_handlers.on_add is not None
        self.vmi_handlers.on_add(vmi)

    def observe_all(self) -> None:
        for raw in self.api.vmis():
            if raw["metadata"]["name"] not in {v.name for v in self.informers.vmis.store.list()}:
                self.observe_vmi(raw)


async def test_a_burst_of_syncs_creates_exactly_the_replicas() -> None:
    """Three syncs before the cache shows any member: three VMIs, not nine; once seen,
    more syncs create nothing; status.replicas follows the cache."""
    rig = Rig(rs_dict(replicas=3))
    for _ in range(3):
        await rig.ctl.sync("ns/web")
    assert len(rig.api.vmis()) == 3
    rig.observe_all()
    await rig.ctl.sync("ns/web")
    assert len(rig.api.vmis()) == 3
    status = rig.stored_rs().status
    assert status.replicas == 3 and status.label_selector == "app=web"


async def test_scale_down_deletes_the_surplus() -> None:
    """replicas 1 with three members: two are deleted, the not-ready one first."""
    rig = Rig(rs_dict(replicas=1))
    rig.put_vmi(member_dict("a", age=300))
    rig.put_vmi(member_dict("b", ready=False, age=200))
    rig.put_vmi(member_dict("c", age=100))
    await rig.ctl.sync("ns/web")
    assert [v["metadata"]["name"] for v in rig.api.vmis()] == ["a"]


async def test_an_orphan_that_matches_is_adopted() -> None:
    """An ownerless VMI with the set's labels gets the set's controller reference and
    counts as a member (no new VMI is created for it)."""
    rig = Rig(rs_dict(replicas=1))
    rig.put_vmi(member_dict("stray", owner=None))
    await rig.ctl.sync("ns/web")
    [vmi] = rig.api.vmis()
    [ref] = vmi["metadata"]["ownerReferences"]
    assert ref["kind"] == "VirtualMachineInstanceReplicaSet" and ref["controller"] is True


async def test_a_failed_creation_sets_replica_failure_and_stops_the_batch() -> None:
    """The first creation fails: no further attempt in this sync (slow start), the
    expectation is lowered (the next sync may retry), ReplicaFailure says FailedCreate."""
    rig = Rig(rs_dict(replicas=4))
    rig.api.fail_next = ApiError(403, "Forbidden", "exceeded quota")
    await rig.ctl.sync("ns/web")
    assert rig.api.vmis() == []
    assert rig.ctl.expectations.satisfied("ns/web")
    [cond] = rig.stored_rs().status.conditions
    assert (cond.type, cond.reason) == ("ReplicaFailure", "FailedCreate")
    await rig.ctl.sync("ns/web")
    assert len(rig.api.vmis()) == 4


async def test_a_failed_member_is_replaced() -> None:
    """A Failed member is deleted and, with no earlier failures, replaced at once."""
    rig = Rig(rs_dict(replicas=1))
    rig.put_vmi(member_dict("dead", phase="Failed", ready=False))
    await rig.ctl.sync("ns/web")
    names = [v["metadata"]["name"] for v in rig.api.vmis()]
    assert "dead" not in names and len(names) == 1
