"""Node controller against the cluster: a stale handler heartbeat marks the node
unschedulable, and a VMI there fails once its launcher pod is gone."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from localkube.cluster import Cluster
from localkube.testing import wait_for
from shared.kube import NODES, PODS, DeleteOptions, KubeClient
from shared.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from shared.model import format_time
from tests.integration.controller.harness import (
    ControllerProcess,
    create_vmi,
    get_vmi,
    kubectl,
    launcher_pods,
    schedulable_label,
    set_schedulable,
    vmi_body,
    wait_phase,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def controller_args() -> list[str]:
    """Heartbeats older than 20 s are stale."""
    return ["--heartbeat-timeout", "20"]


@contextlib.asynccontextmanager
async def heartbeats(cluster: Cluster, beats: dict[str, datetime]) -> AsyncIterator[None]:
    """Set heartbeat annotations; afterwards remove them and put the labels back."""
    labels = {node: schedulable_label(cluster, node) for node in cluster.config.nodes}
    try:
        for node, at in beats.items():
            kubectl(
                cluster,
                "annotate",
                "node",
                node,
                "--overwrite",
                f"{HEARTBEAT_ANNOTATION}={format_time(at)}",
            )
        yield
    finally:
        for node, value in labels.items():
            kubectl(cluster, "annotate", "node", node, f"{HEARTBEAT_ANNOTATION}-")
            set_schedulable(cluster, node, value)


async def node_label(kube: KubeClient, node: str) -> str | None:
    raw = await kube.get(NODES, node)
    return (raw["metadata"].get("labels") or {}).get(SCHEDULABLE_LABEL)


async def test_stale_heartbeat_marks_node_and_fails_vmi_whose_pod_is_gone(
    kube: KubeClient, ns: str, controller: ControllerProcess, kubevirt_cluster: Cluster
) -> None:
    """The VMI's node stops heartbeating: labelled unschedulable; the VMI survives while its
    pod exists and fails with NodeUnresponsive once the pod is gone. A node with a fresh
    heartbeat is left alone."""
    vmi = await create_vmi(kube, ns, vmi_body("n1"))
    scheduled = await wait_phase(kube, ns, "n1", "Scheduled")
    dead = scheduled.status.node_name or ""
    alive = next(n for n in kubevirt_cluster.config.nodes if n != dead)
    now = datetime.now(UTC)
    async with heartbeats(kubevirt_cluster, {dead: now - timedelta(minutes=5), alive: now}):
        await wait_for(
            lambda: node_label(kube, dead), lambda v: v == "false", what=f"{dead} unschedulable"
        )
        assert await node_label(kube, alive) == "true"
        assert (await get_vmi(kube, ns, "n1")).status.phase == "Scheduled"
        (pod,) = await launcher_pods(kube, ns, vmi.uid)
        await kube.delete(
            PODS,
            pod["metadata"]["name"],
            namespace=ns,
            options=DeleteOptions(grace_period_seconds=0),
        )
        failed = await wait_phase(kube, ns, "n1", "Failed")
    assert failed.status.reason == "NodeUnresponsive"
    cond = failed.status.condition("Synchronized")
    assert cond is not None and dead in (cond.message or "")
