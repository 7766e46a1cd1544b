"""A kubelet restarted under a running VM (KubeVirt users' "a kubelet restart kills VMs"):
the guest keeps running in the same launcher pod and the same QEMU, its VMI stays Running,
the handler's device plugins register again with the new
kubelet (which starts with an empty device-plugins directory), and a second VM then starts
on that node — its launcher pod needs `devices.kubevirt.io/tun`, which only a plugin that
registered again can give."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.procs import read_pidfile, stop_process
from localkube.realnode.node import RealNode
from tests.integration.realnodes.test_migration import _last_tick
from tests.integration.realnodes.test_story import (
    REPO,
    _pod_uid,
    _qemu_pids,
    _vmi,
    _wait,
    start_demo,
)

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
TUN = "devices.kubevirt.io/tun"


async def _restart_kubelet(node: RealNode) -> None:
    """SIGTERM the kubelet (as `systemctl restart kubelet` does), then start it again;
    containerd and every container keep running."""
    pid = read_pidfile(node.specs()["kubelet"].pidfile)
    assert pid is not None, "the kubelet is not running"
    await stop_process(pid, marker=node.inputs.marker, grace=20)
    node.start_kubelet()


def _get(k: Kubectl, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(k("get", *args, "-o", "json"))
    return out


def _kubelet_ready_since(k: Kubectl, name: str) -> str:
    """The Node's Ready condition's lastTransitionTime when Ready, else ''."""
    conds = _get(k, "node", name).get("status", {}).get("conditions", [])
    ready: dict[str, Any] = next((c for c in conds if c["type"] == "Ready"), {})
    return str(ready.get("lastTransitionTime", "")) if ready.get("status") == "True" else ""


def _tiny_on(node: str, ns: str) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": "second", "namespace": ns}
    vmi["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return vmi


def test_kubelet_restart_keeps_the_guest_and_the_node_usable(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Restart the kubelet of the demo VM's node: same VMI, launcher pod and QEMU, the
    console still ticking; the node's kubelet comes back and a second VM pinned to that node
    runs (the device plugins registered with the new kubelet)."""
    k, ns = real_stack, real_namespace
    first = start_demo(k, ns)
    name, pod_uid = _pod_uid(first)
    _wait(lambda: _last_tick(real_cluster, name, pod_uid) > 2, 180, "guest ticks")
    qemu = _qemu_pids(f"{ns}_demo")
    assert len(qemu) == 1, qemu
    node = real_cluster.fleet().node(name)

    asyncio.run(_restart_kubelet(node))
    # At once, as a user would: the new kubelet may refuse the launcher pod before the
    # device plugins registered again (UnexpectedAdmissionError); the controller then
    # makes another.
    k("apply", "-f", "-", stdin=json.dumps(_tiny_on(name, ns)))
    _wait(lambda: _kubelet_ready_since(k, name), 120, f"{name} Ready after the restart")
    tick = _last_tick(real_cluster, name, pod_uid)
    second = _wait(
        lambda: (v := _get(k, "vmi", "second", "-n", ns)).get("status", {}).get("phase")
        == "Running" and v,
        300, "the second VMI Running on the restarted node",
        lambda: (_get(k, "node", name)["status"].get("allocatable"),
                 k("get", "pods", "-n", ns, "-o", "wide")),
    )  # fmt: skip
    assert second["status"]["nodeName"] == name
    pods = _get(k, "pods", "-n", ns, "-l", f"kubevirt.io/created-by={second['metadata']['uid']}")
    refused = [p for p in pods["items"] if p["status"].get("reason") == "UnexpectedAdmissionError"]
    print(f"launcher pods refused by the restarted kubelet: {len(refused)}")
    # The kubelet posts the re-registered devices with its next node status update.
    _wait(lambda: _get(k, "node", name)["status"]["allocatable"].get(TUN, "0") != "0",
          60, f"{name} advertising {TUN} again",
          lambda: _get(k, "node", name)["status"]["allocatable"])  # fmt: skip

    now = _vmi(k, ns)
    assert now["metadata"]["uid"] == first["metadata"]["uid"]
    assert now["status"]["phase"] == "Running", now["status"]
    assert _pod_uid(now) == (name, pod_uid)
    assert _qemu_pids(f"{ns}_demo") == qemu
    _wait(lambda: _last_tick(real_cluster, name, pod_uid) > tick + 2, 60, "the guest ticking on")
