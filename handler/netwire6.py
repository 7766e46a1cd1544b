"""Masquerade's IPv6 half on a dual-stack pod (KubeVirt's): the in-pod bridge gets the
guest range's gateway (``vmIPv6NetworkCIDR``, fd10:0:2::/120 by default: ::1), the guest
gets ::2 by DHCPv6 (launcher/dhcp6.py), and NAT66 in an ``ip6`` nftables table of the same
name DNATs the pod's IPv6 TCP/UDP ports to the guest and masquerades what it sends out.

A pod without a global IPv6 address on its interface (a single-stack cluster) gets none of
this: its wiring is the IPv4 one, unchanged.
"""

from __future__ import annotations

from typing import Any

from shared import podnet
from shared.podnet import GuestRange

FORWARDING = "net.ipv6.conf.all.forwarding"


def pod_has_ipv6(link: dict[str, Any]) -> bool:
    """The pod interface holds a global IPv6 address (`ip -j addr show`'s entry)."""
    return any(
        info.get("family") == "inet6" and info.get("scope") == "global"
        for info in link.get("addr_info", ())
    )


def bridge_address(rng: GuestRange, *, bridge: str) -> list[str]:
    """The `ip` command giving the bridge the range's gateway (no duplicate detection: the
    range exists only inside the pod)."""
    return ["addr", "replace", f"{rng.gateway}/{rng.prefix}", "dev", bridge, "nodad"]


def nat6_rules(
    rng: GuestRange,
    *,
    tcp_ports: tuple[int, ...],
    udp_ports: tuple[int, ...],
    listed: bool,
    pod_if: str = podnet.POD_INTERFACE,
) -> str:
    """The NAT66 ruleset (replacing an earlier one of the same table): every port, or the
    listed ones, to the guest; the guest's traffic masqueraded behind the pod's address."""
    guest, table = rng.guest, podnet.NFT_TABLE
    inbound = []
    for proto, ports in (("tcp", tcp_ports), ("udp", udp_ports)):
        if not listed:
            inbound.append(f'iifname "{pod_if}" meta l4proto {proto} dnat to {guest}')
        elif ports:
            numbers = ", ".join(str(p) for p in sorted(set(ports)))
            inbound.append(f'iifname "{pod_if}" {proto} dport {{ {numbers} }} dnat to {guest}')
    pre = "\n".join(f"    {rule}" for rule in inbound)
    return (
        f"table ip6 {table} {{}}\ndelete table ip6 {table}\n"
        f"table ip6 {table} {{\n"
        "  chain prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n"
        f"{pre}\n  }}\n"
        "  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
        f'    ip6 saddr {guest} oifname "{pod_if}" masquerade\n  }}\n'
        "}\n"
    )
