"""The status writer against the real API server: a VMI status written by two writers at
once (the controller and the handler) converges without losing either's fields."""

from __future__ import annotations

import dataclasses

import pytest

from shared.kube import VMIS, KubeClient, Registry, StatusWriter
from shared.model import (
    ConditionStatus,
    VirtualMachineInstance,
    VMICondition,
    VMIConditionType,
    VMIPhase,
)
from tests.integration.kube.conftest import KubeFactory

pytestmark = pytest.mark.cluster


def writer(kube: KubeClient) -> StatusWriter[VirtualMachineInstance]:
    return StatusWriter(kube, VMIS, model=VirtualMachineInstance, registry=Registry())


async def create_vmi(kube: KubeClient, namespace: str) -> VirtualMachineInstance:
    spec = {"domain": {"memory": {"guest": "32Mi"}, "devices": {}}}
    body = VirtualMachineInstance.from_dict(
        {"metadata": {"name": "vm1", "namespace": namespace}, "spec": spec}
    )
    created = await kube.create(
        VMIS, {**body.to_dict(), "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance"}
    )
    return VirtualMachineInstance.from_dict(created)


@pytest.mark.usefixtures("vmi_crds")
async def test_concurrent_status_writers_converge(
    kube_factory: KubeFactory, namespace: str
) -> None:
    """Both writers start from the same resourceVersion; the second gets a real 409,
    re-reads, re-applies only its own change and succeeds; the stored status has both."""
    controller_kube, handler_kube = await kube_factory(), await kube_factory()
    vmi = await create_vmi(controller_kube, namespace)

    async def refresh() -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(
            await controller_kube.get(VMIS, "vm1", namespace=namespace)
        )

    handler = writer(handler_kube)
    ready = VMICondition(type=VMIConditionType.READY, status=ConditionStatus.TRUE)
    handler_new = dataclasses.replace(vmi, status=vmi.status.with_condition(ready))
    await handler.write_status(vmi, handler_new, refresh=refresh)

    controller = writer(controller_kube)
    scheduled = dataclasses.replace(vmi.status, phase=VMIPhase.SCHEDULED, node_name="node01")
    result = await controller.write_status(
        vmi, dataclasses.replace(vmi, status=scheduled), refresh=refresh
    )

    assert controller.counts == {"conflict": 1, "patch_status": 1}
    assert handler.counts == {"patch_status": 1}
    stored = await refresh()
    assert (stored.status.phase, stored.status.node_name) == (VMIPhase.SCHEDULED, "node01")
    assert stored.status.condition_is_true(VMIConditionType.READY)
    assert result.metadata.resource_version == stored.metadata.resource_version


@pytest.mark.usefixtures("vmi_crds")
async def test_no_op_status_write_sends_nothing(kube: KubeClient, namespace: str) -> None:
    """Writing a status equal to the current one makes no API request."""
    vmi = await create_vmi(kube, namespace)
    w = writer(kube)

    async def refresh() -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(await kube.get(VMIS, "vm1", namespace=namespace))

    running = dataclasses.replace(
        vmi, status=dataclasses.replace(vmi.status, phase=VMIPhase.RUNNING)
    )
    written = await w.write_status(vmi, running, refresh=refresh)
    assert await w.write_status(written, written, refresh=refresh) is written
    assert w.counts == {"patch_status": 1, "skipped": 1}
    assert (await refresh()).metadata.resource_version == written.metadata.resource_version


@pytest.mark.usefixtures("vmi_crds")
async def test_metadata_write_conflict_keeps_foreign_finalizer(
    kube_factory: KubeFactory, namespace: str
) -> None:
    """A finalizer added by someone else between our read and our patch survives our
    label + finalizer change (real 409 on the resourceVersion precondition)."""
    ours, theirs = await kube_factory(), await kube_factory()
    vmi = await create_vmi(ours, namespace)
    await theirs.patch(
        VMIS, "vm1", {"metadata": {"finalizers": ["example.com/theirs"]}}, namespace=namespace
    )

    async def refresh() -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(await ours.get(VMIS, "vm1", namespace=namespace))

    w = writer(ours)
    meta = dataclasses.replace(
        vmi.metadata,
        labels={"kubevirt.io/nodeName": "node01"},
        finalizers=("kubevirt.io/virtualMachineControllerFinalize",),
    )
    result = await w.write_metadata(vmi, dataclasses.replace(vmi, metadata=meta), refresh=refresh)
    assert w.counts == {"conflict": 1, "patch_metadata": 1}
    assert result.metadata.labels == {"kubevirt.io/nodeName": "node01"}
    assert set(result.metadata.finalizers) == {
        "example.com/theirs",
        "kubevirt.io/virtualMachineControllerFinalize",
    }
    await theirs.patch(VMIS, "vm1", {"metadata": {"finalizers": None}}, namespace=namespace)
