"""The handler on the local cluster: VMIs created through the kube-apiserver, launcher pods
rendered by the real controller and run by the node agent, the real guest under TCG."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import yaml

from localkube.testing import wait_for
from shared.kube import NODES, PODS, VMIS, KubeClient
from shared.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from shared.model import VirtualMachineInstance, VMIConditionType, VMIPhase, parse_time
from shared.wire.client import RpcClient
from shared.wire.launcher_api import TIERS, Method
from tests.integration.handler.cluster import (
    HandlerProcess,
    SerialFollower,
    pod_volume,
    qemu_pid,
    serial_log,
)
from tests.integration.handler.node import USER_DATA
from tests.integration.launcher.harness import BOOT_MARKER, EXAMPLE_VMI, TICK

pytestmark = [pytest.mark.integration, pytest.mark.cluster]
BOOT = 240.0
T = TypeVar("T")


def vmi_body(name: str, *, grace: int = 30) -> dict[str, Any]:
    """The example VMI, pinned to node01 (the node whose handler runs)."""
    body: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE_VMI.read_text()))
    body["metadata"] = {"name": name}
    body["spec"]["terminationGracePeriodSeconds"] = grace
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node01"}
    return body


async def get_vmi(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(await kube.get(VMIS, name, namespace=ns))


async def wait_vmi(
    kube: KubeClient, ns: str, name: str, ok: Any, what: str, timeout: float = BOOT
) -> VirtualMachineInstance:
    return await wait_for(
        lambda: get_vmi(kube, ns, name),
        ok,
        what=f"{ns}/{name}: {what}",
        timeout=timeout,
        show=lambda v: v.to_dict().get("status"),
    )


async def running_vmi(
    kube: KubeClient, ns: str, name: str, *, grace: int = 30
) -> tuple[VirtualMachineInstance, str]:
    """Create the VMI and wait until Running; returns it and its launcher pod's UID."""
    await kube.create(VMIS, vmi_body(name, grace=grace), namespace=ns)
    vmi = await wait_vmi(kube, ns, name, lambda v: v.status.phase is VMIPhase.RUNNING, "Running")
    (pod_uid,) = vmi.status.active_pods
    return vmi, pod_uid


async def test_vmi_created_through_the_api_runs_and_powers_off_on_delete(
    kube: KubeClient, ns: str, cluster_node: HandlerProcess
) -> None:
    """Node01 is schedulable with a fresh heartbeat; a VMI created through the API reaches
    Running (controller → launcher pod → handler) with few handler writes; its console
    shows the boot marker and the user-data; deleting it powers the guest off by ACPI and
    the launcher pod completes."""

    async def node01() -> dict[str, Any]:
        meta: dict[str, Any] = (await kube.get(NODES, "node01"))["metadata"]
        return meta

    # The heartbeat labels the node a moment after the handler reports ready.
    node = await wait_for(
        node01,
        lambda m: m.get("labels", {}).get(SCHEDULABLE_LABEL) == "true",
        what="node01 labelled schedulable by the handler's heartbeat",
    )
    parse_time(node["annotations"][HEARTBEAT_ANNOTATION])

    vmi, pod_uid = await running_vmi(kube, ns, "tiny")
    assert vmi.status.condition_is_true(VMIConditionType.READY)

    async def console() -> str:
        return serial_log(cluster_node, pod_uid)

    await wait_for(console, lambda s: USER_DATA in s, what="user-data on the console", timeout=BOOT)
    assert BOOT_MARKER in await console()
    vmi = await wait_vmi(
        kube, ns, "tiny", lambda v: v.status.guest_os_info is not None, "guestOSInfo"
    )
    writes = await cluster_node.metric(
        "kubevirt_py_status_writes_total", resource="virtualmachineinstances", verb="patch_status"
    )
    assert 1 <= writes <= 3

    pod_name = next(
        p["metadata"]["name"]
        for p in (await kube.list(PODS, namespace=ns)).items
        if p["metadata"]["uid"] == pod_uid
    )
    follower = SerialFollower(cluster_node, pod_uid)  # the pod's dir goes with the pod
    try:
        await kube.delete(VMIS, "tiny", namespace=ns)
        await wait_for(
            _async(follower.text),
            lambda s: "reboot: Power down" in s,
            what="ACPI power-off",
            timeout=60,
        )
    finally:
        follower.close()
    assert "grace_period_expired" not in cluster_node.log()
    await wait_for(
        lambda: _pod_phase(kube, ns, pod_name),
        lambda phase: phase in ("Succeeded", "Gone"),
        what="launcher pod completed",
        timeout=120,
    )


async def test_handler_sigkill_and_restart_loses_no_guest_and_reconverges(
    kube: KubeClient, ns: str, cluster_node: HandlerProcess
) -> None:
    """Two running guests; the handler is SIGKILLed; one guest is paused behind its back.
    The restarted handler finds both: the other guest is the same QEMU, still ticking,
    untouched; the paused one's status now says Paused."""
    _, keep_pod = await running_vmi(kube, ns, "keep")
    # paused at the end, it cannot power off by ACPI: a short grace for the teardown
    _, pause_pod = await running_vmi(kube, ns, "pause", grace=2)
    for name in ("keep", "pause"):
        await wait_vmi(kube, ns, name, lambda v: v.status.guest_os_info is not None, "guestOSInfo")
    qemu = qemu_pid(cluster_node, keep_pod)
    assert qemu is not None

    await cluster_node.sigkill()
    sock = pod_volume(cluster_node, pause_pod, "sockets") / "launcher-sock"
    async with RpcClient.connect(sock) as client:
        await client.call(str(Method.PAUSE), {}, tier=TIERS[Method.PAUSE])
    ticks = serial_log(cluster_node, keep_pod).count(TICK)

    await cluster_node.start()
    await wait_vmi(
        kube,
        ns,
        "pause",
        lambda v: v.status.condition_is_true(VMIConditionType.PAUSED),
        "Paused",
        60,
    )
    await wait_for(
        _async(lambda: serial_log(cluster_node, keep_pod).count(TICK)),
        lambda n: n > ticks + 2,
        what="keep's guest still ticking",
        timeout=60,
    )
    keep = await get_vmi(kube, ns, "keep")
    assert keep.status.phase is VMIPhase.RUNNING
    assert keep.status.condition_is_true(VMIConditionType.READY)
    assert qemu_pid(cluster_node, keep_pod) == qemu
    writes = await cluster_node.metric(
        "kubevirt_py_status_writes_total", resource="virtualmachineinstances", verb="patch_status"
    )
    assert writes == 1  # only the paused VMI's status changed


def _async(fn: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    async def probe() -> T:
        return fn()

    return probe


async def _pod_phase(kube: KubeClient, ns: str, name: str) -> str:
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=ns)).items}
    pod = pods.get(name)
    return "Gone" if pod is None else str((pod.get("status") or {}).get("phase"))
