"""status.interfaces of a passt VMI after a migration: the passt interface keeps the
address the guest holds (the first pod's IP, KubeVirt 1.8's passt), a masquerade one
follows the pod."""

from __future__ import annotations

from controller.vmi.logic import with_pod_ip
from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance
from tests.unit.controller.builders import vmi_dict


def _vmi() -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "p", "passtBinding": {}},
        {"name": "m", "masquerade": {}},
    ]
    raw["spec"]["networks"] = [{"name": "p", "pod": {}}, {"name": "m", "pod": {}}]
    return VirtualMachineInstance.from_dict(raw)


def test_a_passt_interface_keeps_its_address_on_a_new_pod() -> None:
    """First pod: both interfaces get its IP; the target pod: only masquerade's changes."""
    vmi = _vmi()
    first = with_pod_ip(
        vmi.status, vmi, LauncherPod(namespace="n", name="a", uid="a", ip="10.0.1.5")
    )
    assert {i.name: i.ip_address for i in first.interfaces} == {"p": "10.0.1.5", "m": "10.0.1.5"}
    moved = with_pod_ip(first, vmi, LauncherPod(namespace="n", name="b", uid="b", ip="10.0.2.9"))
    assert {i.name: i.ip_address for i in moved.interfaces} == {"p": "10.0.1.5", "m": "10.0.2.9"}


def test_a_dual_stack_passt_interface_keeps_both_addresses_on_a_new_pod() -> None:
    """Dual-stack: the passt interface lists the first pod's IPs (IPv4 first) and keeps
    them on the target pod (the target's passt gives the guest both again); masquerade's
    follow the pod."""
    vmi = _vmi()
    a = ("10.0.1.5", "fd00:1::5")
    first = with_pod_ip(
        vmi.status, vmi, LauncherPod(namespace="n", name="a", uid="a", ip=a[0], ips=a)
    )
    assert {i.name: i.ip_addresses for i in first.interfaces} == {"p": a, "m": a}
    b = ("10.0.2.9", "fd00:2::9")
    moved = with_pod_ip(first, vmi, LauncherPod(namespace="n", name="b", uid="b", ip=b[0], ips=b))
    assert {i.name: i.ip_addresses for i in moved.interfaces} == {"p": a, "m": b}
