"""Multus secondary networks on real nodes: multus-cni's thin plugin is each node's primary
CNI plugin, the launcher pod asks it for the VMI's `networks[].multus` networks through the
`k8s.v1.cni.cncf.io/networks` annotation, virt-handler bridges each secondary pod interface
into the guest and the launcher serves it DHCP. Two VMs on different nodes talk over a
bridge-plugin network joined across the nodes, and KubeVirt's vmi-multus-ptp and
vmi-multus-multiple-net examples run with a `ptp` NetworkAttachmentDefinition."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.realnode import multus as testbed_multus
from shared import multus
from tests.integration.realnodes import bindings
from tests.integration.realnodes.test_network import _guest_says, _running_vmi, _vmi_manifest
from tests.integration.realnodes.test_shared_storage import _agent_connected, _guest_sh
from tests.integration.realnodes.test_story import REPO, _pod_uid, _wait

pytestmark = pytest.mark.cluster
EXAMPLES = REPO / "examples" / "kubevirt"


def _nad(name: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name},
        "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": name, **config})},
    }


def _bridge_nad(name: str, address: str) -> dict[str, Any]:
    """The `bridge` plugin on the nodes' kvsec0 (joined across nodes), one static address."""
    return _nad(name, {
        "type": "bridge", "bridge": testbed_multus.NODE_BRIDGE, "isGateway": False,
        "ipMasq": False, "ipam": {"type": "static", "addresses": [{"address": address}]},
    })  # fmt: skip


def _ptp_nad(subnet: str) -> dict[str, Any]:
    """KubeVirt's tests' ptp-conf, on an address range of the test cluster's block."""
    return _nad("ptp-conf", {
        "type": "ptp", "ipMasq": False, "ipam": {"type": "host-local", "subnet": subnet},
    })  # fmt: skip


def _secondary_vmi(name: str, nad: str, *, node: str, kernel_args: str = "") -> dict[str, Any]:
    """The test guest with the pod network (masquerade) and `nad` bridge-bound as `sec`."""
    vmi = _vmi_manifest(name, binding="masquerade", kernel_args=kernel_args)
    spec = vmi["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    spec["domain"]["devices"]["interfaces"].append({"name": "sec", "bridge": {}})
    spec["networks"].append({"name": "sec", "multus": {"networkName": nad}})
    return vmi


def _as_vm(vmi: dict[str, Any]) -> dict[str, Any]:
    """A VM (runStrategy Always) whose template is `vmi`."""
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": vmi["metadata"],
        "spec": {"runStrategy": "Always", "template": {"metadata": {}, "spec": vmi["spec"]}},
    }  # fmt: skip


def _apply(k: Kubectl, ns: str, *objs: dict[str, Any]) -> None:
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": list(objs)}))  # fmt: skip


def _launcher_pod(k: Kubectl, ns: str, vmi: dict[str, Any]) -> dict[str, Any]:
    _, uid = _pod_uid(vmi)
    items = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    (pod,) = [p for p in items if p["metadata"]["uid"] == uid]
    return pod  # type: ignore[no-any-return]


def _attached(k: Kubectl, ns: str, vmi: dict[str, Any], network: str) -> dict[str, Any]:
    """The launcher pod asked multus for `network` on KubeVirt's pod<hash> interface, and
    multus' network-status annotation reports that interface."""
    annotations = _launcher_pod(k, ns, vmi)["metadata"]["annotations"]
    asked = json.loads(annotations[multus.NETWORKS_ANNOTATION])
    pod_if = multus.pod_interface(network)
    assert [a["interface"] for a in asked] == [pod_if], asked
    status = json.loads(annotations[multus.NETWORK_STATUS_ANNOTATION])
    (found,) = [s for s in status if s.get("interface") == pod_if]
    return found  # type: ignore[no-any-return]


def _interface_ip(k: Kubectl, ns: str, name: str, iface: str, subnet: str) -> str:
    """status.interfaces[iface].ipAddress once the guest agent reports one in `subnet`."""
    net = ipaddress.ip_network(subnet, strict=False)

    def probe() -> str | None:
        vmi = json.loads(k("get", "vmi", name, "-n", ns, "-o", "json"))
        for i in vmi["status"].get("interfaces", []):
            ip = i.get("ipAddress")
            if i.get("name") == iface and ip and ipaddress.ip_address(ip) in net:
                return str(ip)
        return None

    found: str = _wait(probe, 180, f"{name}'s {iface} address in status.interfaces",
                       lambda: k("get", "vmi", name, "-n", ns, "-o", "jsonpath={.status}"))  # fmt: skip
    return found


def test_vms_on_two_nodes_talk_over_a_multus_network_and_kubevirts_examples_run(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Two VMs pinned to different nodes, each with the pod network and a bridge-bound
    multus network (the `bridge` plugin on the link joining the nodes): each launcher pod
    got its pod<hash> interface from multus, the guests took their secondary addresses by
    DHCP on eth1, one pings the other across the nodes, and status.interfaces reports the
    secondary address. KubeVirt's vmi-multus-ptp and vmi-multus-multiple-net examples (a
    `ptp` network) run, and status.interfaces lists their secondary interfaces with an
    address of the ptp range. A third VM's only network is a multus default network
    (`multus.default`, masquerade): its launcher pod's IP is that NAD's address, not the
    cluster network's, and its guest pings the first VM's secondary address through it.
    sec-b's secondary interface is bound by a managedTap network binding plugin registered
    in the KubeVirt CR (_managed_tap_talks). Then a NIC is hot-plugged into sec-a (a VM) and
    unplugged again (_hotplug_and_unplug)."""
    with bindings.registered(real_stack, {"l2tap": {"domainAttachmentType": "managedTap"}}):
        _two_nodes_talk(real_stack, real_cluster, real_namespace)


def _two_nodes_talk(k: Kubectl, real_cluster: Cluster, ns: str) -> None:
    plan = real_cluster.fleet().plan
    a_ip, b_ip = plan.secondary_addr(10), plan.secondary_addr(11)
    ptp_subnet = f"{plan.secondary_addr(128)}/25"
    _apply(k, ns, _bridge_nad("sec-a", f"{a_ip}/25"), _bridge_nad("sec-b", f"{b_ip}/25"),
           _ptp_nad(ptp_subnet))  # fmt: skip
    examples = [
        yaml.safe_load((EXAMPLES / f"{n}.yaml").read_text())
        for n in ("vmi-multus-ptp", "vmi-multus-multiple-net")
    ]
    d_ip = plan.secondary_addr(12)
    primary = _vmi_manifest("prim-d", binding="masquerade", kernel_args=f"kvpy.ping={a_ip}")
    primary["spec"]["networks"] = [
        {"name": "default", "multus": {"networkName": "prim-d", "default": True}}
    ]
    _apply(k, ns, _bridge_nad("prim-d", f"{d_ip}/25"))
    sec_a = _secondary_vmi("sec-a", "sec-a", node="node01", kernel_args=f"kvpy.hotping={b_ip}")
    sec_b = _secondary_vmi("sec-b", "sec-b", node="node02")
    sec_b["spec"]["domain"]["devices"]["interfaces"][1] = {
        "name": "sec",
        "binding": {"name": "l2tap"},
    }
    bindings.apply_when_admitted(k, ns, sec_b)
    _apply(k, ns, _as_vm(sec_a), primary, *examples)
    a, b = _running_vmi(k, ns, "sec-a"), _running_vmi(k, ns, "sec-b")
    assert (_pod_uid(a)[0], _pod_uid(b)[0]) == ("node01", "node02")
    for vmi in (a, b):
        assert _attached(k, ns, vmi, "sec")["name"].endswith("sec-a" if vmi is a else "sec-b")
    serial = _guest_says(real_cluster, a, "KUBEVIRT-PY-DHCP eth1")
    assert f"KUBEVIRT-PY-DHCP eth1 {a_ip}/25" in serial, serial[-1500:]
    _managed_tap_talks(k, ns, real_cluster, b, own=b_ip, peer=a_ip)
    assert _interface_ip(k, ns, "sec-b", "sec", f"{b_ip}/25") == b_ip
    d = _running_vmi(k, ns, "prim-d")
    d_pod = _launcher_pod(k, ns, d)
    assert d_pod["metadata"]["annotations"][multus.DEFAULT_NETWORK_ANNOTATION] == f"{ns}/prim-d"
    assert d_pod["status"]["podIP"] == d_ip, d_pod["status"]
    d_serial = _guest_says(real_cluster, d, "KUBEVIRT-PY-PING-")
    assert f"KUBEVIRT-PY-PING-OK {a_ip}" in d_serial, d_serial[-1500:]
    for example in ("vmi-multus-ptp", "vmi-multus-multiple-net"):
        vmi = _running_vmi(k, ns, example)
        assert "ptp-conf" in _attached(k, ns, vmi, "ptp")["name"]
        _interface_ip(k, ns, example, "ptp", ptp_subnet)
    _hotplug_and_unplug(k, ns, real_cluster, a, peer=b_ip, own=a_ip,
                        address=plan.secondary_addr(13))  # fmt: skip


def _managed_tap_talks(
    k: Kubectl, ns: str, cluster: Cluster, vmi: dict[str, Any], *, own: str, peer: str
) -> None:
    """A managedTap plugin: virt-handler bridged the pod interface to the launcher's tap and
    took the NAD's address off it, and serves no DHCP (KubeVirt's managedTap: the network's
    own addressing): the guest, given the NAD's address by hand (its agent), reaches the
    bridge-bound guest on the other node at layer 2 through it."""
    _agent_connected(k, ns, vmi["metadata"]["name"])
    script = (
        "PATH=/sbin:/bin:/usr/sbin:/usr/bin; "
        "for p in $(pgrep -f 'udhcpc.*eth1' 2>/dev/null); do kill $p; done; "
        f"ip addr add {own}/25 dev eth1 && ip link set eth1 up && ping -c 5 -W 5 {peer}"
    )
    out = _guest_sh(cluster, vmi, script)
    assert f"bytes from {peer}" in out, out


def _vmi_now(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    return json.loads(k("get", "vmi", name, "-n", ns, "-o", "json"))  # type: ignore[no-any-return]


def _listed(vmi: dict[str, Any]) -> set[str]:
    """status.interfaces the domain has (the guest agent's own entries left out)."""
    return {i["name"] for i in vmi["status"].get("interfaces", [])
            if i.get("name") and i.get("infoSource") != "guest-agent"}  # fmt: skip


def _moved(k: Kubectl, ns: str, vmi: dict[str, Any], *, to: str, hot: bool) -> dict[str, Any]:
    """The VMI once it runs on `to` with `hot` listed (or not) in status.interfaces."""
    name = vmi["metadata"]["name"]

    def done() -> dict[str, Any] | None:
        v = _vmi_now(k, ns, name)
        on = v["status"].get("nodeName") == to and v["status"].get("phase") == "Running"
        return v if on and ("hot" in _listed(v)) == hot else None

    def seen() -> str:
        v = _vmi_now(k, ns, name)
        vmims = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
        logs = k("logs", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "--tail", "400",
                 check=False)  # fmt: skip
        wanted = [line for line in logs.splitlines() if "network" in line or "workload" in line]
        return (f"spec: {v['spec']['domain']['devices']['interfaces']} {v['spec']['networks']}"
                f"\nstatus: {v.get('status')}\nvmims: {[m.get('status') for m in vmims]}"
                f"\ncontroller: {wanted[-30:]}")  # fmt: skip

    moved: dict[str, Any] = _wait(done, 240, f"{name} on {to}, hot NIC listed={hot}", seen)
    assert moved["metadata"]["uid"] == vmi["metadata"]["uid"]  # the same VMI, migrated
    return moved


def _hotplug_and_unplug(
    k: Kubectl, ns: str, cluster: Cluster, vmi: dict[str, Any], *, peer: str, own: str,
    address: str,
) -> None:  # fmt: skip
    """NIC hotplug (KubeVirt >= 1.4, migration-based): a bridge-bound interface on a third
    NAD added to the running VM sec-a (its node selector dropped in the same edit) moves the
    VMI to the other node in a pod with that attachment, where the NIC is attached: the
    guest sees eth2, takes the NAD's address by DHCP and pings sec-b through it; no
    RestartRequired. Then `state: absent` detaches it (status.interfaces loses it) and a
    migration back drops the attachment from the pod, the same edit pointing `sec` at
    another NAD (KubeVirt 1.8's swap: the new pod is attached to it); the VMI uid stays
    throughout."""
    _apply(k, ns, _bridge_nad("sec-c", f"{address}/25"), _bridge_nad("sec-a2", f"{own}/25"))
    edit = [
        {"op": "add", "path": "/spec/template/spec/domain/devices/interfaces/-",
         "value": {"name": "hot", "bridge": {}}},
        {"op": "add", "path": "/spec/template/spec/networks/-",
         "value": {"name": "hot", "multus": {"networkName": "sec-c"}}},
        {"op": "remove", "path": "/spec/template/spec/nodeSelector"},
    ]  # fmt: skip
    k("patch", "vm", "sec-a", "-n", ns, "--type", "json", "-p", json.dumps(edit))
    plugged = _moved(k, ns, vmi, to="node02", hot=True)
    pod = _launcher_pod(k, ns, plugged)["metadata"]["annotations"]
    asked = [a["interface"] for a in json.loads(pod[multus.NETWORKS_ANNOTATION])]
    assert asked == [multus.pod_interface("sec"), multus.pod_interface("hot")], asked
    serial = _guest_says(cluster, plugged, "KUBEVIRT-PY-NIC-ADDED eth2", "KUBEVIRT-PY-HOTPING-")
    assert f"KUBEVIRT-PY-DHCP eth2 {address}/25" in serial, serial[-1500:]
    assert f"KUBEVIRT-PY-HOTPING-OK {peer} eth2" in serial, serial[-1500:]
    vm = json.loads(k("get", "vm", "sec-a", "-n", ns, "-o", "json"))
    assert "RestartRequired" not in {c["type"] for c in vm["status"].get("conditions", [])}

    unplug = [
        {"op": "add", "path": "/spec/template/spec/domain/devices/interfaces/2/state",
         "value": "absent"},
        {"op": "replace", "path": "/spec/template/spec/networks/1/multus/networkName",
         "value": "sec-a2"},
    ]  # fmt: skip
    k("patch", "vm", "sec-a", "-n", ns, "--type", "json", "-p", json.dumps(unplug))
    unplugged = _moved(k, ns, vmi, to="node01", hot=False)
    pod = _launcher_pod(k, ns, unplugged)["metadata"]["annotations"]
    asked = [(a["name"], a["interface"]) for a in json.loads(pod[multus.NETWORKS_ANNOTATION])]
    assert asked == [("sec-a2", multus.pod_interface("sec"))], asked
    assert _attached(k, ns, unplugged, "sec")["name"].endswith("sec-a2")
