"""Live migration on the local cluster: the real controller, handlers on both nodes, launcher
pods run by the node agents, the real guest ticking on its console throughout."""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.testing import wait_for
from shared.kube import NODES, PODS, VMIMS, VMIS, KubeClient, NotFound
from shared.labels import SCHEDULABLE_LABEL
from shared.model import (
    MigrationPhase,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIPhase,
)
from tests.integration.controller.harness import ControllerProcess
from tests.integration.handler.cluster import HandlerProcess, notify_root, pod_volume
from tests.integration.launcher.harness import EXAMPLE_VMI, TICK
from tests.unit.handler.waiting import until_async

pytestmark = [pytest.mark.integration, pytest.mark.cluster]
BOOT = 240.0
TICKS = re.compile(rf"{TICK} (\d+)")


@pytest.fixture
async def node02(
    handler_cluster: Cluster, kube: KubeClient, tmp_path: Path
) -> AsyncIterator[HandlerProcess]:
    """virt-handler-py for node02 as a subprocess; node02's labels are restored afterwards."""
    before = (await kube.get(NODES, "node02"))["metadata"].get("labels", {})
    handler = HandlerProcess(handler_cluster, "node02", notify_root(), tmp_path / "handler2.log")
    await handler.start()
    yield handler
    await handler.stop()
    restore = {SCHEDULABLE_LABEL: before.get(SCHEDULABLE_LABEL)}
    await kube.patch(NODES, "node02", {"metadata": {"labels": restore}})


@pytest.fixture
async def both(
    kube: KubeClient,
    ns: str,
    controller: ControllerProcess,
    node01: HandlerProcess,
    node02: HandlerProcess,
) -> AsyncIterator[dict[str, HandlerProcess]]:
    """Controller + both nodes' handlers; the test's VMIs are deleted (and gone) after it."""
    yield {"node01": node01, "node02": node02}
    for item in (await kube.list(VMIS, namespace=ns)).items:
        with contextlib.suppress(NotFound):
            await kube.delete(VMIS, item["metadata"]["name"], namespace=ns)

    async def all_gone() -> bool:
        return not (await kube.list(VMIS, namespace=ns)).items

    await until_async(all_gone, "the test's VMIs deleted", timeout=120)


def vmi_body(name: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE_VMI.read_text()))
    body["metadata"] = {"name": name}
    return body


async def get_vmi(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(await kube.get(VMIS, name, namespace=ns))


async def wait_vmi(kube: KubeClient, ns: str, name: str, ok: Any, what: str) -> Any:
    return await wait_for(
        lambda: get_vmi(kube, ns, name),
        ok,
        what=f"{ns}/{name}: {what}",
        timeout=BOOT,
        show=lambda v: v.to_dict().get("status"),
    )


def last_tick(handler: HandlerProcess, pod_uid: str) -> int:
    path = pod_volume(handler, pod_uid, "private") / "libvirt" / "log" / "kvpy" / "serial.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    ticks = [int(n) for n in TICKS.findall(text)]
    return ticks[-1] if ticks else -1


async def tick_above(handler: HandlerProcess, pod_uid: str, floor: int, what: str) -> None:
    async def above() -> bool:
        return last_tick(handler, pod_uid) > floor

    await until_async(above, what, timeout=BOOT)


async def ticking(kube: KubeClient, ns: str, name: str, nodes: dict[str, HandlerProcess]) -> int:
    """Create the VMI, wait until it runs and its guest ticks; the last tick seen."""
    await kube.create(VMIS, vmi_body(name), namespace=ns)
    vmi = await wait_vmi(kube, ns, name, lambda v: v.status.phase is VMIPhase.RUNNING, "Running")
    (pod_uid,) = vmi.status.active_pods
    handler = nodes[vmi.status.node_name]
    await tick_above(handler, pod_uid, 0, "guest ticks")
    return last_tick(handler, pod_uid)


async def migrate(kube: KubeClient, ns: str, vmi: str, name: str) -> None:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name},
        "spec": {"vmiName": vmi},
    }
    await kube.create(VMIMS, body, namespace=ns)


async def vmim(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstanceMigration:
    return VirtualMachineInstanceMigration.from_dict(await kube.get(VMIMS, name, namespace=ns))


async def test_live_migration_moves_the_running_guest(
    kube: KubeClient, ns: str, both: dict[str, HandlerProcess]
) -> None:
    """A VMIM moves a Running VMI to the other node: the VMIM Succeeds, the VMI's nodeName,
    node label and activePods name the target, the source pod is gone, and the guest's
    tick counter continues on the target's console past where it was."""
    before = await ticking(kube, ns, "mover", both)
    start = await get_vmi(kube, ns, "mover")
    source, (source_pod,) = start.status.node_name, start.status.active_pods
    target = "node02" if source == "node01" else "node01"
    await migrate(kube, ns, "mover", "move-1")
    done = await wait_for(
        lambda: vmim(kube, ns, "move-1"),
        lambda m: m.status.phase_or_unset.is_final(),
        what="VMIM final",
        timeout=BOOT,
        show=lambda m: m.to_dict().get("status"),
    )
    assert done.status.phase == MigrationPhase.SUCCEEDED, done.to_dict()["status"]
    moved = await wait_vmi(
        kube,
        ns,
        "mover",
        lambda v: v.status.node_name == target and list(v.status.active_pods.values()) == [target],
        "on the target node alone",
    )
    assert moved.metadata.labels["kubevirt.io/nodeName"] == target
    assert moved.status.phase is VMIPhase.RUNNING
    state = moved.status.migration_state
    assert state is not None and state.completed and state.target_node_domain_ready_timestamp
    (target_pod,) = moved.status.active_pods
    await tick_above(both[target], target_pod, before, "ticks continue on the target")

    async def source_pod_done() -> bool:
        pods = (await kube.list(PODS, namespace=ns)).items
        live = {p["metadata"]["uid"]: p["status"].get("phase") for p in pods}
        return live.get(source_pod) in (None, "Succeeded")

    await until_async(source_pod_done, "source launcher pod completed or gone", timeout=60)


async def test_cancelled_migration_leaves_the_guest_on_the_source(
    kube: KubeClient, ns: str, both: dict[str, HandlerProcess]
) -> None:
    """Deleting a VMIM before it completes aborts it: the VMI's migrationState says failed
    (aborted), the VMI still runs on the source, and its guest keeps ticking there."""
    before = await ticking(kube, ns, "stayer", both)
    start = await get_vmi(kube, ns, "stayer")
    source, (source_pod,) = start.status.node_name, start.status.active_pods
    await migrate(kube, ns, "stayer", "cancel-1")
    await wait_for(
        lambda: vmim(kube, ns, "cancel-1"),
        lambda m: (
            m.status.phase_or_unset
            in (
                MigrationPhase.PREPARING_TARGET,
                MigrationPhase.TARGET_READY,
                MigrationPhase.RUNNING,
            )
        ),
        what="VMIM handed to the handlers",
        timeout=BOOT,
        show=lambda m: m.to_dict().get("status"),
    )
    await kube.delete(VMIMS, "cancel-1", namespace=ns)
    after = await wait_vmi(
        kube,
        ns,
        "stayer",
        lambda v: v.status.migration_state is not None and v.status.migration_state.failed,
        "migration failed (aborted)",
    )
    assert after.status.node_name == source and after.status.phase is VMIPhase.RUNNING
    assert after.status.migration_state is not None
    assert "abort" in (after.status.migration_state.failure_reason or "").lower()
    assert source_pod in after.status.active_pods
    await tick_above(both[source or ""], source_pod, before + 2, "ticks on the source")
