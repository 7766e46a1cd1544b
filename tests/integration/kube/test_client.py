"""The client facade against the real API server: verbs, typed errors, selectors,
preconditions, cluster-scoped and custom resources, and request metrics."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube import (
    EVENTS,
    NODES,
    VMIS,
    AlreadyExists,
    ApiError,
    Conflict,
    DeleteOptions,
    KubeClient,
    NotFound,
    PatchType,
    Registry,
)
from shared.kube.resources import Resource
from tests.integration.kube.conftest import KubeFactory

pytestmark = pytest.mark.cluster
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


async def test_crud_and_typed_errors(kube: KubeClient, namespace: str) -> None:
    """create/get/update/patch/delete work, and each failure raises its typed error."""
    created = await kube.create(CONFIGMAPS, configmap("cm", app="a"), namespace=namespace)
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIGMAPS, configmap("cm"), namespace=namespace)
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, "absent", namespace=namespace)

    updated = await kube.update(CONFIGMAPS, {**created, "data": {"k": "v2"}})
    with pytest.raises(Conflict):
        await kube.update(CONFIGMAPS, {**created, "data": {"k": "stale"}})

    patched = await kube.patch(CONFIGMAPS, "cm", {"data": {"extra": "1"}}, namespace=namespace)
    assert patched["data"] == {"k": "v2", "extra": "1"}
    ops = [
        {"op": "test", "path": "/data/k", "value": "v2"},
        {"op": "replace", "path": "/data/k", "value": "v3"},
    ]
    patched = await kube.patch(
        CONFIGMAPS, "cm", ops, namespace=namespace, patch_type=PatchType.JSON
    )
    assert patched["data"]["k"] == "v3"
    with pytest.raises(ApiError) as failed_test:
        await kube.patch(CONFIGMAPS, "cm", ops, namespace=namespace, patch_type=PatchType.JSON)
    assert failed_test.value.status in {409, 422}

    with pytest.raises(Conflict):
        await kube.delete(
            CONFIGMAPS, "cm", namespace=namespace, options=DeleteOptions(uid="not-the-uid")
        )
    await kube.delete(
        CONFIGMAPS, "cm", namespace=namespace, options=DeleteOptions(uid=updated["metadata"]["uid"])
    )
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, "cm", namespace=namespace)


async def test_list_selectors_and_paging(kube: KubeClient, namespace: str) -> None:
    """Label selectors filter; list_all pages through everything with small pages."""
    for i in range(5):
        await kube.create(
            CONFIGMAPS,
            configmap(f"cm{i}", parity="even" if i % 2 == 0 else "odd"),
            namespace=namespace,
        )
    even = await kube.list(CONFIGMAPS, namespace=namespace, label_selector="parity=even")
    assert sorted(i["metadata"]["name"] for i in even.items) == ["cm0", "cm2", "cm4"]
    everything = await kube.list_all(
        CONFIGMAPS, namespace=namespace, label_selector="parity", page_size=2
    )
    assert len(everything.items) == 5 and everything.resource_version


async def test_cluster_scoped_events_and_custom_resources(kube: KubeClient, namespace: str) -> None:
    """Nodes list cluster-wide; core Events can be recorded; kubevirt.io CRs round-trip."""
    nodes = await kube.list(NODES)
    assert nodes.items and all(n["kind"] == "Node" for n in nodes.items)
    event = {
        "metadata": {"generateName": "vm1."},
        "involvedObject": {"kind": "VirtualMachineInstance", "name": "vm1", "namespace": namespace},
        "reason": "SuccessfulCreate",
        "message": "Created virtual machine pod",
        "type": "Normal",
        "source": {"component": "virt-controller"},
    }
    recorded = await kube.create(EVENTS, event, namespace=namespace)
    assert recorded["reason"] == "SuccessfulCreate"


@pytest.mark.usefixtures("vmi_crds")
async def test_vmi_round_trip_and_metrics(kube_factory: KubeFactory, namespace: str) -> None:
    """A VMI created, status-updated and read back; every request is counted by verb."""
    registry = Registry()
    kube = await kube_factory(registry)
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": namespace},
        "spec": {"domain": {"memory": {"guest": "32Mi"}, "devices": {}}},
    }
    created = await kube.create(VMIS, body)
    await kube.update_status(VMIS, {**created, "status": {"phase": "Pending"}})
    assert (await kube.get(VMIS, "v", namespace=namespace))["status"] == {"phase": "Pending"}
    requests = registry.get("kubevirt_rest_client_requests_total")
    assert requests is not None
    counted = {
        (s.labels["verb"], s.labels["code"])
        for s in next(iter(requests.collect())).samples
        if s.labels["resource"] == "virtualmachineinstances"
    }
    assert {("create", "201"), ("update", "200"), ("get", "200")} <= counted
