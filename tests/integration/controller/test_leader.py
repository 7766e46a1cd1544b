"""Leader election between two controller replicas: only the leader acts; when it is killed
the standby takes over after the Lease expires; a replica stopped cleanly hands over at once."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.testing import wait_for
from shared.kube import KubeClient
from tests.integration.controller.harness import (
    ControllerProcess,
    create_vmi,
    launcher_pods,
    scrape_metric,
    vmi_body,
    wait_phase,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


async def leaders(*procs: ControllerProcess) -> list[ControllerProcess]:
    return [p for p in procs if await p.is_leader()]


async def vmi_queue_adds(proc: ControllerProcess) -> float:
    """Keys its VMI queue took (the label is `name`, so not through `metric`)."""
    labels = {"name": "virt-controller-vmi"}
    return await scrape_metric(proc.port, "kubevirt_workqueue_adds_total", labels)


async def pod_creates(proc: ControllerProcess) -> float:
    return await proc.metric("kubevirt_rest_client_requests_total", resource="pods", verb="create")


async def test_failover_between_two_replicas(
    kube: KubeClient, ns: str, kubevirt_cluster: Cluster, tmp_path: Path
) -> None:
    """One of two replicas leads and only it queues keys (the standby's VMI queue counts no
    add); SIGKILL it and the other takes over (6 s lease) and schedules new VMIs; SIGTERM
    releases the Lease so a fresh replica takes over."""
    a = ControllerProcess(kubevirt_cluster, ns, tmp_path / "a.log", identity="replica-a")
    b = ControllerProcess(kubevirt_cluster, ns, tmp_path / "b.log", identity="replica-b")
    c = ControllerProcess(kubevirt_cluster, ns, tmp_path / "c.log", identity="replica-c")
    try:
        await a.start()
        await b.start()
        (leader,) = await wait_for(
            lambda: leaders(a, b), lambda ls: len(ls) == 1, what="one leader"
        )
        standby = b if leader is a else a
        await create_vmi(kube, ns, vmi_body("before"))
        await wait_phase(kube, ns, "before", "Scheduled")
        assert await pod_creates(standby) == 0
        assert await pod_creates(leader) == 1
        assert await vmi_queue_adds(standby) == 0
        assert await vmi_queue_adds(leader) >= 1

        assert await leader.stop(signal.SIGKILL) == -signal.SIGKILL
        await wait_for(standby.is_leader, bool, what="standby takes over", timeout=60)
        vmi = await create_vmi(kube, ns, vmi_body("after"))
        await wait_phase(kube, ns, "after", "Scheduled")
        assert len(await launcher_pods(kube, ns, vmi.uid)) == 1

        await c.start()
        assert not await c.is_leader()
        assert await standby.stop(signal.SIGTERM) == 0
        await wait_for(c.is_leader, bool, what="fresh replica takes the released Lease", timeout=30)
        await create_vmi(kube, ns, vmi_body("third"))
        await wait_phase(kube, ns, "third", "Scheduled")
    finally:
        for proc in (a, b, c):
            await proc.stop()
