"""VMI phase paths through the real API server, scheduler and node agents."""

from __future__ import annotations

import pytest

from localkube.testing import wait_for
from shared.kube import PODS, VMIS, DeleteOptions, Invalid, KubeClient, NotFound
from shared.labels import VMI_FINALIZER
from tests.integration.controller.harness import (
    ControllerProcess,
    create_vmi,
    get_vmi,
    launcher_pods,
    patch_status,
    vmi_body,
    wait_gone,
    wait_phase,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


async def test_vmi_reaches_scheduled_with_one_pod_and_three_writes(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """ "" → Pending → Scheduling → Scheduled: one launcher pod, node label, activePods,
    finalizer, timestamps; the controller spends 3 VMI writes (status, then metadata +
    status at the handoff)."""
    vmi = await create_vmi(kube, ns, vmi_body("vm1"))
    done = await wait_phase(kube, ns, "vm1", "Scheduled")
    (pod,) = await launcher_pods(kube, ns, vmi.uid)
    node = pod["spec"]["nodeName"]
    assert done.status.node_name == node
    assert done.metadata.labels["kubevirt.io/nodeName"] == node
    assert dict(done.status.active_pods) == {pod["metadata"]["uid"]: node}
    assert VMI_FINALIZER in done.metadata.finalizers
    assert [t.phase for t in done.status.phase_transition_timestamps] == [
        "Pending",
        "Scheduling",
        "Scheduled",
    ]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == vmi.uid
    assert pod["metadata"]["labels"]["kubevirt.io/created-by"] == vmi.uid
    writes = {
        verb: await controller.metric(
            "kubevirt_rest_client_requests_total", resource="virtualmachineinstances", verb=verb
        )
        for verb in ("create", "update", "patch", "delete")
    }
    assert writes == {"create": 0, "update": 0, "patch": 3, "delete": 0}


async def test_invalid_vmi_is_refused_at_admission_naming_the_fields(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """A VMI without memory and with 0 cores is refused by the validating webhook, naming
    both fields in one answer; nothing is stored and no launcher pod is made. (The
    controller's own InvalidSpec check behind admission is unit-tested.)"""
    body = vmi_body("bad")
    body["spec"]["domain"] = {"cpu": {"cores": 0}, "devices": {}}
    with pytest.raises(Invalid) as refused:
        await create_vmi(kube, ns, body)
    message = str(refused.value)
    assert "spec.domain.cpu.cores" in message, message
    assert "spec.domain.resources.requests.memory" in message, message
    with pytest.raises(NotFound):
        await get_vmi(kube, ns, "bad")
    assert await launcher_pods(kube, ns) == []


async def test_unschedulable_pod_is_mirrored_then_fails_the_vmi(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """No node matches: PodScheduled=False with the scheduler's message, then Failed
    (timeout 15 s here) and the pod deleted."""
    vmi = await create_vmi(kube, ns, vmi_body("nowhere", node_selector={"disk": "unobtainium"}))
    waiting = await wait_for(
        lambda: get_vmi(kube, ns, "nowhere"),
        lambda v: v.status.condition("PodScheduled") is not None,
        what="PodScheduled mirrored",
    )
    cond = waiting.status.condition("PodScheduled")
    assert cond is not None and cond.reason == "Unschedulable" and "node" in (cond.message or "")
    assert waiting.status.phase == "Scheduling"
    failed = await wait_phase(kube, ns, "nowhere", "Failed")
    assert failed.status.reason == "Unschedulable"
    await wait_for(lambda: launcher_pods(kube, ns, vmi.uid), lambda p: p == [], what="pod deleted")


async def test_pod_failing_before_handoff_fails_the_vmi(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """The launcher pod ends in Failed while the VMI is Scheduling: VMI Failed/PodFailed."""
    vmi = await create_vmi(kube, ns, vmi_body("doomed", node_selector={"disk": "unobtainium"}))
    (pod,) = await wait_for(
        lambda: launcher_pods(kube, ns, vmi.uid), lambda p: len(p) == 1, what="launcher pod"
    )
    await patch_status(
        kube,
        PODS,
        ns,
        pod["metadata"]["name"],
        {"phase": "Failed", "reason": "Evicted", "message": "test says so"},
    )
    failed = await wait_phase(kube, ns, "doomed", "Failed")
    assert failed.status.reason == "PodFailed"
    cond = failed.status.condition("Synchronized")
    assert cond is not None and "Evicted: test says so" in (cond.message or "")


async def test_pod_deleted_before_handoff_fails_the_vmi(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Someone deletes the pending pod: the VMI fails instead of getting a second pod."""
    vmi = await create_vmi(kube, ns, vmi_body("orphan", node_selector={"disk": "unobtainium"}))
    (pod,) = await wait_for(
        lambda: launcher_pods(kube, ns, vmi.uid), lambda p: len(p) == 1, what="launcher pod"
    )
    await kube.delete(
        PODS, pod["metadata"]["name"], namespace=ns, options=DeleteOptions(grace_period_seconds=0)
    )
    failed = await wait_phase(kube, ns, "orphan", "Failed")
    assert failed.status.reason in ("PodNotExists", "PodTerminating")
    assert await launcher_pods(kube, ns, vmi.uid) == []


async def test_deleting_a_scheduled_vmi_removes_pod_then_finalizer(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Delete: the pod is deleted, the finalizer dropped once it is gone, the VMI vanishes."""
    vmi = await create_vmi(kube, ns, vmi_body("short"))
    await wait_phase(kube, ns, "short", "Scheduled")
    await kube.delete(VMIS, "short", namespace=ns)
    await wait_gone(kube, VMIS, ns, "short")
    assert await launcher_pods(kube, ns, vmi.uid) == []
