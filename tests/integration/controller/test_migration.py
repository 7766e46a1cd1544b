"""Migration controller against the cluster: target pod placement, the phase path (the
test plays both handlers by writing the VMI's migrationState), limits, cancel, and the
unschedulable-target timeout."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.testing import wait_for
from shared.kube import VMIMS, VMIS, KubeClient
from shared.model import VirtualMachineInstanceMigration
from tests.integration.controller.harness import (
    ControllerProcess,
    create_vmi,
    get_vmi,
    launcher_pods,
    patch_status,
    schedulable_label,
    set_schedulable,
    vmi_body,
    wait_gone,
    wait_phase,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ON_NODE01 = {"kubernetes.io/hostname": "node01"}


@pytest.fixture
def controller_args() -> list[str]:
    """One outbound migration per node; short target and abort timeouts."""
    return [
        "--parallel-outbound-migrations-per-node", "1",
        "--migration-unschedulable-timeout", "10",
        "--migration-abort-timeout", "60",
    ]  # fmt: skip


async def running_vmi(kube: KubeClient, ns: str, name: str, **kw: Any) -> str:
    """A VMI the test moves to Running and LiveMigratable (as the handler would); its node."""
    await create_vmi(kube, ns, vmi_body(name, **kw))
    vmi = await wait_phase(kube, ns, name, "Scheduled")
    conditions = [{"type": "LiveMigratable", "status": "True"}, {"type": "Ready", "status": "True"}]
    await patch_status(kube, VMIS, ns, name, {"phase": "Running", "conditions": conditions})
    return vmi.status.node_name or ""


async def create_vmim(
    kube: KubeClient, ns: str, name: str, vmi: str
) -> VirtualMachineInstanceMigration:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name},
        "spec": {"vmiName": vmi},
    }
    return VirtualMachineInstanceMigration.from_dict(await kube.create(VMIMS, body, namespace=ns))


async def get_vmim(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstanceMigration:
    return VirtualMachineInstanceMigration.from_dict(await kube.get(VMIMS, name, namespace=ns))


async def wait_vmim(
    kube: KubeClient, ns: str, name: str, phase: str, timeout: float = 90
) -> VirtualMachineInstanceMigration:
    return await wait_for(
        lambda: get_vmim(kube, ns, name),
        lambda m: m.status.phase == phase,
        what=f"VMIM {name} {phase}",
        timeout=timeout,
        show=lambda m: m.to_dict().get("status"),
    )


async def migration_state(kube: KubeClient, ns: str, vmi: str, **fields: Any) -> None:
    """Write fields of the VMI's migrationState as the handlers would (a merge patch)."""
    await patch_status(kube, VMIS, ns, vmi, {"migrationState": fields})


async def test_migration_phase_path_with_target_on_the_other_node(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Pending → … → PreparingTarget (controller), then TargetReady → Running → Succeeded as
    the handlers report; the target pod avoids the source node; the node label follows."""
    source = await running_vmi(kube, ns, "mig1")
    vmim = await create_vmim(kube, ns, "m1", "mig1")
    prepared = await wait_vmim(kube, ns, "m1", "PreparingTarget")
    vmi = await get_vmi(kube, ns, "mig1")
    targets = [
        p
        for p in await launcher_pods(kube, ns, vmi.uid)
        if p["metadata"]["labels"].get("kubevirt.io/migrationJobUID") == vmim.uid
    ]
    (target,) = targets
    target_node = target["spec"]["nodeName"]
    assert target_node != source
    state = vmi.status.migration_state
    assert state is not None and state.migration_uid == vmim.uid
    assert (state.source_node, state.target_node, state.target_pod) == (
        source,
        target_node,
        target["metadata"]["name"],
    )
    assert [t.phase for t in prepared.status.phase_transition_timestamps] == [
        "Pending",
        "Scheduling",
        "Scheduled",
        "PreparingTarget",
    ]
    assert "kubevirt.io/migrationJobFinalize" in prepared.metadata.finalizers
    await migration_state(kube, ns, "mig1", targetNodeAddress="127.0.0.1:49152")
    await wait_vmim(kube, ns, "m1", "TargetReady")
    await migration_state(kube, ns, "mig1", startTimestamp="2025-01-01T00:00:00Z")
    await wait_vmim(kube, ns, "m1", "Running")
    await migration_state(kube, ns, "mig1", completed=True, endTimestamp="2025-01-01T00:00:05Z")
    await patch_status(kube, VMIS, ns, "mig1", {"nodeName": target_node})
    done = await wait_vmim(kube, ns, "m1", "Succeeded")
    assert done.status.migration_state is not None and done.status.migration_state.completed
    await wait_for(
        lambda: get_vmi(kube, ns, "mig1"),
        lambda v: v.metadata.labels.get("kubevirt.io/nodeName") == target_node,
        what="node label follows nodeName",
    )


@contextlib.contextmanager
def launchers_only_on_node01(cluster: Cluster) -> Iterator[None]:
    """node02 unschedulable for launcher pods meanwhile (as a handler-less node is)."""
    before = schedulable_label(cluster, "node02")
    set_schedulable(cluster, "node02", "false")
    try:
        yield
    finally:
        set_schedulable(cluster, "node02", before)


async def test_outbound_limit_holds_the_second_migration_until_the_first_is_cancelled(
    kube: KubeClient, ns: str, controller: ControllerProcess, kubevirt_cluster: Cluster
) -> None:
    """1 outbound per node: the second migration from node01 waits in Pending; deleting
    the first after the handoff asks the handlers to abort, and once they confirm, its
    target pod goes and the slot frees up for the second."""
    with launchers_only_on_node01(kubevirt_cluster):
        assert await running_vmi(kube, ns, "a") == "node01"
        assert await running_vmi(kube, ns, "b") == "node01"
    await create_vmim(kube, ns, "ma", "a")
    await wait_vmim(kube, ns, "ma", "PreparingTarget")
    mb = await create_vmim(kube, ns, "mb", "b")
    pending = await wait_vmim(kube, ns, "mb", "Pending")
    assert not [
        p
        for p in await launcher_pods(kube, ns)
        if p["metadata"]["labels"].get("kubevirt.io/migrationJobUID") == mb.uid
    ]
    assert pending.status.phase == "Pending"
    # Cancel "ma" after the handoff: abortRequested reaches the VMI; the handler confirms.
    await kube.delete(VMIMS, "ma", namespace=ns)
    await wait_for(
        lambda: get_vmi(kube, ns, "a"),
        lambda v: (
            v.status.migration_state is not None and bool(v.status.migration_state.abort_requested)
        ),
        what="abortRequested on the VMI",
    )
    await migration_state(kube, ns, "a", failed=True, abortStatus="Succeeded")
    await wait_gone(kube, VMIMS, ns, "ma")
    vmi_a = await get_vmi(kube, ns, "a")
    await wait_for(
        lambda: launcher_pods(kube, ns, vmi_a.uid),
        lambda pods: len(pods) == 1,
        what="target pod of the cancelled migration deleted",
    )
    # Nothing could be created for "mb" while the slot was taken; now it proceeds.
    await wait_vmim(kube, ns, "mb", "PreparingTarget")


async def test_cancel_before_handoff_deletes_the_target_pod(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Deleting a VMIM whose target pod cannot be placed yet removes pod and VMIM at once."""
    await running_vmi(kube, ns, "c", node_selector=ON_NODE01)
    # Pinned to node01, the target can never leave it: it stays Scheduling until cancelled.
    vmim = await create_vmim(kube, ns, "mc", "c")
    await wait_vmim(kube, ns, "mc", "Scheduling")
    await kube.delete(VMIMS, "mc", namespace=ns)
    await wait_gone(kube, VMIMS, ns, "mc")
    pods = await launcher_pods(kube, ns)
    assert not [
        p for p in pods if p["metadata"]["labels"].get("kubevirt.io/migrationJobUID") == vmim.uid
    ]


async def test_unschedulable_target_times_out(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """A target that no node can take fails the migration after the timeout (10 s here),
    with the scheduler's message, and its pod is deleted; the VMI keeps running."""
    await running_vmi(kube, ns, "d", node_selector=ON_NODE01)
    vmim = await create_vmim(kube, ns, "md", "d")
    failed = await wait_vmim(kube, ns, "md", "Failed")
    state = failed.status.migration_state
    assert state is not None and "could not be scheduled" in (state.failure_reason or "")
    await wait_for(
        lambda: launcher_pods(kube, ns),
        lambda pods: (
            not [
                p
                for p in pods
                if p["metadata"]["labels"].get("kubevirt.io/migrationJobUID") == vmim.uid
            ]
        ),
        what="target pod deleted",
    )
    assert (await get_vmi(kube, ns, "d")).status.phase == "Running"


async def test_not_live_migratable_fails_with_the_reason(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """LiveMigratable=False (the handler's verdict) fails the migration with its message."""
    await running_vmi(kube, ns, "e")
    condition = {
        "type": "LiveMigratable",
        "status": "False",
        "reason": "DisksNotLiveMigratable",
        "message": "disk d0 is not shared",
    }
    await patch_status(kube, VMIS, ns, "e", {"conditions": [condition]})
    await create_vmim(kube, ns, "me", "e")
    failed = await wait_vmim(kube, ns, "me", "Failed")
    state = failed.status.migration_state
    assert state is not None and "disk d0 is not shared" in (state.failure_reason or "")
