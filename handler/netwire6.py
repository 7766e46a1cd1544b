"""Masquerade's IPv6 half on a dual-stack pod (KubeVirt's): the in-pod bridge gets the
guest range's gateway (``vmIPv6NetworkCIDR``, fd10:0:2::/120 by default: ::1), the guest
gets ::2 by DHCPv6 (launcher/dhcp6.py), and NAT66 in an ``ip6`` nftables table of the same
name (handler/netwire.py's `nat_ruleset`, as for IPv4) DNATs the pod's IPv6 TCP/UDP ports
to the guest and masquerades what it sends out.

A pod without a global IPv6 address on its interface (a single-stack cluster) gets none of
this: its wiring is the IPv4 one, unchanged.
"""

from __future__ import annotations

from typing import Any

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
