"""The migration controller's admission: workers deciding from the same stale cache can
never admit more migrations than the limits allow (the ledger counts what was admitted)."""

from __future__ import annotations

import copy
from typing import Any, cast

from controller.config import MigrationConfig, TemplateConfig
from controller.informers import build_informers
from controller.migration.controller import MigrationController
from controller.reconcile import PodWriter
from controller.services.template import TemplateService
from shared.kube import (
    VMIMS,
    VMIS,
    Expectations,
    KubeClient,
    QueueConfig,
    Registry,
    StatusWriter,
    WorkQueue,
)
from shared.model import VirtualMachineInstance, VirtualMachineInstanceMigration
from tests.unit.controller import builders
from tests.unit.controller.builders import vmi_dict
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers


def running_vmi(name: str, uid: str) -> dict[str, Any]:
    raw = vmi_dict(name)
    raw["metadata"]["uid"] = uid
    raw["status"] = {
        "phase": "Running",
        "nodeName": "node01",
        "conditions": [{"type": "LiveMigratable", "status": "True"}],
    }
    return raw


def vmim(name: str, vmi: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"vmiName": vmi},
    }


def rig(limits: MigrationConfig) -> tuple[FakeApi, MigrationController]:
    api = FakeApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    clock = FakeClock()
    ctl = MigrationController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(
            QueueConfig(name="m"), registry=registry, clock=clock, timers=FakeTimers(clock)
        ),
        pods=PodWriter(client, Expectations()),
        writer=StatusWriter(
            client, VMIMS, model=VirtualMachineInstanceMigration, registry=registry
        ),
        templates=TemplateService(TemplateConfig()),
        config=limits,
    )
    for name, uid in (("a", "uid-a"), ("b", "uid-b")):
        stored = api.seed(VMIS, running_vmi(name, uid))
        informers.vmis.store.upsert(
            f"ns/{name}", VirtualMachineInstance.from_dict(copy.deepcopy(stored))
        )
        stored = api.seed(VMIMS, vmim(f"m{name}", name))
        m = VirtualMachineInstanceMigration.from_dict(copy.deepcopy(stored))
        informers.migrations.store.upsert(f"ns/m{name}", m)
    return api, ctl


def target_pods(api: FakeApi) -> list[str]:
    return [key for (plural, key) in api.objects if plural == "pods"]


async def test_stale_cache_cannot_admit_past_the_outbound_limit() -> None:
    """Two migrations from node01 synced back to back (cache unchanged): one target pod."""
    api, ctl = rig(MigrationConfig(parallel_per_cluster=5, outbound_per_node=1))
    await ctl.sync("ns/ma")
    await ctl.sync("ns/mb")
    assert len(target_pods(api)) == 1
    assert ctl.capacity(exclude="").in_flight == 1


async def test_room_for_both_admits_both() -> None:
    """With room for two, both migrations get their target pod."""
    api, ctl = rig(MigrationConfig(parallel_per_cluster=5, outbound_per_node=2))
    await ctl.sync("ns/ma")
    await ctl.sync("ns/mb")
    assert len(target_pods(api)) == 2


async def test_deleting_an_admitted_migration_frees_its_slot() -> None:
    """The ledger forgets a migration whose object is gone."""
    api, ctl = rig(MigrationConfig(parallel_per_cluster=1, outbound_per_node=1))
    await ctl.sync("ns/ma")
    ctl._informers.migrations.store.remove("ns/ma")
    await ctl.sync("ns/ma")
    await ctl.sync("ns/mb")
    assert len(target_pods(api)) == 2


async def test_limits_read_live_take_effect_at_the_next_sync() -> None:
    """The limits come from a callable (the KubeVirt CR's, controller/kubevirt): raising
    the outbound limit between syncs admits the second migration, with no new controller."""
    current = [MigrationConfig(parallel_per_cluster=5, outbound_per_node=1)]
    api, ctl = rig(MigrationConfig())
    ctl._config_of = lambda: current[0]
    await ctl.sync("ns/ma")
    await ctl.sync("ns/mb")
    assert len(target_pods(api)) == 1
    current[0] = MigrationConfig(parallel_per_cluster=5, outbound_per_node=2)
    await ctl.sync("ns/mb")
    assert len(target_pods(api)) == 2
