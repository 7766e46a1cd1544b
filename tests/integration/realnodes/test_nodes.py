"""Real nodes: pods run as containers (containerd + runc) with pod networking across nodes,
reach the ``kubernetes`` Service through kube-proxy, answer ``kubectl logs`` and ``exec``;
the host keeps its sysctls and iptables, and ``down`` leaves nothing behind."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.csi.stack import STORAGE_CLASS
from localkube.deploy import Kubectl
from localkube.procs import pids_mentioning
from localkube.realnode.namespaces import KUBELET_SYSCTLS, cgroup_hierarchies
from localkube.realnode.netplan import NetPlan
from localkube.realnode.noderes import RECORD, host_pages
from localkube.testing import build_control_plane, private_cluster_config

pytestmark = pytest.mark.cluster
PY_IMAGE = "registry.local/kubevirt-py/virt-controller:dev"

SERVER = """
import socket
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 8080)); s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"echo-ok " + c.recv(64)); c.close()
"""

CLIENT = """
import json, os, socket, ssl, sys, urllib.request
for host in sys.argv[1:]:
    c = socket.create_connection((host, 8080), timeout=10); c.sendall(b"hi")
    print(host, c.recv(64).decode(), flush=True)
url = "https://%s:%s/version" % (os.environ["KUBERNETES_SERVICE_HOST"],
                                 os.environ["KUBERNETES_SERVICE_PORT"])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
print("apiserver", json.load(urllib.request.urlopen(url, context=ctx, timeout=10))["gitVersion"])
"""


def _pod(name: str, node: str, code: str, *args: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": PY_IMAGE, "command": ["python3", "-c", code, *args]}
            ],
        },
    }


def _wait(probe: Any, timeout: float, what: str) -> Any:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = probe()
        if seen:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {seen!r}")


def _pod_status(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(kubectl("get", "pod", name, "-n", ns, "-o", "json"))[
        "status"
    ]
    return status


def test_pods_are_containers_with_cluster_networking(
    real_cluster: Cluster, real_kubectl: Kubectl, real_namespace: str
) -> None:
    """A pod on node01 serves TCP; a pod on node02 reaches it by pod IP and reaches
    kube-apiserver through the ``kubernetes`` Service; pod IPs come from each node's range in
    198.18.0.0/15; ``kubectl logs`` and ``exec`` reach the kubelet; the runtime is containerd.
    Dual-stack: each pod has an IPv6 address beside it (podIPs, IPv4 first) from its node's
    range of the tooling's unique local prefix, and the client reaches the server on it and
    on the IPv6 ClusterIP of a RequireDualStack Service (kube-proxy's ip6tables rules)."""
    k, ns = real_kubectl, real_namespace
    plan = NetPlan.load_or_pick(real_cluster.paths.root / "net.json", taken=set())
    nodes = json.loads(k("get", "nodes", "-o", "json"))["items"]
    assert {n["status"]["nodeInfo"]["containerRuntimeVersion"].split(":")[0] for n in nodes} == {
        "containerd"
    }
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_pod("server", "node01", SERVER)))
    server = _wait(
        lambda: (s := _pod_status(k, ns, "server")).get("podIP") and s["phase"] == "Running" and s,
        120,
        "server Running",
    )
    assert ipaddress.ip_address(server["podIP"]) in ipaddress.ip_network(plan.pod_cidr(1))
    ips = [p["ip"] for p in server["podIPs"]]
    assert ips[0] == server["podIP"] and len(ips) == 2, ips
    assert ipaddress.ip_address(ips[1]) in ipaddress.ip_network(plan.v6.pod_cidr(1))
    service_v6 = _dual_stack_service(k, ns)
    _wait(lambda: "listening" in k("logs", "-n", ns, "server", check=False), 30, "server logs")
    client = _pod("client", "node02", CLIENT, *ips, service_v6)
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(client))
    done = _wait(
        lambda: (s := _pod_status(k, ns, "client"))["phase"] in ("Succeeded", "Failed") and s,
        120,
        "client done",
    )
    logs = k("logs", "-n", ns, "client")
    assert done["phase"] == "Succeeded", logs
    assert "apiserver v1.36.3" in logs
    for host in (*ips, service_v6):
        assert f"{host} echo-ok hi" in logs, logs
    assert ipaddress.ip_address(done["podIP"]) in ipaddress.ip_network(plan.pod_cidr(2))
    assert ipaddress.ip_address(done["podIPs"][1]["ip"]) in ipaddress.ip_network(
        plan.v6.pod_cidr(2)
    )
    hostname = k(
        "exec", "-n", ns, "server", "--", "python3", "-c", "import os; print(os.uname()[1])"
    )
    assert hostname.strip() == "server"


def _dual_stack_service(k: Kubectl, ns: str) -> str:
    """A RequireDualStack Service in front of the server pod: its IPv6 ClusterIP."""
    k("label", "pod", "server", "-n", ns, "app=server")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "server"},
        "spec": {
            "selector": {"app": "server"},
            "ipFamilyPolicy": "RequireDualStack",
            "ports": [{"port": 8080, "targetPort": 8080}],
        },
    }
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(service))
    spec = json.loads(k("get", "service", "server", "-n", ns, "-o", "json"))["spec"]
    assert spec["ipFamilies"] == ["IPv4", "IPv6"], spec
    return str(spec["clusterIPs"][1])


def test_host_keeps_its_sysctls_and_iptables(real_cluster: Cluster) -> None:
    """The kubelet's writes to global sysctls land in the node's own files, and the
    kubelet's and kube-proxy's iptables rules in the node's network namespace: the host's
    values and rules are what they were before the cluster started."""
    before = real_cluster.config.paths.root / "host-before.json"
    if not before.exists():
        pytest.fail("the cluster fixture did not record the host's state before starting")
    recorded = json.loads(before.read_text())
    now = {e: Path("/proc/sys", e).read_text().strip() for e in KUBELET_SYSCTLS}
    assert now == recorded["sysctls"]
    node_dir = real_cluster.config.nodes_dir / "node01" / "sysctl"
    assert (node_dir / "kernel.panic").read_text().strip() == "10"  # the kubelet's own value
    host_rules = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True)
    assert "KUBE-" not in host_rules.stdout
    plan = NetPlan.load_or_pick(real_cluster.paths.root / "net.json", taken=set())
    inside = subprocess.run(
        ["ip", "netns", "exec", plan.netns("node01"), "iptables-save"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "KUBE-SERVICES" in inside.stdout
    routes = subprocess.run(
        ["ip", "netns", "exec", plan.netns("node01"), "ip", "route"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "default" not in routes.stdout  # nothing can leave the machine
    routes6 = subprocess.run(
        ["ip", "netns", "exec", plan.netns("node01"), "ip", "-6", "route"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "default" not in routes6.stdout, routes6.stdout  # nor over IPv6
    host6 = subprocess.run(["ip6tables-save"], capture_output=True, text=True, check=True)
    assert "KUBE-" not in host6.stdout


def test_down_leaves_nothing(real_cluster: Cluster, tmp_path: Path) -> None:
    """A one-node cluster started with the essentials only (no CSI stack; multus' directory
    named but its plugin not there yet) and given a pod, then brought up again with the CSI
    stack and the plugin in place, as ./scripts/up completes its cluster after the demo: the
    pod keeps its container, a new pod gets the migration network's second interface from
    multus, a claim of the CSI class binds, the hugepages are reserved once. Taken down, it
    leaves no process, mount, interface, network namespace, cgroup or iptables rule; the
    hugepages it added to the host's pool while up are taken back (the host's own pages, the
    pool less every cluster's recorded share, unchanged: the other session's clusters add
    and take back theirs meanwhile)."""
    multus_dir, built = tmp_path / "multus", real_cluster.config.multus_dir
    assert built is not None and (built / "multus").is_file()
    multus_dir.mkdir()
    config = private_cluster_config(
        build_control_plane(), session=0, kind=NodeKind.KUBELET, images=real_cluster.config.images
    ).replace(nodes=("node01",), containerd_bin=real_cluster.config.containerd_bin,
              multus_dir=multus_dir, state_dir=real_cluster.paths.root.with_name("test-down-kubelet"),
              nodes_dir=Path("/var/lib/kvtdown"))  # fmt: skip
    cluster = Cluster(config)
    pages = config.node_resources.hugepages_2mi
    state_root = config.state_dir.parent
    before = host_pages(state_root)
    try:
        asyncio.run(cluster.up())
        record = config.state_dir / RECORD
        assert pages > 0 and json.loads(record.read_text())["pages"] == pages
        assert host_pages(state_root) == before
        k = Kubectl(config.bin_dir / "kubectl", cluster.kubeconfig)
        k(
            "apply",
            "-f",
            "-",
            stdin=json.dumps(_pod("sleeper", "node01", "import time; time.sleep(600)")),
        )
        _wait(lambda: _pod_status(k, "default", "sleeper").get("phase") == "Running", 120, "pod")
        first = _pod_status(k, "default", "sleeper")["containerStatuses"][0]["containerID"]
        shutil.copy2(built / "multus", multus_dir / "multus")
        asyncio.run(Cluster(config.replace(csi_dir=real_cluster.config.csi_dir)).up())
        _completed_cluster_serves(k, first_container=first)
        assert json.loads(record.read_text())["pages"] == pages  # added once
        assert host_pages(state_root) == before
        plan = NetPlan.load_or_pick(config.paths.root / "net.json", taken=set())
    finally:
        asyncio.run(cluster.down(purge=True))
    assert not pids_mentioning(config.nodes_dir)
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(config.nodes_dir) not in mounts
    assert not Path(f"/sys/class/net/{plan.bridge}").exists()
    assert not Path(f"/sys/class/net/{plan.host_veth(1)}").exists()
    assert not Path(f"/run/netns/{plan.netns('node01')}").exists()
    assert not [h for h in cgroup_hierarchies() if (h / f"kvpy{plan.block}-node01").exists()]
    assert not config.nodes_dir.exists() and not config.state_dir.exists()
    assert host_pages(state_root) == before


def _completed_cluster_serves(k: Kubectl, *, first_container: str) -> None:
    """After the second `up`: the first pod's container untouched; multus gives a new pod
    the migration network (its network-status names two networks); a CSI claim binds."""
    sleeper = _pod_status(k, "default", "sleeper")["containerStatuses"][0]
    assert sleeper["containerID"] == first_container and sleeper["restartCount"] == 0
    pod = _pod("twonets", "node01", "import time; time.sleep(600)")
    pod["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": "kubevirt/migration-network"}
    claim = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "csi-claim"},
        "spec": {"storageClassName": STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "16Mi"}}},
    }  # fmt: skip
    k(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod, claim]}),
    )

    def networks() -> list[str]:
        meta = json.loads(k("get", "pod", "twonets", "-o", "json"))["metadata"]
        status = meta.get("annotations", {}).get("k8s.v1.cni.cncf.io/network-status", "[]")
        return [n.get("interface", "") for n in json.loads(status)]

    assert "net1" in _wait(lambda: networks() if len(networks()) == 2 else None, 120, "net1")

    def phase() -> str:
        return str(json.loads(k("get", "pvc", "csi-claim", "-o", "json"))["status"].get("phase"))

    _wait(lambda: phase() == "Bound", 120, "the CSI claim bound")
