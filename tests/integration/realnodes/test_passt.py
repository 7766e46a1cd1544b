"""The passt binding on real nodes: the launcher runs Debian's passt in the launcher pod's
network namespace and QEMU reaches it over `-netdev stream`; the guest takes the pod's
address from passt's DHCP, pings a pod on the other node (passt's ping sockets) and is
reached on the launcher pod's IP on the ports it lists."""

from __future__ import annotations

import json

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_network import (
    IDLE,
    _assert_served,
    _guest_says,
    _launcher_ip,
    _other,
    _pod,
    _probe,
    _running_vmi,
    _start_pod,
    _vmi_manifest,
)
from tests.integration.realnodes.test_story import _pod_uid

pytestmark = pytest.mark.cluster


def test_passt_guest_holds_the_pod_ip_and_serves_its_ports(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A passtBinding guest listing TCP 7, TCP 80 and UDP 7 gets the launcher pod's IP by
    passt's DHCP, pings a pod on another node, and a pod on the other node reaches it on
    the launcher pod's IP over TCP 7, HTTP 80 and UDP 7; the VMI is not live-migratable."""
    k, ns = real_stack, real_namespace
    target = _start_pod(k, ns, _pod("pinged-passt", IDLE))
    vmi = _vmi_manifest("passt", binding="passtBinding", kernel_args=f"kvpy.ping={target['podIP']}")
    vmi["spec"]["domain"]["devices"]["interfaces"][0]["ports"] = [
        {"port": 7}, {"port": 80}, {"port": 7, "protocol": "UDP"},
    ]  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(vmi))
    running = _running_vmi(k, ns, "passt")
    pod_ip = _launcher_ip(k, ns, running)
    serial = _guest_says(real_cluster, running, "KUBEVIRT-PY-SERVICES-UP", "KUBEVIRT-PY-PING-")
    assert f"KUBEVIRT-PY-DHCP eth0 {pod_ip}/" in serial, serial[-1500:]
    assert f"KUBEVIRT-PY-PING-OK {target['podIP']}" in serial, serial[-1500:]
    conditions = {c["type"]: c for c in running["status"].get("conditions", [])}
    assert conditions["LiveMigratable"]["status"] == "False", conditions
    node, _ = _pod_uid(running)
    _assert_served(_probe(k, ns, "probe-passt", pod_ip, node=_other(node)))
