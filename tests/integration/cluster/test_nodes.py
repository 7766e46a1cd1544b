"""Node health as the control plane sees it: a node agent that dies stops renewing its
Lease and the node lifecycle controller marks the Node NotReady."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from localkube.cluster import Cluster
from localkube.testing import wait_for

pytestmark = pytest.mark.cluster
NODE = "node02"


def _ready(node: client.V1Node) -> str:
    return next((c.status for c in node.status.conditions or () if c.type == "Ready"), "absent")


def _taints(node: client.V1Node) -> set[str]:
    return {t.key for t in node.spec.taints or ()}


async def test_killing_the_node_agent_makes_the_node_not_ready(
    kube_cluster: Cluster, kube_api: client.ApiClient
) -> None:
    """SIGKILL to a node agent: within the node-monitor grace period (20s here) its
    Node's Ready condition turns Unknown and the node is tainted unreachable; a new
    agent brings it back to Ready and the taint goes away."""
    core = client.CoreV1Api(kube_api)
    assert _ready(await core.read_node(NODE)) == "True"
    await kube_cluster.stop_node_agent(NODE)
    try:
        node = await wait_for(
            lambda: core.read_node(NODE),
            lambda n: _ready(n) != "True",
            what=f"{NODE} NotReady",
            timeout=60,
            show=lambda n: n.status.conditions,
        )
        assert _ready(node) == "Unknown"
        assert node.status.conditions[-1].reason in {"NodeStatusUnknown"} or any(
            c.reason == "NodeStatusUnknown" for c in node.status.conditions
        )
        await wait_for(
            lambda: core.read_node(NODE),
            lambda n: "node.kubernetes.io/unreachable" in _taints(n),
            what="the unreachable taint",
            timeout=30,
            show=_taints,
        )
    finally:
        await kube_cluster.start_node_agent(NODE)
    await wait_for(
        lambda: core.read_node(NODE),
        lambda n: _ready(n) == "True" and not _taints(n),
        what=f"{NODE} Ready without taints",
        timeout=60,
        show=lambda n: (_ready(n), _taints(n)),
    )
