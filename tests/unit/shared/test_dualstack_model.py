"""Dual-stack on the pod network: vmIPv6NetworkCIDR validated, both pod IPs reported."""

from __future__ import annotations

import pytest

from shared.launcherpod import decode_pod
from shared.model import VirtualMachineInstance
from tests.unit.controller.builders import pod_dict
from tests.unit.handler.fakes import vmi_dict
from tests.unit.shared._validation_support import messages_at, vmi_errors

FIELD = "spec.networks[0].pod.vmIPv6NetworkCIDR"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        pytest.param("10.0.2.0/24", "not a valid IPv6 CIDR", id="ipv4"),
        pytest.param("fd10:0:2::", "not a valid IPv6 CIDR", id="no-prefix"),
        pytest.param("fd10::/129", "not a valid IPv6 CIDR", id="prefix-too-long"),
        pytest.param("nonsense", "not a valid IPv6 CIDR", id="garbage"),
        pytest.param("fd10:0:2::/127", "a prefix of at most /126", id="no-room"),
    ],
)
def test_bad_vm_ipv6_network_cidr_is_refused_naming_the_field(value: str, fragment: str) -> None:
    """A vmIPv6NetworkCIDR that is not an IPv6 range with room for a gateway and a guest
    is refused at that field."""
    found = messages_at(vmi_errors({FIELD: value}), FIELD)
    assert any(fragment in m for m in found), found


def test_a_good_vm_ipv6_network_cidr_passes() -> None:
    """KubeVirt's own default, and a narrower range, pass."""
    for value in ("fd10:0:2::/120", "fd10:0:3::/126"):
        assert messages_at(vmi_errors({FIELD: value}), FIELD) == []


def _vmi(binding: str) -> VirtualMachineInstance:
    raw = vmi_dict()
    value = {"name": "passt"} if binding == "binding" else {}
    raw["spec"]["domain"]["devices"]["interfaces"] = [{"name": "p", binding: value}]
    raw["spec"]["networks"] = [{"name": "p", "pod": {}}]
    return VirtualMachineInstance.from_dict(raw)


def test_masquerade_and_passt_report_both_pod_ips() -> None:
    """On a dual-stack pod a masquerade or passt interface (`passtBinding` or the `passt`
    plugin: passt's DHCPv6 hands the guest the pod's IPv6 address) lists both pod IPs
    (IPv4 first) in ipAddresses, ipAddress the IPv4 one; bridge (the guest takes the IPv4
    address only) and a single-stack pod list the one IP, as before."""
    both = ("198.18.1.5", "fd0d:4a03:aeea:1::5")
    for binding in ("masquerade", "passtBinding", "binding"):
        (s,) = _vmi(binding).interface_statuses(pod_ip=both[0], pod_ips=both)
        assert (s.ip_address, s.ip_addresses) == (both[0], both), binding
    (bridged,) = _vmi("bridge").interface_statuses(pod_ip=both[0], pod_ips=both)
    assert bridged.ip_addresses == (both[0],)
    (single,) = _vmi("binding").interface_statuses(pod_ip=both[0])
    assert single.ip_addresses == (both[0],)


def test_the_pod_view_keeps_pod_ips() -> None:
    """status.podIPs is kept, in order, beside podIP."""
    raw = pod_dict(node="node01", phase="Running")
    raw["status"]["podIP"] = "198.18.1.5"
    raw["status"]["podIPs"] = [{"ip": "198.18.1.5"}, {"ip": "fd0d:4a03:aeea:1::5"}]
    pod = decode_pod(raw)
    assert (pod.ip, pod.ips) == ("198.18.1.5", ("198.18.1.5", "fd0d:4a03:aeea:1::5"))
