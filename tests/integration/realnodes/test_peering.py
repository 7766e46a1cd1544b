"""Two real-node clusters peered (localkube/realnode/peering.py): a pod of one reaches a pod
and a node of the other over TCP and back, each seeing the other's own pod address (nothing
masquerades on the way); kubevirt-py runs on the second."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.realnode.netplan import NetPlan
from tests.integration.realnodes.fixtures import PeerStack
from tests.integration.realnodes.test_nodes import PY_IMAGE, _pod_status, _wait

pytestmark = pytest.mark.cluster

# Answers each connection with the address it came from.
SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen()
print("listening", flush=True)
while True:
    c, peer = s.accept(); c.sendall(b"from " + peer[0].encode()); c.close()
"""
# Connects to each host:port; prints what the server answered (or that it connected).
CLIENT = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=10)
    c.settimeout(2)
    try:
        print(target, c.recv(64).decode() or "connected")
    except TimeoutError:
        print(target, "connected")
"""


def _server(k: Kubectl, ns: str, node: str) -> str:
    """A pod on ``node`` running SERVER; its IP once it listens."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "echo"},
           "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [
               {"name": "main", "image": PY_IMAGE, "command": ["python3", "-c", SERVER]}]}}  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(pod))
    status: dict[str, Any] = _wait(
        lambda: (s := _pod_status(k, ns, "echo")).get("podIP") and s["phase"] == "Running" and s,
        180,
        f"pod echo Running on {node}",
    )
    _wait(lambda: "listening" in k("logs", "-n", ns, "echo", check=False), 30, "echo listening")
    return str(status["podIP"])


def _connect(k: Kubectl, ns: str, *targets: str) -> str:
    return k("exec", "-n", ns, "echo", "--", "python3", "-c", CLIENT, *targets, timeout=60)


def test_pods_of_peered_clusters_reach_each_other(
    peer_stack: PeerStack, real_cluster: Cluster, real_kubectl: Kubectl, real_namespace: str
) -> None:
    """A pod on node01 of cluster A and a pod on cluster B's node each connect to the
    other's pod IP on TCP and are seen from their own pod IP (no masquerade); A's pod also
    reaches B's node (its kubelet's port). B's kubevirt-py is Available, its KubeVirt CR
    and A's have DecentralizedLiveMigration."""
    a, b = real_kubectl, peer_stack.kubectl
    ns = real_namespace
    b("-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available", "--timeout=120s")
    for k in (a, b):
        kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
        gates = kv["spec"]["configuration"]["developerConfiguration"]["featureGates"]
        assert "DecentralizedLiveMigration" in gates, gates
    b("create", "namespace", ns)
    try:
        ip_a = _server(a, ns, "node01")
        ip_b = _server(b, ns, peer_stack.node)
        plan_b = NetPlan.load_or_pick(peer_stack.cluster.paths.root / "net.json", taken=set())
        kubelet_b = f"{plan_b.node_ip(1)}:10250"
        seen_from_a = _connect(a, ns, f"{ip_b}:8080", kubelet_b)
        assert f"{ip_b}:8080 from {ip_a}" in seen_from_a, seen_from_a
        assert f"{kubelet_b} connected" in seen_from_a, seen_from_a
        seen_from_b = _connect(b, ns, f"{ip_a}:8080")
        assert f"{ip_a}:8080 from {ip_b}" in seen_from_b, seen_from_b
    finally:
        b("delete", "namespace", ns, "--wait=false", check=False)
