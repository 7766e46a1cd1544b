"""Failover when a real node loses power: its kubelet, containerd and every container (the
handler and the guest's launcher among them) are SIGKILLed at once. The controller keeps the
VMI while the API still shows its launcher pod Running (the node might only be cut off),
fails it NodeUnresponsive once the node is dead (handler heartbeat stale and the Node
NotReady) and the pod is being deleted, and the VM (runStrategy Always) runs again on the
other node. The node is powered back on at the end: the session cluster stays healthy."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.procs import read_pidfile, reap_mentioning, stop_process
from localkube.realnode.node import RealNode
from tests.integration.realnodes.test_migration import _last_tick
from tests.integration.realnodes.test_story import _pod_uid, _vmi, _wait, start_demo

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
HEARTBEAT_INTERVAL = 5  # the handlers' heartbeat, seconds
HEARTBEAT_TIMEOUT = 20  # the controller's --heartbeat-timeout, seconds


async def _power_off(node: RealNode) -> None:
    """As a power loss: kubelet first (it reports nothing more), every container of the
    node, then containerd and its shims. The namespaces and the node's dirs stay."""
    for component in ("kubelet", "kube-proxy"):
        pid = read_pidfile(node.specs()[component].pidfile)
        if pid is not None:
            await stop_process(pid, marker=node.inputs.marker, grace=0, sig=signal.SIGKILL)
    await node.ns.kill_processes()
    pid = read_pidfile(node.specs()["containerd"].pidfile)
    if pid is not None:
        await stop_process(pid, marker=node.inputs.marker, grace=0, sig=signal.SIGKILL)
    await reap_mentioning(node.layout.containerd_dir, grace=0)


async def _power_on(node: RealNode) -> None:
    await node.start_runtime()
    node.start_kubelet()


def _rollout(k: Kubectl, kind: str) -> None:
    k("rollout", "status", "-n", "kubevirt", kind, "--timeout=240s")


@contextmanager
def _short_heartbeats(k: Kubectl) -> Iterator[None]:
    """Handlers heartbeat every 5 s and the controller judges a handler down after 20 s;
    the deployment as it was afterwards."""
    ds = json.loads(k("get", "ds", "virt-handler", "-n", "kubevirt", "-o", "json"))
    containers = ds["spec"]["template"]["spec"]["containers"]
    i = next(n for n, c in enumerate(containers) if c["name"] == "virt-handler")
    args = containers[i]["args"]
    path = f"/spec/template/spec/containers/{i}/args"

    def handler_args(value: list[str]) -> None:
        patch = [{"op": "replace", "path": path, "value": value}]
        k("patch", "ds", "virt-handler", "-n", "kubevirt", "--type=json", "-p", json.dumps(patch))

    var = "VIRT_CONTROLLER_HEARTBEAT_TIMEOUT"
    deployment = "deployment/virt-controller"
    k("set", "env", "-n", "kubevirt", deployment, f"{var}={HEARTBEAT_TIMEOUT}")
    handler_args([*args, f"--heartbeat-interval={HEARTBEAT_INTERVAL}"])
    _rollout(k, deployment)
    _rollout(k, "ds/virt-handler")
    _spread_controllers(k)
    try:
        yield
    finally:
        k("set", "env", "-n", "kubevirt", deployment, f"{var}-")
        handler_args(args)
        _rollout(k, deployment)
        _rollout(k, "ds/virt-handler")


def _controller_nodes(k: Kubectl) -> list[str]:
    out = k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "-o", "json")
    return sorted(p["spec"].get("nodeName", "") for p in json.loads(out)["items"])


def _spread_controllers(k: Kubectl) -> None:
    """A controller replica on each node (a rolling update may leave both on one node
    despite the preferred anti-affinity): the one that survives the power loss fails the
    VMIs over. A replica deleted is recreated on the other node."""
    for _ in range(3):
        nodes = _controller_nodes(k)
        if len(set(nodes)) == len(nodes):
            return
        out = k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "-o", "name")
        k("delete", "-n", "kubevirt", out.split()[0])
        _rollout(k, "deployment/virt-controller")
    raise AssertionError(f"virt-controller replicas not spread over the nodes: {nodes}")


def _controller_logs(k: Kubectl, *, skip_node: str) -> str:
    """Logs of the controller replicas not on `skip_node` (its kubelet answers nothing)."""
    out = k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "-o", "json")
    names = [
        p["metadata"]["name"]
        for p in json.loads(out)["items"]
        if p["spec"].get("nodeName") != skip_node
    ]
    return "".join(k("logs", "-n", "kubevirt", n, "--tail=-1", check=False) for n in names)


def _node(k: Kubectl, name: str) -> dict[str, Any]:
    node: dict[str, Any] = json.loads(k("get", "node", name, "-o", "json"))
    return node


def _ready(node: dict[str, Any]) -> str:
    conds = node.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conds if c["type"] == "Ready"), "")


def _known_dead(k: Kubectl, name: str) -> bool:
    """NotReady, and the node controller labelled it unschedulable (heartbeat stale)."""
    node = _node(k, name)
    label = node["metadata"].get("labels", {}).get("kubevirt.io/schedulable")
    return _ready(node) != "True" and label == "false"


def _healthy(k: Kubectl, name: str) -> bool:
    """Ready, and its handler heartbeats again (it labels the node schedulable)."""
    node = _node(k, name)
    label = node["metadata"].get("labels", {}).get("kubevirt.io/schedulable")
    return _ready(node) == "True" and label == "true"


def _launcher(k: Kubectl, ns: str, vmi_uid: str) -> dict[str, Any]:
    out = k("get", "pods", "-n", ns, "-l", f"kubevirt.io/created-by={vmi_uid}", "-o", "json")
    (pod,) = json.loads(out)["items"]
    return dict(pod)


def test_vm_fails_over_when_its_node_loses_power(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Power loss of the demo VM's node: while the API shows the launcher pod Running the
    VMI stays (no second guest); once the node is NotReady with a stale heartbeat and the
    pod is evicted (deleted, as the taint manager does when its toleration ends), the VMI
    fails NodeUnresponsive and the VM runs a new VMI on the other node, whose console
    ticks. Powered back on, the node is Ready and its handler heartbeats."""
    k, ns = real_stack, real_namespace
    with _short_heartbeats(k):
        first = start_demo(k, ns)
        dead, pod_uid = _pod_uid(first)
        _wait(lambda: _last_tick(real_cluster, dead, pod_uid) > 2, 180, "guest ticks")
        node = real_cluster.fleet().node(dead)
        try:
            asyncio.run(_power_off(node))
            _wait(lambda: _known_dead(k, dead), 180, f"{dead} NotReady and unschedulable",
                  lambda: _node(k, dead).get("status", {}).get("conditions"))  # fmt: skip
            held = _vmi(k, ns)
            assert held["metadata"]["uid"] == first["metadata"]["uid"]
            assert held["status"]["phase"] == "Running", held["status"]
            pod = _launcher(k, ns, first["metadata"]["uid"])
            assert pod["status"]["phase"] == "Running"  # as the API last heard
            k("delete", "pod", "-n", ns, pod["metadata"]["name"], "--wait=false")
            again = _wait(
                lambda: (v := _vmi(k, ns)).get("metadata", {}).get("uid") != first["metadata"]["uid"]
                and v.get("status", {}).get("phase") == "Running" and v,
                300, "a new demo VMI Running", lambda: _vmi(k, ns).get("status"),
            )  # fmt: skip
            survivor, new_pod = _pod_uid(again)
            assert survivor != dead
            logs = _controller_logs(k, skip_node=dead)
            assert "vmi_failed_node_unresponsive" in logs and f"{ns}/demo" in logs
            _wait(lambda: _last_tick(real_cluster, survivor, new_pod) > 2, 180, "new guest ticks")
        finally:
            asyncio.run(_power_on(node))
            _wait(
                lambda: _healthy(k, dead), 240, f"{dead} back", lambda: _node(k, dead)["metadata"]
            )
