"""Pod network setup on real nodes: virt-handler wires the launcher pod's network namespace
(bridge + tap, nftables NAT for masquerade, the pod's address moved to the guest for a
bridge binding) and the launcher serves the guest DHCP, or the launcher runs passt; other
pods reach the guest, the guest reaches other pods, and a masquerade VM keeps serving after
live migration."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from shared.model.quantity import parse_bytes
from tests.integration.realnodes import bindings
from tests.integration.realnodes.test_nonroot import assert_passt_confined
from tests.integration.realnodes.test_story import (
    _pod_uid,
    _serial,
    _virtctl,
    _vmi,
    _wait,
    start_demo,
)

pytestmark = pytest.mark.cluster
PY_IMAGE = "registry.local/kubevirt-py/virt-controller:dev"
GUEST_IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"

# Another pod's view of guests: TCP echo (7), HTTP (80) and UDP echo (7) at each address
# given, each retried for up to a minute (the guest may still be starting its services);
# an IPv6 address only over HTTP (the guest's busybox httpd listens on both families).
PROBE = """
import socket, sys, time, urllib.request
def tcp():
    with socket.create_connection((host, 7), timeout=5) as c:
        c.sendall(b"kvpy-tcp\\n"); return c.recv(64).decode().strip()
def http():
    url = "http://[%s]/" % host if ":" in host else "http://%s/" % host
    return urllib.request.urlopen(url, timeout=5).read().decode().strip()
def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3); s.sendto(b"kvpy-udp", (host, 7)); return s.recv(64).decode()
for host in sys.argv[1:]:
    probes = (("http80", http),) if ":" in host else (("tcp7", tcp), ("http80", http), ("udp7", udp))
    for name, probe in probes:
        deadline, why = time.monotonic() + 60, ""
        while time.monotonic() < deadline:
            try:
                print(host, name, probe(), flush=True); break
            except OSError as e:
                why = repr(e); time.sleep(1)
        else:
            print(host, name, "FAILED", why, flush=True)
"""
IDLE = "import time; print('idle', flush=True); time.sleep(3600)"


def _pod(name: str, code: str, *args: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "main", "image": PY_IMAGE, "command": ["python3", "-c", code, *args]}
        ],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _pod_status(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    out = k("get", "pod", name, "-n", ns, "-o", "json", check=False)
    return json.loads(out).get("status", {}) if out else {}


def _vmi_manifest(name: str, *, binding: str, kernel_args: str = "") -> dict[str, Any]:
    args = f"console=ttyS0 panic=-1 quiet {kernel_args}".strip()
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "domain": {
                "memory": {"guest": "128Mi"},
                "resources": {"requests": {"memory": "128Mi"}},
                "firmware": {"kernelBoot": {"kernelArgs": args, "container": {
                    "image": GUEST_IMAGE, "kernelPath": "/boot/vmlinuz",
                    "initrdPath": "/boot/initrd.img"}}},
                "devices": {
                    "disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}],
                    "interfaces": [{"name": "default", binding: {}}],
                },
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [{"name": "containerdisk", "containerDisk": {"image": GUEST_IMAGE}}],
        },
    }  # fmt: skip


def _running_vmi(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def get() -> dict[str, Any]:
        out = k("get", "vmi", name, "-n", ns, "-o", "json", check=False)
        return json.loads(out) if out else {}

    return _wait(  # type: ignore[no-any-return]
        lambda: (v := get()).get("status", {}).get("phase") == "Running" and v,
        300, f"VMI {name} Running", lambda: get().get("status"),
    )  # fmt: skip


def _launcher_ip(k: Kubectl, ns: str, vmi: dict[str, Any]) -> str:
    return _launcher_ips(k, ns, vmi)[0]


def _launcher_ips(k: Kubectl, ns: str, vmi: dict[str, Any]) -> list[str]:
    """The launcher pod's podIPs: IPv4 first, then IPv6 (the local cluster is dual-stack)."""
    _, uid = _pod_uid(vmi)
    items = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    (pod,) = [p for p in items if p["metadata"]["uid"] == uid]
    ips = [str(p["ip"]) for p in pod["status"]["podIPs"]]
    assert ips[0] == pod["status"]["podIP"], ips
    return ips


def _start_pod(k: Kubectl, ns: str, manifest: dict[str, Any]) -> dict[str, Any]:
    name = manifest["metadata"]["name"]
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(manifest))
    return _wait(  # type: ignore[no-any-return]
        lambda: (s := _pod_status(k, ns, name)).get("podIP") and s, 120, f"pod {name} started"
    )


def _probe(k: Kubectl, ns: str, name: str, *hosts: str, node: str) -> str:
    """The probe pod's output, run on `node` against each of `hosts`."""
    _start_pod(k, ns, _pod(name, PROBE, *hosts, node=node))
    _wait(
        lambda: _pod_status(k, ns, name).get("phase") in ("Succeeded", "Failed"),
        240, f"probe {name} done", lambda: _pod_status(k, ns, name),
    )  # fmt: skip
    return k("logs", "-n", ns, name)


def _other(node: str) -> str:
    return "node02" if node == "node01" else "node01"


def _guest_says(cluster: Cluster, vmi: dict[str, Any], *markers: str) -> str:
    return _wait(  # type: ignore[no-any-return]
        lambda: (s := _serial(cluster, vmi)) and all(m in s for m in markers) and s,
        240, f"guest console shows {markers}", lambda: _serial(cluster, vmi)[-1500:],
    )  # fmt: skip


def _assert_served(logs: str, host: str) -> None:
    assert f"{host} tcp7 kvpy-tcp" in logs, logs
    assert f"{host} http80 KUBEVIRT-PY-HTTP-OK" in logs, logs
    assert f"{host} udp7 kvpy-udp" in logs, logs


def test_masquerade_guest_behind_nat_in_the_pod(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A masquerade guest listing no ports, its pod network's vmNetworkCIDR 10.11.12.0/24,
    gets 10.11.12.2 by the launcher's DHCP (gateway 10.11.12.1), pings a pod on another
    node (ICMP out through the pod's NAT), and a pod on the other node reaches it on the
    launcher pod's IP over TCP 7, HTTP 80 and UDP 7 (every port DNATed). (KubeVirt's
    default range, 10.0.2.0/24, is the migration test's.) Dual-stack: the guest gets
    fd10:0:3::2 of its vmIPv6NetworkCIDR fd10:0:3::/120 by the launcher's DHCPv6, the
    same pod reaches it on the launcher pod's IPv6 address over HTTP 80 (NAT66), and the
    VMI's status.interfaces[0].ipAddresses lists both pod addresses, IPv4 first."""
    k, ns = real_stack, real_namespace
    target = _start_pod(k, ns, _pod("pinged", IDLE))
    manifest = _vmi_manifest(
        "masq", binding="masquerade", kernel_args=f"kvpy.ping={target['podIP']}"
    )
    manifest["spec"]["networks"][0]["pod"] = {
        "vmNetworkCIDR": "10.11.12.0/24",
        "vmIPv6NetworkCIDR": "fd10:0:3::/120",
    }
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(manifest))
    vmi = _running_vmi(k, ns, "masq")
    serial = _guest_says(
        real_cluster, vmi, "KUBEVIRT-PY-SERVICES-UP", "KUBEVIRT-PY-DHCP", "KUBEVIRT-PY-PING-",
        "KUBEVIRT-PY-DHCP6",
    )  # fmt: skip
    assert "KUBEVIRT-PY-DHCP eth0 10.11.12.2/24 router=10.11.12.1" in serial, serial[-1500:]
    assert "KUBEVIRT-PY-DHCP6 eth0 fd10:0:3::2 router=fe80::" in serial, serial[-1500:]
    assert f"KUBEVIRT-PY-PING-OK {target['podIP']}" in serial, serial[-1500:]
    node, _ = _pod_uid(vmi)
    pod_ip, pod_ip6 = _launcher_ips(k, ns, vmi)
    logs = _probe(k, ns, "probe-masq", pod_ip, pod_ip6, node=_other(node))
    _assert_served(logs, pod_ip)
    assert f"{pod_ip6} http80 KUBEVIRT-PY-HTTP-OK" in logs, logs

    def reported() -> list[str]:
        return list(_named_vmi(k, ns, "masq")["status"]["interfaces"][0].get("ipAddresses", []))

    _wait(lambda: reported() == [pod_ip, pod_ip6], 60, "both pod IPs in the VMI status", reported)


def test_bridge_and_passt_guests_hold_the_pod_ip(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A bridge-bound guest and a guest bound by KubeVirt's `passt` network binding plugin
    (registered in the KubeVirt CR as KubeVirt's guide does, with a memory overhead; listing
    TCP 7, TCP 80 and UDP 7; an unregistered plugin is refused naming the field), booted
    side by side, each take their launcher pod's IP by DHCP (the launcher's responder for
    bridge, passt's own for passt); the passt guest pings another pod (passt's ping
    sockets); a pod on the bridge guest's other node reaches both guests at their pod IPs
    over TCP 7, HTTP 80 and UDP 7; the bridge VMI is not live-migratable
    (InterfaceNotLiveMigratable), the passt one is. passt runs under its seccomp profile
    (KubeVirt's plus its sandbox calls, `kubevirt/passt.json`, named by the pod;
    assert_passt_confined). Dual-stack: passt's own DHCPv6 hands the passt guest the launcher
    pod's IPv6 address, the same pod reaches it there over HTTP 80 (through the launcher's
    filter of the guest's frames from `::`, launcher/passtfilter.py), and the VMI's
    status.interfaces[0].ipAddresses lists both pod IPs, IPv4 first. Then the passt VMI
    live-migrates: the guest keeps its addresses (status.interfaces, from the guest agent
    too) and a pod reaches it on the target pod's IP over TCP 7, HTTP 80 and UDP 7, and on
    the target pod's IPv6 address over HTTP 80 (KubeVirt 1.8's passt migration)."""
    k, ns = real_stack, real_namespace
    target = _start_pod(k, ns, _pod("pinged-passt", IDLE))
    passt = _vmi_manifest("passt", binding="binding", kernel_args=f"kvpy.ping={target['podIP']}")
    passt["spec"]["domain"]["devices"]["interfaces"][0]["binding"] = {"name": "passt"}
    passt["spec"]["domain"]["devices"]["interfaces"][0]["ports"] = [
        {"port": 7}, {"port": 80}, {"port": 7, "protocol": "UDP"},
    ]  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_vmi_manifest("bridged", binding="bridge")))
    with bindings.passt_plugin(k):
        bindings.apply_when_admitted(k, ns, passt)
        bindings.assert_unregistered_refused(k, ns, passt)
        _bridge_and_passt_serve(k, real_cluster, ns, target)


def _bridge_and_passt_serve(
    k: Kubectl, real_cluster: Cluster, ns: str, target: dict[str, Any]
) -> None:
    ips = {}
    for name, markers in (("bridged", ()), ("passt", ("KUBEVIRT-PY-PING-", "KUBEVIRT-PY-DHCP6"))):
        vmi = _running_vmi(k, ns, name)
        ips[name] = pod_ip = _launcher_ip(k, ns, vmi)
        serial = _guest_says(
            real_cluster, vmi, "KUBEVIRT-PY-SERVICES-UP", "KUBEVIRT-PY-DHCP", *markers
        )
        assert f"KUBEVIRT-PY-DHCP eth0 {pod_ip}/" in serial, serial[-1500:]
        conditions = {c["type"]: c for c in vmi["status"].get("conditions", [])}
        migratable = conditions["LiveMigratable"]
        if name == "bridged":
            assert migratable["status"] == "False", migratable
            assert migratable["reason"] == "InterfaceNotLiveMigratable", migratable
        else:
            assert migratable["status"] == "True", migratable
    assert f"KUBEVIRT-PY-PING-OK {target['podIP']}" in serial, serial[-1500:]
    passt_ips = _launcher_ips(k, ns, vmi)  # passt's own DHCPv6 hands the pod's IPv6 over
    assert f"KUBEVIRT-PY-DHCP6 eth0 {passt_ips[1]} " in serial, serial[-1500:]
    requests = {
        name: bindings.compute_memory_request(k, ns, _pod_uid(_running_vmi(k, ns, name))[1])
        for name in ips
    }  # the plugin's computeResourceOverhead on passt's launcher only
    assert requests["passt"] - requests["bridged"] == parse_bytes(bindings.OVERHEAD), requests
    assert_passt_confined(k, real_cluster, ns, vmi)
    node, _ = _pod_uid(_running_vmi(k, ns, "bridged"))
    hosts = (ips["bridged"], *passt_ips)
    logs = _probe(k, ns, "probe-bridge", *hosts, node=_other(node))
    for pod_ip in ips.values():
        _assert_served(logs, pod_ip)
    assert f"{passt_ips[1]} http80 KUBEVIRT-PY-HTTP-OK" in logs, logs
    (iface,) = _named_vmi(k, ns, "passt")["status"]["interfaces"]
    assert iface["ipAddresses"] == passt_ips, iface
    _passt_migrates_keeping_its_address(k, ns, passt_ips)


def _named_vmi(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    out = k("get", "vmi", name, "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def _passt_migrates_keeping_its_address(k: Kubectl, ns: str, addresses: list[str]) -> None:
    source, _ = _pod_uid(_running_vmi(k, ns, "passt"))
    vmim = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "passt-moves"},
        "spec": {"vmiName": "passt"},
    }
    k("create", "-n", ns, "-f", "-", stdin=json.dumps(vmim))

    def phase() -> str | None:
        out = json.loads(k("get", "vmim", "passt-moves", "-n", ns, "-o", "json"))
        return out.get("status", {}).get("phase")  # type: ignore[no-any-return]

    _wait(lambda: phase() in ("Succeeded", "Failed"), 240, "the passt VMIM final", phase)
    assert phase() == "Succeeded", k("get", "vmim", "passt-moves", "-n", ns, "-o", "yaml")

    def node() -> str | None:
        return _named_vmi(k, ns, "passt").get("status", {}).get("nodeName")  # type: ignore[no-any-return]

    _wait(lambda: node() not in (None, source), 120, "the passt VMI on the other node", node)
    new_ip, new_ip6 = _launcher_ips(k, ns, _named_vmi(k, ns, "passt"))
    assert new_ip != addresses[0]

    def reported() -> dict[str, Any]:
        (iface,) = _named_vmi(k, ns, "passt")["status"]["interfaces"]
        return iface  # type: ignore[no-any-return]

    agent = _wait(
        lambda: "guest-agent" in ((i := reported()).get("infoSource") or "") and i,
        120, "the guest agent's interface report", reported,
    )  # fmt: skip
    assert agent["ipAddress"] == addresses[0], agent  # the guest kept its addresses
    assert agent["ipAddresses"] == addresses, agent
    logs = _probe(k, ns, "probe-passt-moved", new_ip, new_ip6, node=source)
    _assert_served(logs, new_ip)
    assert f"{new_ip6} http80 KUBEVIRT-PY-HTTP-OK" in logs, logs


def test_masquerade_vm_serves_after_live_migration(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The demo VM (masquerade) live-migrates to the other node, where virt-handler wired
    the target pod before the launcher took the guest in: a pod reaches the guest on the
    target pod's IP over TCP, HTTP and UDP."""
    k, ns = real_stack, real_namespace
    vmi = start_demo(k, ns)
    source, _ = _pod_uid(vmi)
    _guest_says(real_cluster, vmi, "KUBEVIRT-PY-SERVICES-UP", "KUBEVIRT-PY-DHCP eth0 10.0.2.2/")
    done = _virtctl(real_cluster.kubeconfig, ns, "migrate", "demo", "--wait", "--timeout", "240")
    assert done.returncode == 0, done.stderr
    moved = _wait(
        lambda: (v := _vmi(k, ns)).get("status", {}).get("nodeName") not in (None, source) and v,
        120, "the VMI on the other node", lambda: _vmi(k, ns).get("status"),
    )  # fmt: skip
    target, _ = _pod_uid(moved)
    pod_ip = _launcher_ip(k, ns, moved)
    _assert_served(_probe(k, ns, "probe-migrated", pod_ip, node=source), pod_ip)
    assert target != source
