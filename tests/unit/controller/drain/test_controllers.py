"""The disruption-budget and evacuation controllers against an in-memory API: a protected
VMI gets its PodDisruptionBudget (widened while two pods live, deleted when the VMI ends),
and marked VMIs synced from the same stale cache never get more evacuation VMIMs than the
per-node limit allows."""

from __future__ import annotations

import copy
from typing import Any, cast

from controller.config import MigrationConfig
from controller.drain.budget_logic import decode_budget
from controller.drain.budgets import DisruptionBudgetController
from controller.drain.evacuation import EvacuationController
from controller.informers import Informers, build_informers
from shared.kube import (
    PDBS,
    VMIS,
    KubeClient,
    QueueConfig,
    Registry,
    Resource,
    WorkQueue,
)
from shared.model import EvictionStrategy, VirtualMachineInstance
from tests.unit.controller import builders
from tests.unit.controller.builders import VMI_UID, make_pod, vmi_dict
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers


def running(name: str, uid: str, *, marked: bool = False, phase: str = "Running") -> dict[str, Any]:
    raw = vmi_dict(name)
    raw["metadata"]["uid"] = uid
    raw["spec"]["evictionStrategy"] = "LiveMigrate"
    raw["status"] = {
        "phase": phase,
        "nodeName": "node01",
        "conditions": [{"type": "LiveMigratable", "status": "True"}],
    }
    if marked:
        raw["status"]["evacuationNodeName"] = "node01"
    return raw


def queue() -> WorkQueue:
    clock = FakeClock()
    return WorkQueue(
        QueueConfig(name="q"), registry=Registry(), clock=clock, timers=FakeTimers(clock)
    )


class DeletingApi(FakeApi):
    """FakeApi with deletes."""

    async def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None, options: Any = None
    ) -> dict[str, Any]:
        self.calls.append(("delete", resource.plural))
        self.objects.pop(self._key(resource, name, namespace))
        return {}


def put_vmi(api: FakeApi, informers: Informers, raw: dict[str, Any]) -> None:
    stored = api.seed(VMIS, raw)
    vmi = VirtualMachineInstance.from_dict(copy.deepcopy(stored))
    informers.vmis.store.upsert(vmi.key, vmi)


async def test_budget_follows_the_vmi() -> None:
    """Created with minAvailable 1 selecting the VMI's pods; 2 while a target pod lives
    beside the source; deleted once the VMI has ended."""
    api = DeletingApi()
    client = cast(KubeClient, api)
    informers = build_informers(client)
    ctl = DisruptionBudgetController(
        builders.deps(client, informers), queue=queue(), config=MigrationConfig()
    )
    _, _, on_budget = ctl.handlers()
    put_vmi(api, informers, running("vm1", VMI_UID))
    await ctl.sync("ns/vm1")
    stored = api.stored(PDBS, "ns/kubevirt-disruption-budget-vm1")
    assert stored["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {"kubevirt.io/created-by": VMI_UID}},
    }
    assert stored["metadata"]["ownerReferences"][0]["uid"] == VMI_UID
    view = decode_budget(stored)
    informers.pdbs.store.upsert(f"ns/{view.name}", view)
    assert on_budget.on_add is not None
    on_budget.on_add(view)

    for n, node in enumerate(("node01", "node02")):
        pod = make_pod(name=f"p{n}", uid=f"pod-{n}", phase="Running", node=node)
        informers.pods.store.upsert(f"ns/p{n}", pod)
    await ctl.sync("ns/vm1")
    assert api.stored(PDBS, "ns/kubevirt-disruption-budget-vm1")["spec"]["minAvailable"] == 2

    put_vmi(api, informers, running("vm1", VMI_UID, phase="Succeeded"))
    await ctl.sync("ns/vm1")
    assert ("delete", "poddisruptionbudgets") in api.calls
    assert (PDBS.plural, "ns/kubevirt-disruption-budget-vm1") not in api.objects


async def test_stale_cache_cannot_exceed_the_outbound_limit() -> None:
    """Two VMIs marked on node01, one outbound migration allowed, both synced before the
    cache shows any VMIM: one evacuation VMIM is created."""
    api = FakeApi()
    client = cast(KubeClient, api)
    informers = build_informers(client)
    registry = Registry()
    ctl = EvacuationController(
        builders.deps(client, informers, registry=registry),
        queue=queue(),
        config=MigrationConfig(
            outbound_per_node=1, eviction_strategy=EvictionStrategy.LIVE_MIGRATE
        ),
    )
    for name, uid in (("a", "uid-a"), ("b", "uid-b")):
        put_vmi(api, informers, running(name, uid, marked=True))
    await ctl.sync("ns/a")
    await ctl.sync("ns/b")
    created = [plural for verb, plural in api.calls if verb == "create"]
    assert created == ["virtualmachineinstancemigrations"]
    assert ctl.unfinished().outbound == {"node01": 1}
