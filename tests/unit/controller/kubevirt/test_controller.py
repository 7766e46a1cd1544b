"""The KubeVirt CR controller over a fake API: the CR's configuration is applied to the
live config from the informer callbacks, and its status is written Deployed / Available,
or Degraded naming the field of a configuration that did not validate."""

from __future__ import annotations

import copy
from typing import Any, cast

from controller.informers import build_informers
from controller.kubevirt.controller import KubeVirtController
from shared.clusterconfig import ClusterConfig, LiveConfig
from shared.kube import KUBEVIRTS, KubeClient, QueueConfig, Registry, StatusWriter, WorkQueue
from shared.model.kubevirt import KubeVirt
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi


def kubevirt(bandwidth: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt", "uid": "kv-uid"},
        "spec": {"configuration": {"migrations": {"bandwidthPerMigration": bandwidth}}},
    }


def rig(
    bandwidth: str, *, sync_addresses: tuple[str, ...] = ()
) -> tuple[FakeApi, KubeVirtController, LiveConfig]:
    api = FakeApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    live = LiveConfig(ClusterConfig())
    ctl = KubeVirtController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(QueueConfig(name="kv"), registry=registry),
        live=live,
        writer=StatusWriter(client, KUBEVIRTS, model=KubeVirt, registry=registry),
        sync_addresses=sync_addresses,
    )
    stored = api.seed(KUBEVIRTS, kubevirt(bandwidth))
    kv = KubeVirt.from_dict(copy.deepcopy(stored))
    informers.kubevirts.store.upsert(kv.key, kv)
    handlers = ctl.handlers()
    assert handlers.on_add is not None
    handlers.on_add(kv)
    return api, ctl, live


def status_of(api: FakeApi) -> dict[str, Any]:
    (obj,) = [o for (plural, _), o in api.objects.items() if plural == "kubevirts"]
    return cast(dict[str, Any], obj.get("status") or {})


async def test_a_good_cr_is_applied_and_available() -> None:
    """The bandwidth is in force; the status is Deployed with Available True."""
    api, ctl, live = rig("32Mi")
    assert live.current().migrations.bandwidth_mib == 32
    await ctl.sync("kubevirt/kubevirt")
    status = status_of(api)
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert status["phase"] == "Deployed"
    assert conditions["Available"] == "True" and conditions["Degraded"] == "False"


async def test_the_status_lists_the_synchronization_addresses() -> None:
    """KubeVirt's status.synchronizationAddresses: the (leader) controller's endpoint,
    absent when it has none."""
    api, ctl, _ = rig("32Mi", sync_addresses=("10.1.0.4:9185",))
    await ctl.sync("kubevirt/kubevirt")
    assert status_of(api)["synchronizationAddresses"] == ["10.1.0.4:9185"]
    api, ctl, _ = rig("32Mi")
    await ctl.sync("kubevirt/kubevirt")
    assert "synchronizationAddresses" not in status_of(api)


async def test_a_bad_cr_is_degraded_and_changes_nothing() -> None:
    """A configuration that does not validate: defaults stay, Degraded names the field."""
    api, ctl, live = rig("fast")
    assert live.current() == ClusterConfig()
    await ctl.sync("kubevirt/kubevirt")
    degraded = [c for c in status_of(api)["conditions"] if c["type"] == "Degraded"]
    assert degraded[0]["status"] == "True"
    assert "bandwidthPerMigration" in degraded[0]["message"]
