"""The migration network (spec.configuration.migrations.network) as the controller applies
it: the handler DaemonSet's pods get the NAD as multus' `migration0`, a network whose NAD
does not exist leaves the DaemonSet alone and makes the CR Degraded naming the field, and a
network taken away removes the annotation."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

from controller.informers import build_informers
from controller.kubevirt.controller import KubeVirtController
from controller.kubevirt.mignet import template_patch
from shared.clusterconfig import ClusterConfig, LiveConfig
from shared.kube import KUBEVIRTS, KubeClient, QueueConfig, Registry, StatusWriter, WorkQueue
from shared.kube.resources import DAEMONSETS, NADS
from shared.mignet import handler_networks
from shared.model.kubevirt import KubeVirt
from shared.multus import NETWORKS_ANNOTATION
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi

KEY = "kubevirt/kubevirt"


def kubevirt(network: str | None) -> dict[str, Any]:
    migrations = {"network": network} if network is not None else {}
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt", "uid": "kv-uid"},
        "spec": {"configuration": {"migrations": migrations}},
    }


def daemonset(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "virt-handler", "namespace": "kubevirt"},
        "spec": {"template": {"metadata": {"annotations": annotations or {}}}},
    }


def nad(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": "kubevirt"},
        "spec": {"config": "{}"},
    }


def rig(
    network: str | None, *, seeded: list[tuple[Any, dict[str, Any]]]
) -> tuple[FakeApi, KubeVirtController]:
    api = FakeApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    ctl = KubeVirtController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(QueueConfig(name="kv"), registry=registry),
        live=LiveConfig(ClusterConfig()),
        writer=StatusWriter(client, KUBEVIRTS, model=KubeVirt, registry=registry),
    )
    for resource, obj in seeded:
        api.seed(resource, obj)
    stored = api.seed(KUBEVIRTS, kubevirt(network))
    kv = KubeVirt.from_dict(copy.deepcopy(stored))
    informers.kubevirts.store.upsert(kv.key, kv)
    handlers = ctl.handlers()
    assert handlers.on_add is not None
    handlers.on_add(kv)
    return api, ctl


def template_annotations(api: FakeApi) -> dict[str, str]:
    ds = api.stored(DAEMONSETS, "kubevirt/virt-handler")
    return cast(dict[str, str], ds["spec"]["template"]["metadata"].get("annotations") or {})


def degraded(api: FakeApi) -> dict[str, Any]:
    kv = api.stored(KUBEVIRTS, KEY)
    return next(c for c in kv["status"]["conditions"] if c["type"] == "Degraded")


async def test_the_handlers_get_the_network_as_migration0() -> None:
    """An existing NAD: the DaemonSet's pod template names it, interface migration0, in the
    CR's namespace; the CR is not Degraded."""
    api, ctl = rig(
        "migration-net", seeded=[(DAEMONSETS, daemonset()), (NADS, nad("migration-net"))]
    )
    await ctl.sync(KEY)
    value = json.loads(template_annotations(api)[NETWORKS_ANNOTATION])
    assert value == [{"name": "migration-net", "namespace": "kubevirt", "interface": "migration0"}]
    assert degraded(api)["status"] == "False"


async def test_a_missing_nad_is_degraded_naming_the_field() -> None:
    """No such NAD: the DaemonSet keeps what it had; Degraded says which field and NAD."""
    api, ctl = rig("no-such-net", seeded=[(DAEMONSETS, daemonset())])
    await ctl.sync(KEY)
    assert NETWORKS_ANNOTATION not in template_annotations(api)
    cond = degraded(api)
    assert cond["status"] == "True" and cond["reason"] == "MigrationNetworkNotFound"
    assert "spec.configuration.migrations.network" in cond["message"]
    assert "kubevirt/no-such-net not found" in cond["message"]


async def test_a_network_taken_away_removes_the_annotation() -> None:
    """No network in the CR: the handlers' migration0 annotation is removed."""
    before = {NETWORKS_ANNOTATION: handler_networks("old", namespace="kubevirt"), "keep": "x"}
    api, ctl = rig(None, seeded=[(DAEMONSETS, daemonset(before))])
    await ctl.sync(KEY)
    assert template_annotations(api) == {"keep": "x"}


def test_no_patch_when_the_template_already_says_so() -> None:
    """The DaemonSet already names the network: nothing to write (no rollout)."""
    ds = daemonset({NETWORKS_ANNOTATION: handler_networks("m", namespace="kubevirt")})
    assert template_patch(ds, "m", namespace="kubevirt") is None
    assert template_patch(daemonset(), None, namespace="kubevirt") is None
    assert template_patch(ds, "other", namespace="kubevirt") is not None
