"""Node resources on real nodes (docs/node-resources.md): the test bed's kubelets run the
static CPU manager and advertise the hugepages the cluster reserved on the host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.realnode.noderes import HUGEPAGES_2M

pytestmark = pytest.mark.cluster


def _nodes(k: Kubectl) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(k("get", "nodes", "-o", "json"))["items"]
    return items


def test_kubelets_offer_exclusive_cpus_and_hugepages(
    real_cluster: Cluster, real_kubectl: Kubectl
) -> None:
    """Each node advertises 2 MiB hugepages (what the cluster reserved on the host, at
    least) and runs the static CPU manager: one CPU kept out of exclusive use (its
    checkpoint names the policy), 100m of CPU reserved from what pods may request."""
    reserved = real_cluster.config.node_resources.hugepages_2mi
    assert reserved > 0 and int((HUGEPAGES_2M / "nr_hugepages").read_text()) >= reserved
    for node in _nodes(real_kubectl):
        status, name = node["status"], node["metadata"]["name"]
        pages = int(status["capacity"]["hugepages-2Mi"].removesuffix("Mi")) // 2
        assert pages >= reserved, (name, status["capacity"])
        assert status["allocatable"]["cpu"] == "1900m", (name, status["allocatable"])
        state = real_cluster.config.nodes_dir / name / "kubelet" / "cpu_manager_state"
        assert json.loads(Path(state).read_text())["policyName"] == "static", name
