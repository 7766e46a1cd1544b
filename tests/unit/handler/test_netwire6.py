"""Masquerade on a dual-stack pod: the IPv6 guest range, NAT66, and IPv4 left as it was."""

from __future__ import annotations

from typing import Any

from handler.netwire import Target, masquerade_batch, nat_rules, nat_ruleset
from handler.netwire6 import FORWARDING, pod_has_ipv6
from handler.podnet import pod_target
from shared import podnet
from shared.model import VirtualMachineInstance
from shared.podnet import Binding, PodWiring, WiredInterface
from tests.unit.handler.fakes import vmi_dict

V4 = {"family": "inet", "local": "198.18.1.5", "prefixlen": 24, "scope": "global"}
V6 = {"family": "inet6", "local": "fd0d:4a03:aeea:1::5", "prefixlen": 64, "scope": "global"}
LINK_LOCAL = {"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"}


def _links(*addrs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"eth0": {"ifname": "eth0", "mtu": 1500, "addr_info": list(addrs)}}


def test_a_single_stack_pod_is_wired_as_before() -> None:
    """An IPv4-only pod (a link-local IPv6 address does not count): the IPv4 commands,
    sysctl and ruleset only, exactly those of masquerade without IPv6."""
    target = Target(index=0, name="default", binding=Binding.MASQUERADE)
    plan = masquerade_batch(_links(V4, LINK_LOCAL), uid=107, target=target)
    assert not plan.dual
    assert plan.sysctls == {"net.ipv4.ip_forward": "1"}
    assert plan.nft == nat_rules(target)
    assert plan.ip[-1] == ["addr", "replace", "10.0.2.1/24", "dev", "k6t-eth0"]


def test_a_dual_stack_pod_gets_the_ipv6_gateway_forwarding_and_nat66() -> None:
    """A pod with a global IPv6 address: the bridge also holds the IPv6 range's gateway
    (fd10:0:2::1/120 by default, no duplicate detection), IPv6 forwarding is on in the pod,
    and an ip6 table DNATs to the guest (::2) and masquerades it, after the IPv4 rules."""
    target = Target(index=0, name="default", binding=Binding.MASQUERADE)
    plan = masquerade_batch(_links(V4, V6), uid=107, target=target)
    assert plan.dual
    assert plan.ip[-1] == ["addr", "replace", "fd10:0:2::1/120", "dev", "k6t-eth0", "nodad"]
    assert plan.sysctls == {"net.ipv4.ip_forward": "1", FORWARDING: "1"}
    assert plan.nft.startswith(nat_rules(target))
    assert 'iifname "eth0" meta l4proto tcp dnat to fd10:0:2::2' in plan.nft
    assert 'ip6 saddr fd10:0:2::2 oifname "eth0" masquerade' in plan.nft
    assert "table ip6 kubevirt_py_nat {}\ndelete table ip6 kubevirt_py_nat\n" in plan.nft


def test_nat66_leads_only_the_listed_ports() -> None:
    """Listed ports: only those are DNATed over IPv6 too."""
    guest = podnet.guest_range6("fd10:0:3::/120").guest
    rules = nat_ruleset("ip6", guest, tcp_ports=(80, 22, 80), udp_ports=(), listed=True)
    assert 'iifname "eth0" tcp dport { 22, 80 } dnat to fd10:0:3::2' in rules
    assert "udp" not in rules and "l4proto" not in rules


def test_vm_ipv6_network_cidr_moves_the_guest_range() -> None:
    """networks[].pod.vmIPv6NetworkCIDR gives the gateway (::1) and guest (::2) of its
    range; unset, KubeVirt's fd10:0:2::/120."""
    raw = vmi_dict(name="v")
    raw["spec"]["domain"]["devices"]["interfaces"] = [{"name": "p", "masquerade": {}}]
    raw["spec"]["networks"] = [{"name": "p", "pod": {"vmIPv6NetworkCIDR": "fd10:0:3::/120"}}]
    target = pod_target(VirtualMachineInstance.from_dict(raw))
    assert target is not None
    assert (target.guest_range6.gateway, target.guest_range6.guest) == (
        "fd10:0:3::1",
        "fd10:0:3::2",
    )
    assert target.guest_range6.prefix == 120
    default = podnet.guest_range6(None)
    assert (default.gateway, default.guest, default.prefix) == ("fd10:0:2::1", "fd10:0:2::2", 120)


def test_the_contract_carries_the_guest_ipv6_address() -> None:
    """The wiring file round-trips the guest's IPv6 address for the launcher's DHCPv6."""
    wired = WiredInterface(
        name="default", binding=Binding.MASQUERADE, tap="tap0", bridge="k6t-eth0",
        guest_ip="10.0.2.2", prefix=24, server_ip="10.0.2.1", gateway="10.0.2.1",
        guest_ip6="fd10:0:2::2", prefix6=120,
    )  # fmt: skip
    wiring = PodWiring(interfaces=(wired,))
    assert PodWiring.from_json(wiring.to_json()) == wiring


def test_pod_has_ipv6_needs_a_global_address() -> None:
    """Only a global-scope IPv6 address makes the pod dual-stack."""
    assert pod_has_ipv6(_links(V4, V6)["eth0"])
    assert not pod_has_ipv6(_links(V4, LINK_LOCAL)["eth0"])
    assert not pod_has_ipv6({})
