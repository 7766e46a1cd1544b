"""Device resources through the kubelet device-plugin API on the real local cluster:
virt-handler's device plugins register with a node agent, the Node advertises what they
report, the scheduler and the agent honour it, and a bad registration is refused."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.testing import pod_logs, wait_for
from shared.deviceplugin import KUBELET_SOCKET, RegisterRequest, RegistrationRefused, rpc
from shared.kube import NODES, PODS, ClientConfig, KubeClient, Registry
from tests.integration.cluster.deviceplugins import TUN, node_allocatable, node_device_plugins

pytestmark = pytest.mark.cluster
NODE = "node02"
COUNT = 4
# The container reports whether /dev/net/tun is a character device it can open rw.
CHECK_TUN = """
import os, stat, time
st = os.stat("/dev/net/tun"); fd = os.open("/dev/net/tun", os.O_RDWR); os.close(fd)
print("TUN-OK" if stat.S_ISCHR(st.st_mode) else "TUN-NOT-A-DEVICE", flush=True)
time.sleep(3600)
"""


@pytest.fixture
async def kube(kube_cluster: Cluster) -> AsyncIterator[KubeClient]:
    async with await KubeClient.connect(
        ClientConfig(kubeconfig=kube_cluster.kubeconfig, user_agent="device-plugin-tests"),
        registry=Registry(),
    ) as client:
        yield client


def _pod(name: str, tun: int) -> dict[str, Any]:
    limits = {TUN: str(tun)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},  # through the scheduler
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": "kubevirt-py/python:latest",
                    "command": ["python", "-c", CHECK_TUN],
                    "resources": {"limits": limits, "requests": limits},
                }
            ],
        },
    }


def _scheduling(pod: dict[str, Any]) -> dict[str, Any]:
    status = pod.get("status") or {}
    return {
        "phase": status.get("phase"),
        "conditions": status.get("conditions"),
        "containers": status.get("containerStatuses"),
    }


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


async def test_plugins_advertise_allocate_and_withdraw(
    kube_cluster: Cluster, kube: KubeClient, kube_namespace: str
) -> None:
    """The handler's plugins register with node02's agent: the Node's tun capacity and
    allocatable become the plugin's Healthy devices. A pod requesting one is scheduled
    there, the agent calls the plugin's Allocate and the container gets /dev/net/tun
    read-write; a pod wanting more than is left stays Unschedulable. When the plugins
    stop, the Node advertises 0."""
    ns = kube_namespace
    async with node_device_plugins(kube_cluster, kube, nodes=[NODE], count=COUNT) as plugins:
        tun = next(p for p in plugins[NODE].plugins if p.name == "tun")
        await kube.create(PODS, _pod("uses-tun", 1), namespace=ns)
        pod = await wait_for(
            lambda: kube.get(PODS, "uses-tun", namespace=ns),
            lambda p: (
                (p.get("status") or {}).get("phase") == "Running"
                and "TUN-OK" in pod_logs(kube_cluster.config, p)
            ),
            what="the tun pod Running with the device",
            timeout=60,
            show=_scheduling,
        )
        assert pod["spec"]["nodeName"] == NODE
        assert tun.allocations == 1
        await kube.create(PODS, _pod("wants-too-many", COUNT), namespace=ns)
        await wait_for(
            lambda: kube.get(PODS, "wants-too-many", namespace=ns),
            _unschedulable,
            what="the greedy pod Unschedulable",
            timeout=30,
            show=_scheduling,
        )
        assert tun.allocations == 1
    await wait_for(
        lambda: node_allocatable(kube, NODE, TUN),
        lambda v: v == "0",
        what=f"{TUN} back to 0 once the plugins are gone",
        timeout=30,
    )
    node = await kube.get(NODES, NODE)
    assert node["status"]["capacity"][TUN] == "0"


async def test_bad_registration_is_refused_and_the_agent_stays_up(
    kube_cluster: Cluster, kube: KubeClient
) -> None:
    """A RegisterRequest with a version the node does not speak is refused with an error
    naming the field; the agent logs it, keeps its Node Ready and accepts the next, good
    registration."""
    kubelet = kube_cluster.config.device_plugins_dir(NODE) / KUBELET_SOCKET
    bad = RegisterRequest(version="v1alpha", endpoint="x.sock", resource_name=TUN)
    with pytest.raises(RegistrationRefused) as refused:
        await rpc.register(kubelet, bad, timeout=10)
    assert refused.value.field == "version"
    assert "'v1alpha'" in refused.value.reason and "v1beta1" in refused.value.reason
    log = kube_cluster.paths.log(f"nodeagent-{NODE}").read_text(errors="replace")
    assert "device_plugin_refused" in log
    assert await kube_cluster.node_ready(NODE) == "True"
    async with node_device_plugins(kube_cluster, kube, nodes=[NODE], count=COUNT):
        assert await node_allocatable(kube, NODE, TUN) == str(COUNT)


async def test_plugins_register_again_after_the_agent_restarts(
    kube_cluster: Cluster, kube: KubeClient
) -> None:
    """A node agent killed and restarted (a kubelet restart) empties its device-plugins dir
    and serves a new kubelet.sock; the plugins notice and register again, so the Node
    advertises the devices again without restarting the plugins."""
    async with node_device_plugins(
        kube_cluster, kube, nodes=[NODE], count=COUNT, interval=0.5
    ) as plugins:
        before = plugins[NODE].registrations
        await kube_cluster.stop_node_agent(NODE, sig=signal.SIGKILL)
        await kube_cluster.start_node_agent(NODE)
        await wait_for(
            lambda: node_allocatable(kube, NODE, TUN),
            lambda v: v == str(COUNT) and plugins[NODE].registrations > before,
            what="tun advertised again after re-registration",
            timeout=60,
        )


async def test_plugins_register_again_after_the_agent_drops_their_stream(
    kube_cluster: Cluster, kube: KubeClient, kube_namespace: str
) -> None:
    """The agent drops the plugin's connection (here: another registration of the same
    resource replaces it, and its endpoint cannot be dialled, so the agent serves no tun
    plugin at all). The handler's plugin sees its ListAndWatch stream closed, registers
    again, the Node advertises tun again and a pod requesting it runs."""
    async with node_device_plugins(
        kube_cluster, kube, nodes=[NODE], count=COUNT, interval=0.5
    ) as plugins:
        before = plugins[NODE].registrations
        kubelet = kube_cluster.config.device_plugins_dir(NODE) / KUBELET_SOCKET
        usurper = RegisterRequest(version="v1beta1", endpoint="nobody.sock", resource_name=TUN)
        await rpc.register(kubelet, usurper, timeout=10)
        await wait_for(
            lambda: node_allocatable(kube, NODE, TUN),
            lambda v: v == str(COUNT) and plugins[NODE].registrations > before,
            what="tun advertised again after the plugin registered again",
            timeout=60,
        )
        log = kube_cluster.paths.log(f"nodeagent-{NODE}").read_text(errors="replace")
        assert "device_plugin_gone" in log or "device_plugin_stream_ended" in log
        await kube.create(PODS, _pod("tun-after-drop", 1), namespace=kube_namespace)
        await wait_for(
            lambda: kube.get(PODS, "tun-after-drop", namespace=kube_namespace),
            lambda p: "TUN-OK" in pod_logs(kube_cluster.config, p),
            what="a tun pod running after the drop",
            timeout=60,
            show=_scheduling,
        )
